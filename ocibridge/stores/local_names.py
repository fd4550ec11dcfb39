"""The names of the local store, as Docker, kit and modctl users type them: ``NAME[:TAG]``.

The store (the embedded default OCI image layout) names each model ``NAME:TAG``, written as
it is in the layout's ``org.opencontainers.image.ref.name``: containers/image splits
``oci:PATH:REF`` at the first ':', so ``skopeo copy oci:STORE:mymodel:v2`` reads the same
entry. NAME follows Docker's repository grammar without a registry host (``myorg/model``),
TAG Docker's tag grammar, ``latest`` when omitted.

The release before wrote other names, still read here (*legacy*): ``NAME`` for the latest,
``NAME-VERSION``, and a bare ``TAG`` (``ocibridge tag mymodel v2``, ``load``) of a model whose
config names it NAME. :func:`rewrite_legacy` renames those on the next write.

Cheap to import: the standard library and what :mod:`ocibridge.stores.layout` imports.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ocibridge.core import boundedjson
from ocibridge.errors import InvalidReference, OcibridgeError
from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME, family_of_artifact
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import check_ref_name
from ocibridge.stores.base import MAX_MANIFEST_BYTES

if TYPE_CHECKING:  # (the name rules need no store: a push to a registry checks its name, loads no layout)
    from ocibridge.stores.layout import LayoutStore

DEFAULT_TAG = "latest"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*\Z")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
#: schemes a text may start with that are no NAME (``oci:x`` is a layout, not NAME ``oci``)
_SCHEMES = ("oci", "ollama", "hf")
#: cosign's ``sha256-<hex>.sig/.att/.sbom`` and the referrers fallback ``sha256-<hex>``:
#: names of what is attached to a model, never a model's own
ATTACHED_TAG = re.compile(r"^sha256-([0-9a-f]{64})(\.sig|\.att|\.sbom)?\Z")


def is_name(name: str) -> bool:
    """Whether ``name`` is a NAME: Docker's repository grammar, and no registry host (a first
    component with '.' or ':' or ``localhost`` is one when a '/' follows, as Docker reads it)."""
    if len(name) > 255 or not _NAME_RE.match(name):
        return False
    first, slash, _ = name.partition("/")
    return not (slash and ("." in first or first == "localhost"))


def is_tag(tag: str) -> bool:
    """Whether ``tag`` is a TAG: Docker's tag grammar."""
    return bool(_TAG_RE.match(tag))


def split_local_name(text: str) -> tuple[str, str] | None:
    """``NAME[:TAG]`` as (NAME, TAG or ``latest``); None when ``text`` is no local name (a scheme,
    a host, a digest, a path, uppercase in NAME...)."""
    name, colon, tag = text.partition(":")
    if not colon:
        tag = DEFAULT_TAG
    if "@" in text or (colon and name in _SCHEMES) or not is_name(name) or not is_tag(tag):
        return None
    try:  # written as the layout's ref.name: a run of separators Docker allows ("__") it does not
        check_ref_name(stored_name(name, tag))
    except InvalidReference:
        return None
    return name, tag


def stored_name(name: str, tag: str) -> str:
    """The ref.name a model named NAME:TAG is written under."""
    return f"{name}:{tag}"


def sanitized(name: str, tag: str = DEFAULT_TAG) -> tuple[str, str]:
    """A NAME and TAG made of free text (a model's name and version, a legacy name): what the
    grammars refuse becomes '-', NAME lowercase, one separator at a time (the ref.name grammar);
    ``model`` and ``latest`` when nothing is left."""
    parts = []
    for part in name.lower().split("/"):
        part = re.sub(r"[^a-z0-9._-]+", "-", part)
        part = re.sub(r"[._-]*([._-])[._-]*", r"\1", part).strip("._-")  # one separator at a time
        if part:
            parts.append(part)
    safe_name = "/".join(parts)[:255].strip("/._-") or "model"
    if not is_name(safe_name):  # a host-like first part: made one component
        safe_name = safe_name.replace("/", "-").replace(".", "-")
    safe_tag = re.sub(r"[^A-Za-z0-9_.-]+", "-", tag)
    safe_tag = re.sub(r"[._-]*([._-])[._-]*", r"\1", safe_tag).strip("._-")[:128].rstrip("._-") or DEFAULT_TAG
    return safe_name, safe_tag


def config_name(store: LayoutStore, entry: Descriptor) -> str | None:
    """The name a model's config gives it (ModelPack ``descriptor.name``); None for anything
    else (a signature, an attached file, an image)."""
    if entry.size > MAX_MANIFEST_BYTES:
        return None
    try:
        node = parse_manifest_bytes(store.fetch_bytes(entry), entry.mediaType)
        if not isinstance(node, Manifest) or family_of_artifact(node.artifactType, node.config.mediaType) is None:
            return None
        data = boundedjson.loads(store.fetch_bytes(node.config))
    except (OcibridgeError, ValueError):
        return None
    descriptor = data.get("descriptor") if isinstance(data, dict) else None
    name = descriptor.get("name") if isinstance(descriptor, dict) else None
    return name if isinstance(name, str) and name else None


def find_local(store: LayoutStore, name: str, tag: str, *, index: Index | None = None) -> str | None:
    """The ref.name that ``NAME:TAG`` means in ``store``: ``NAME:TAG`` itself, else a legacy
    name (``NAME`` for latest, ``NAME-TAG``, a bare ``TAG`` of a model whose config names it
    NAME); None when the store holds none. ``index``: the store's index, already read."""
    listed = {(e.annotations or {}).get(ANNOTATION_REF_NAME): e for e in (index or store.read_index()).manifests}
    for candidate in (stored_name(name, tag), name if tag == DEFAULT_TAG else None, f"{name}-{tag}"):
        if candidate in listed:
            return candidate
    bare = listed.get(tag)
    if bare is not None and tag != name and _legacy_base(config_name(store, bare)) == name:
        return tag
    return None


def shown_name(ref_name: str, config: str | None) -> tuple[str, str]:
    """The NAME and TAG ``ls`` shows for an entry named ``ref_name`` (``config``: its model's
    config name), so that :func:`find_local` of them finds that entry again."""
    name, colon, tag = ref_name.partition(":")
    if colon:
        return (name, tag) if is_name(name) and is_tag(tag) else (ref_name, DEFAULT_TAG)
    base = _legacy_base(config)
    if base is None or base == ref_name:
        return ref_name, DEFAULT_TAG
    if ref_name.startswith(base + "-") and is_tag(ref_name[len(base) + 1:]):
        return base, ref_name[len(base) + 1:]
    return base, ref_name


def listed_name(store: LayoutStore, ref_name: str, config: str | None, *,
                index: Index | None = None) -> tuple[str, str]:
    """:func:`shown_name`, unless another entry owns that pair (a newer name beside a legacy
    one, two legacy readings of one pair): then the whole stored name, with ``latest``, which
    :func:`find_local` reads as that entry (unless that is the pair too: an old release wrote
    ``m`` beside ``m:latest``; ``oci:STORE:m`` still names it). What ``ls`` prints, and what a
    rewrite names it."""
    name, tag = shown_name(ref_name, config)
    if find_local(store, name, tag, index=index) != ref_name:
        return ref_name, DEFAULT_TAG
    return name, tag


def _legacy_base(config: str | None) -> str | None:
    """The NAME the release before made of a config name (its tags began with it)."""
    if config is None:
        return None
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", config).strip(".-")[:128] or "model"


def tags_of(store: LayoutStore, name: str) -> list[str]:
    """The TAGs NAME has in ``store``, as ``ls`` shows them (``tags NAME``)."""
    found = set()
    for entry in store.read_index().manifests:
        ref = (entry.annotations or {}).get(ANNOTATION_REF_NAME)
        if ref is None or ATTACHED_TAG.match(ref):
            continue
        shown, tag = listed_name(store, ref, config_name(store, entry) if is_legacy(ref) else None)
        if shown == name:
            found.add(tag)
    return sorted(found)


def is_legacy(ref_name: str) -> bool:
    """Whether a model listed as ``ref_name`` was named by the release before (no ':'); what is
    attached to a model (:data:`ATTACHED_TAG`) keeps its name."""
    return ":" not in ref_name and not ATTACHED_TAG.match(ref_name)


def rewrite_legacy(store: LayoutStore) -> dict[str, str]:
    """Rename every legacy model entry of ``store`` to its ``NAME:TAG`` (what ``ls`` showed,
    :func:`listed_name`, made to fit the grammars), same digest, other annotations kept, in one
    write under the layout's lock. Entries of no model (no config name) keep their names, as does one whose
    new name is already taken. Returns old -> new of those renamed."""
    renames: dict[str, str] = {}
    index = store.read_index()
    for entry in index.manifests:
        ref = (entry.annotations or {}).get(ANNOTATION_REF_NAME)
        if ref is None or not is_legacy(ref):
            continue
        config = config_name(store, entry)
        if config is not None:
            renames[ref] = stored_name(*sanitized(*listed_name(store, ref, config, index=index)))
    if not renames:
        return {}
    done = store.rename(renames)
    return {old: renames[old] for old in done}


def nearest_names(store: LayoutStore, text: str, most: int = 3) -> list[str]:
    """The ``NAME:TAG`` names of ``store`` nearest to ``text`` (a bare name that the store does
    not hold and a registry did not answer for: a typo, most likely), closest first; the whole
    list when it is short."""
    import difflib

    names = sorted({ref for e in store.read_index().manifests
                    if (ref := (e.annotations or {}).get(ANNOTATION_REF_NAME)) and ":" in ref})
    if len(names) <= most:
        return names
    wanted = text if ":" in text else f"{text}:{DEFAULT_TAG}"
    return difflib.get_close_matches(wanted, names, n=most, cutoff=0.4) or \
        difflib.get_close_matches(wanted.partition(":")[0], [n.partition(":")[0] for n in names], n=most, cutoff=0.4)
