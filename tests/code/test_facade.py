"""The package's lazy façade (ocibridge/__init__.py): its table of homes names each public name
once and exactly the names of ``__all__``, each found where the table says; ``help(ocibridge)``
opens with the API by task (issue 60, issue 63 item 9)."""

from __future__ import annotations

import collections
import importlib

import ocibridge

FAMILIES = ("publish", "fetch", "sign", "serve", "mirror", "Kubernetes")


def test_each_public_name_has_one_home():
    counts = collections.Counter(name for _, names in ocibridge._TABLE for name in names)
    twice = sorted(name for name, n in counts.items() if n > 1)
    assert twice == [], f"named twice in the façade's table: {twice}"


def test_the_table_names_exactly_all():
    homes = {name for _, names in ocibridge._TABLE for name in names}
    assert sorted(homes - set(ocibridge.__all__)) == []
    assert sorted(set(ocibridge.__all__) - homes) == []
    assert len(ocibridge.__all__) == len(set(ocibridge.__all__))


def test_each_name_is_where_the_table_says():
    for home, names in ocibridge._TABLE:
        module = importlib.import_module(f"ocibridge.{home}")
        missing = [name for name in names if getattr(module, name, None) is None]  # a module may load lazily
        assert missing == [], f"ocibridge.{home} defines no {missing}"


def test_help_opens_with_the_api_by_task():
    doc = ocibridge.__doc__ or ""
    summary = doc.splitlines()[0]
    assert all(family.lower() in summary.lower() for family in FAMILIES), summary
    for family in FAMILIES:
        assert f"\n{family.capitalize() if family != 'Kubernetes' else family}\n" in doc, family
    functions = [name for name in ocibridge.__all__ if name[0].islower() and name not in ("load", "save")]
    unnamed = [name for name in functions if f"``{name}``" not in doc]
    assert unnamed == [], f"public functions the map in ocibridge's docstring does not name: {unnamed}"
