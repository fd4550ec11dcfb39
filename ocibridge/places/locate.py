"""What a text names, decided in one place: :func:`locate` turns what a user typed into a typed
locator, once, at the edge (the CLI's command functions and the API's public functions).

The role says what the argument may be; the same text can mean different things in different
roles (``m`` is the stored model ``m:latest`` for ``inspect``, the directory ``m`` for ``pull
REF m``):

- ``MODEL`` (inspect, validate, pull SRC, copy SRC, path, tag, sign, k8s …): a store reference
  (``oci:``, a kind's scheme such as ``ollama:`` or ``hf:``, a registry, a directory holding an
  OCI layout). A bare ``NAME[:TAG]`` is the local store's model when it holds one of that name
  (even when a directory of that name exists), else Docker's defaults (``docker.io/library/NAME``).
- ``DESTINATION`` (push DEST, copy DST, convert DST): a store; a name without a registry host
  is a name in the local store, new or not.
- ``SOURCE`` (push SOURCE): an existing path (it wins), an archive, a kind's place (``hf:``), a
  store; a bare name is the stored model when no path of that name exists.
- ``OUTPUT`` (pull DEST): a directory, an archive, a kind's place, a store (with a host).
- ``REGISTRY`` (lazy reads, ``k8s volume`` documents): a registry reference only.
- ``JOB`` (mirror jobs, bundle entries): a store, or a repository on a Hub endpoint
  (``hf://ORG/NAME``, a mirror source); what is no layout or kind's name is a registry name
  (Docker's defaults).
- ``LOCAL`` (rm): a model of the local store (an unknown name is an error naming it) or a layout.
- ``LAYOUT`` (ls, prune): a layout, ``oci:DIR`` or a directory holding one.

Kinds register their schemes and grammars in their table (``schemes``, ``grammar``), which the
kinds package provides here (:mod:`.kinds`); the layout scheme ``oci:`` and registry names are
the stores' own. Nothing below the edges parses a reference text again:
:func:`ocibridge.places.targets.open_store_target` opens a locator as it is.
"""

from __future__ import annotations

import enum
import os
import re
from typing import TYPE_CHECKING, Any

from ocibridge.errors import InvalidReference, NotFound, UsageError
from ocibridge.oci import reference as refs
from ocibridge.oci.reference import LayoutReference, PathReference, RegistryReference
from ocibridge.places import kinds
from ocibridge.places.locators import KindPlace, Locator, is_store, on_registry, on_this_machine, text_of

if TYPE_CHECKING:
    from ocibridge.stores.registry.options import RegistryOptions
    from ocibridge.stores.target import StoreTarget

__all__ = ["Locator", "Role", "locate", "on_registry", "on_this_machine", "open_target", "text_of"]


class Role(enum.Enum):
    """What an argument may be (see the module's table)."""

    MODEL = "model"
    DESTINATION = "destination"
    SOURCE = "source"
    OUTPUT = "output"
    REGISTRY = "registry"
    JOB = "job"
    LOCAL = "local"
    LAYOUT = "layout"


#: what an argument in each role is called in a message
_NAMED = {Role.MODEL: "model reference", Role.DESTINATION: "destination", Role.SOURCE: "source",
          Role.OUTPUT: "destination", Role.REGISTRY: "registry reference", Role.JOB: "model reference",
          Role.LOCAL: "model name", Role.LAYOUT: "layout"}


def locate(text: str | Locator, role: Role) -> Locator:
    """The typed locator ``text`` is in ``role``; a typed one passes through (checked against
    the role). One error line (:class:`InvalidReference`/:class:`UsageError`) when it is none."""
    if not isinstance(text, str):
        return _checked(text, role, text_of(text))
    if not text.strip():  # a path of "" is the current directory: pushed whole, or written into
        raise UsageError(f"an empty {_NAMED[role]} (an unset shell variable?)")
    respelled = _other_tools_spelling(text)
    if respelled is not None:
        return _checked(refs.parse_registry_reference(respelled), role, text)
    if refs.is_layout_reference(text):
        return _checked(refs.parse_layout_reference(text), role, text)
    kind = kinds.by_scheme(text)
    if kind is not None:
        return _checked(_grammar(kind)(text), role, text)
    _no_other_scheme(text, role)
    if role is Role.REGISTRY and _stored(text) is not None:
        raise UsageError(f"{text} is a model of the local store; a registry reference is needed here "
                         "(host/repo:tag or @digest: push it to a registry first)")
    if role is Role.REGISTRY and refs.path_like(text):  # read as a registry name: "invalid registry host '.'"
        raise UsageError(f"{text} is a local path; a registry reference is needed here (host/repo:tag or "
                         f"@digest: push it to a registry first: ocibridge push {text} HOST/REPO:TAG)")
    if role is Role.REGISTRY or role is Role.JOB:
        return refs.parse_registry_reference(text)
    if role is Role.OUTPUT:
        return _output(text)
    if role is Role.SOURCE:
        return _source(text)
    if role is Role.DESTINATION:
        return _destination(text)
    if role is Role.LOCAL:
        return _local(text)
    if role is Role.LAYOUT:
        return _layout(text)
    return _model(text)


def open_target(ref: str | Locator, *, for_write: bool = False, options: RegistryOptions | None = None,
                **values: Any) -> StoreTarget:
    """The store a text names, for the Python API's callers: located (a model reference; a
    destination when opened for writing), then opened (:func:`ocibridge.places.targets.open_store_target`)."""
    from ocibridge.places.targets import open_store_target

    located = locate(ref, Role.DESTINATION if for_write else Role.MODEL)
    return open_store_target(located, for_write=for_write, options=options, **values)


# -- the roles ------------------------------------------------------------------------------------
def _model(text: str) -> Locator:
    stored = _stored(text)
    if stored is not None:
        return stored
    if os.path.exists(text) or refs.path_like(text):
        raise InvalidReference(_local_path(text, for_write=False))
    return refs.parse_registry_reference(text)


def _local(text: str) -> Locator:
    stored = _stored(text)
    if stored is not None:
        return stored
    if os.path.exists(text) or refs.path_like(text):  # a store command takes a directory holding a layout
        layout = _layout_directory(text)
        if layout is not None:
            return layout
    if os.path.exists(text) or refs.path_like(text) or _host_qualified(text):
        return _model(text)
    shown = text if ":" in text else f"{text}:latest"
    raise NotFound(f"no model {shown} in the local store (ocibridge ls lists them)")


def _layout(text: str) -> Locator:
    layout = _layout_directory(text)
    if layout is None:
        raise UsageError(f"{text}: not an OCI image layout (oci:PATH, or a directory holding one)")
    return layout


def _destination(text: str) -> Locator:
    if os.path.exists(text) or refs.path_like(text):
        raise InvalidReference(_local_path(text, for_write=True))
    if _host_qualified(text):
        return refs.parse_registry_reference(text)
    from ocibridge.places.targets import local_destination

    return local_destination(text)


def _source(text: str) -> Locator:
    if os.path.exists(text) or refs.path_like(text) or _named_as_file(text):
        return PathReference(text)
    stored = _stored(text)
    if stored is not None:
        return stored
    if _host_qualified(text) and "/" in text:
        return refs.parse_registry_reference(text)
    return PathReference(text)  # no such file: its format's reader says so


def _output(text: str) -> Locator:
    if os.path.exists(text) or refs.path_like(text) or _named_as_file(text):
        return PathReference(text)
    if _host_qualified(text) and "/" in text:
        return refs.parse_registry_reference(text)
    return PathReference(text)


# -- the rules the roles share ------------------------------------------------------------------
#: how other tools write a registry reference: skopeo's transport, helm's, flux's and oras' docs' scheme
_REGISTRY_SCHEMES = ("docker://", "oci://")
_URL_SCHEMES = ("https://", "http://")
#: a URL's scheme (RFC 3986) before ``://``
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def _other_tools_spelling(text: str) -> str | None:
    """A registry reference written as skopeo (``docker://REF``) or helm and flux (``oci://HOST/REPO``)
    write it: the reference without the scheme. ``oci://`` not followed by a registry host, and a
    URL, are answered with ocibridge's spellings (``oci:`` alone is a layout here)."""
    if text.startswith("docker://"):
        return text[len("docker://"):]
    if text.startswith("oci://"):
        rest = text[len("oci://"):]
        if _host_qualified(rest):
            return rest
        raise UsageError(f"{text}: write a registry model as HOST/REPO[:TAG] (oci://HOST/REPO also works) "
                         f"and an OCI layout as oci:PATH[:TAG] (one colon: oci:{rest})")
    if text.startswith(_URL_SCHEMES):
        rest = text.split("://", 1)[1].rstrip("/")
        host, _, path = rest.partition("/")
        if host in ("huggingface.co", "hf.co") and path.count("/") == 1:
            raise UsageError(f"{text}: a Hugging Face repository is hf:{path} (a model of the local Hugging Face "
                             f"cache) or, as a mirror job's source, hf://{path}")
        raise UsageError(f"{text}: a registry reference has no URL scheme: write {rest}; add --plain-http "
                         "for a registry that speaks HTTP")
    return None


def _no_other_scheme(text: str, role: Role) -> None:
    """``s3://…``, ``gs://…``, ``file://…``: a scheme no store or kind reads. Said as such, with
    the spellings that are read (as a registry name it was only "no scheme expected")."""
    scheme = _SCHEME.match(text)
    if scheme is None or os.path.exists(text):
        return
    ways = {Role.REGISTRY: "", Role.JOB: ", an OCI layout as oci:PATH[:TAG]; a mirror job's source also as "
            "ollama:NAME, ollama://[HOST/]NAME or hf://ORG/NAME"}.get(
        role, ", an OCI layout as oci:PATH[:TAG], a file or directory as its path")
    raise UsageError(f"{text}: ocibridge reads no {scheme.group(1)}:// places; write a registry model as "
                     f"HOST/REPO[:TAG] (no scheme){ways}")


def registry_text(text: str, usage: str) -> str:
    """``HOST[/PATH]`` for a command that talks to a registry itself (repo ls, check-registry,
    login), other tools' schemes (``docker://``, ``oci://``) dropped as a reference's are. A
    layout, a kind's place and a URL are refused as what they are (``usage``: what the command
    takes; a URL: what to write): read as a host, their colon was an odd port or an IPv6 address."""
    if not text.strip() or text in _REGISTRY_SCHEMES:
        raise UsageError(f"an empty registry (an unset shell variable?); {usage}")
    for scheme in _REGISTRY_SCHEMES:
        if text.startswith(scheme):
            return text[len(scheme):]
    if text.startswith(_URL_SCHEMES):
        rest = text.split("://", 1)[1].rstrip("/")
        raise UsageError(f"{text}: a registry is written without a URL scheme: write {rest} (add --plain-http "
                         "for one that speaks HTTP)")
    if refs.is_layout_reference(text):
        raise UsageError(f"{text} is an OCI image layout, not a registry; {usage}")
    kind = kinds.by_scheme(text)
    if kind is not None:
        raise UsageError(f"{text} is a model ({kind.schemes[0]}), not a registry; {usage}")
    return text


def registry_host(text: str, usage: str) -> str:
    """The ``HOST[:PORT]`` login and logout keep credentials under: a URL (Docker's own server
    string is ``https://index.docker.io/v1/``) or another tool's scheme is reduced to its host, as
    ``docker login`` reduces it; a layout or a model's place is refused (``usage``)."""
    if text.startswith(_URL_SCHEMES):
        text = text.split("://", 1)[1]
    host = registry_text(text, usage).split("/", 1)[0]
    if not host:
        raise UsageError(f"{text}: no registry host in it; {usage}")
    return host


def _stored(text: str) -> LayoutReference | None:
    """The local store's model a bare ``NAME[:TAG]`` names, if the store holds it."""
    if _host_qualified(text) or text.startswith(("/", ".", "~")):
        return None
    from ocibridge.places.targets import local_store_reference

    return local_store_reference(text)


def _host_qualified(text: str) -> bool:
    """Whether the first part of a name is a registry host (Docker's rule: it has a ``.`` or a
    ``:``, or is ``localhost``, and a ``/`` follows)."""
    first, sep, _ = text.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


def _named_as_file(text: str) -> bool:
    """An archive named by a registered suffix (``m.carton``) is a file, not a registry name."""
    return text.lower().endswith(tuple(s.lower() for s in kinds.file_suffixes()))


def _layout_directory(text: str) -> LayoutReference | None:
    """A directory holding an OCI image layout, written as a path: that layout."""
    from ocibridge.stores.layout import LAYOUT_FILE

    if os.path.isfile(os.path.join(os.path.expanduser(text), LAYOUT_FILE)):
        return LayoutReference(text, written=text)
    return None


def _grammar(kind: kinds.PlaceKind) -> Any:
    assert kind.grammar is not None, f"kind {kind.name!r} names schemes but no grammar"
    return kinds.loaded(kind.grammar)


def _checked(locator: Locator, role: Role, text: str) -> Locator:
    """The locator, if ``role`` takes its kind; else one error line saying what is taken."""
    if role is Role.REGISTRY and not isinstance(locator, RegistryReference):
        raise UsageError(f"{text}: a registry reference is needed here (host/repo:tag or @digest)")
    if isinstance(locator, KindPlace) and not locator.is_store and (locator.remote or role is Role.JOB):
        if role is Role.JOB and locator.remote:
            return locator  # a mirror job's source: the repository on a Hub endpoint
        raise UsageError(f"{text}: hf://ORG/NAME (a repository on a Hub endpoint) is a mirror job's source; "
                         "hf:ORG/NAME is a model of the local Hugging Face cache, which push, copy and convert read")
    if role in (Role.DESTINATION, Role.JOB) and not is_store(locator):
        raise UsageError(f"{text}: not a store to write to (oci:PATH[:TAG], host/repo[:tag] or a local NAME:TAG)")
    if role in (Role.MODEL, Role.LOCAL) and isinstance(locator, PathReference):
        raise InvalidReference(_local_path(text, for_write=False))
    if role is Role.LAYOUT and not isinstance(locator, LayoutReference):
        raise UsageError(f"{text}: not an OCI image layout (oci:PATH, or a directory holding one)")
    return locator


def _local_path(text: str, for_write: bool) -> str:
    """The error for a path given where a store is meant, with how to write it as a layout when
    it is one (``PATH`` or ``PATH:TAG``) or would be made one (a destination)."""
    from ocibridge.stores.layout import LAYOUT_FILE

    path = text
    head, sep, tag = text.rpartition(":")
    if sep and "/" not in tag and not os.path.exists(text):
        path = head  # PATH:TAG
    is_layout = os.path.isfile(os.path.join(os.path.expanduser(path), LAYOUT_FILE))
    hint = f"; as an OCI image layout it is written oci:{text}" if is_layout or for_write else ""
    return f"{text} is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag]){hint}"
