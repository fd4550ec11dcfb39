"""Which repositories and files may enter from the upstream, decided on the metadata model_info
gives: the card's license (``--upstream-license``), the operator's refused file
patterns (``--upstream-refuse-files``) and the pickle formats (``--upstream-allow-pickle``).
Each rule answers the flag that refuses, and why, or None: the proxy turns it into the Hub's 403."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

#: files that unpickle when loaded (code runs): refused unless --upstream-allow-pickle (and any other
#: file whose content is a pickle's: pickles.py)
PICKLE = ("*.bin", "*.pt", "*.pth", "*.pth.tar", "*.pkl", "*.pickle", "*.joblib", "*.dill", "*.ckpt")


def card_licenses(card: Mapping[str, Any] | None) -> list[str]:
    """The license ids a card's metadata names, lower-cased: ``license:`` (one id or a list), and
    with ``license: other`` its ``license_name``; none for a card that names none."""
    if not card:
        return []
    said = card.get("license")
    named = [said] if isinstance(said, str) else [s for s in said if isinstance(s, str)] \
        if isinstance(said, list) else []
    found = [n.strip().lower() for n in named if n.strip()]
    other = card.get("license_name")
    if "other" in found and isinstance(other, str) and other.strip():
        found.append(other.strip().lower())
    return found


def license_refused(allowed: Sequence[str], card: Mapping[str, Any] | None) -> str | None:
    """Why ``--upstream-license`` keeps a repository out (its card names no allowed license);
    None when no license is required or one it names is allowed."""
    if not allowed:
        return None
    named = card_licenses(card)
    wanted = {a.lower() for a in allowed}
    if any(n in wanted for n in named):
        return None
    shown = ", ".join(named) if named else "no license"
    return f"its card names {shown}: refused by --upstream-license ({', '.join(allowed)})"


def _matches(path: str, globs: Sequence[str]) -> bool:
    """A glob matches a file's whole path or its name (``*.onnx`` matches ``onnx/model.onnx``)."""
    lowered = path.lower()
    name = lowered.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(lowered, g.lower()) or fnmatch.fnmatchcase(name, g.lower()) for g in globs)


def files_refused(paths: Sequence[str], refuse: Sequence[str], allow_pickle: bool) -> tuple[list[str], str] | None:
    """The files that keep a commit out and the flag that refuses them: ``--upstream-refuse-files``
    first, then the pickle formats unless ``allow_pickle``; None when every file may enter."""
    refused = [p for p in paths if _matches(p, refuse)] if refuse else []
    if refused:
        return refused, f"--upstream-refuse-files ({', '.join(refuse)})"
    if not allow_pickle:
        pickled = [p for p in paths if _matches(p.rsplit("/", 1)[-1], PICKLE)]
        if pickled:
            return pickled, "--upstream-allow-pickle"
    return None
