"""Warm starts from Python: :func:`warm_save` attaches a compile cache to a model as a signed
referrer, :func:`warm_caches` lists those attached, :func:`warm_load` restores the one whose key
is this process's, after its signature verified under the policy (a cache is code that runs), and
:func:`warm_key` says what this process's key is. The CLI's ``warm`` command is one call of each;
the cache's key, artifact, packing and unpacking are ocibridge/warm/'s."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.errors import OcibridgeError, SignatureError, UsageError
from ocibridge.stores.opened import closes_its_stores
from ocibridge.warm.artifact import LAYER_TYPES, CacheArtifact, attached_caches, cache_manifest
from ocibridge.warm.cachekey import WarmKey, current_key, options_digest, torch_module

if TYPE_CHECKING:
    from ocibridge.api.options import SignOptions, TransferOptions
    from ocibridge.api.policy import Verification
    from ocibridge.oci.models import Descriptor
    from ocibridge.places.locators import Locator
    from ocibridge.signing.containers_policy import Scope
    from ocibridge.stores.base import Store, WritableStore

__all__ = ["CacheMismatch", "WarmCache", "WarmKey", "WarmList", "WarmLoaded", "WarmSaved", "options_digest",
           "warm_caches", "warm_key", "warm_load", "warm_save"]


class CacheMismatch(OcibridgeError):
    """No cache attached to the model has this process's key (the message names the field that differs)."""


@dataclass(frozen=True)
class WarmCache:
    """One compile cache attached to a model: its manifest ``digest``, its layer's ``size`` and ``key``."""

    digest: str
    size: int
    key: WarmKey

    def as_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "size": self.size, "key": self.key.as_dict()}


@dataclass(frozen=True)
class WarmSaved:
    """What :func:`save` attached: the cache's manifest ``digest`` (pinned ``reference``), its
    size, its files (0 for torch's bytes), and the signature forms written (empty: unsigned)."""

    reference: str
    digest: str
    subject: str
    size: int
    files: int
    key: WarmKey
    signed: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "digest": self.digest, "subject": self.subject, "size": self.size,
                "files": self.files, "key": self.key.as_dict(), "signed": list(self.signed)}


@dataclass(frozen=True)
class WarmList:
    reference: str
    subject: str
    caches: tuple[WarmCache, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "subject": self.subject, "caches": [c.as_dict() for c in self.caches]}


@dataclass(frozen=True)
class WarmLoaded:
    """What :func:`load` restored: the cache ``digest``, into ``dest`` (None: torch's in-process
    cache), its ``files`` and ``bytes``, and whether a signature was verified (``checked``)."""

    reference: str
    digest: str
    key: WarmKey
    dest: str | None
    files: int
    bytes: int
    checked: bool

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "digest": self.digest, "key": self.key.as_dict(), "dest": self.dest,
                "files": self.files, "bytes": self.bytes, "checked": self.checked}


def options_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The compile options a JSON file holds (an object), as ``--options FILE`` reads them."""
    from ocibridge.core import boundedjson
    from ocibridge.core.limits import MAX_SMALL_INPUT, read_small_file

    try:  # JSONDecodeError and UnicodeDecodeError are ValueErrors, as a too deep document is
        doc = boundedjson.loads(read_small_file(path, MAX_SMALL_INPUT, "--options", UsageError))
    except ValueError as e:
        raise UsageError(f"--options {os.fspath(path)}: not JSON ({' '.join(str(e).split())[:200]})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--options {os.fspath(path)}: not a JSON object")
    return doc


def _torch_compiler() -> Any:
    return torch_module("torch.compiler", "torch's portable compile cache needs torch")


def _model(reference: str | Locator, transfer: TransferOptions | None, *, for_write: bool = False
           ) -> tuple[Locator, WritableStore, Descriptor, str]:
    """The model ``reference`` names: where, its store, its manifest, its config digest."""
    from ocibridge.api.opening import open_located
    from ocibridge.model.extract import read_model_manifest

    located, target = open_located(reference, transfer, for_write=for_write).parts
    read = read_model_manifest(target.store, target.reference)
    return located, target.store, read.desc, read.manifest.config.digest


def _named(located: Locator) -> str:
    from ocibridge.places.locate import text_of

    return text_of(located)


@closes_its_stores
def warm_key(reference: str | Locator, *, form: str = "torch", engine: str = "torch",
             engine_version: str | None = None, options: Mapping[str, Any] | None = None, device: str | None = None,
             transfer: TransferOptions | None = None) -> WarmKey:
    """This process's key for a cache of the model ``reference`` names (its config digest read there)."""
    config = _model(reference, transfer)[3]
    return current_key(model_config=config, form=form, engine=engine, engine_version=engine_version,
                       options=options, device=device)


@closes_its_stores
def warm_save(reference: str | Locator, cache: str | os.PathLike[str] | bytes | None = None, *,
              torch: bool = False, engine: str = "torch", engine_version: str | None = None,
              options: Mapping[str, Any] | None = None, device: str | None = None, key: WarmKey | None = None,
              sign: SignOptions | None = None, transfer: TransferOptions | None = None) -> WarmSaved:
    """Attach a compile cache to the model ``reference`` names: ``cache`` a directory (vLLM's
    ``torch_compile_cache``, a Triton or Inductor cache, SGLang's JIT root) packed as a
    reproducible tar, or torch's portable cache bytes; ``torch=True`` without ``cache``: the
    bytes of ``torch.compiler.save_cache_artifacts()`` in this process. Keyed by this process
    (``key``: a key made elsewhere), signed with ``sign``'s key (classic and bundle forms)."""
    from ocibridge.transfer.writer import Blob, write_artifact
    from ocibridge.warm.pack import pack_directory

    if torch and cache is None:
        saved = _torch_compiler().save_cache_artifacts()
        if saved is None:
            raise UsageError("torch holds no compile cache artifacts in this process: compile first")
        cache = bytes(saved[0])
    if cache is None:
        raise UsageError("warm save needs a cache directory, or --torch")
    if not isinstance(cache, bytes) and not os.fspath(cache).strip():  # not the working directory
        raise UsageError("an empty cache directory (an unset shell variable?): name the directory to pack")
    form = "torch" if isinstance(cache, bytes) else "dir"
    signing = _signing(sign)
    located, store, subject, config = _model(reference, transfer, for_write=True)
    made = key or current_key(model_config=config, form=form, engine=engine, engine_version=engine_version,
                              options=options, device=device)
    if made.form != form:
        raise UsageError(f"the key names form {made.form!r}, the cache is {form!r}")
    packed = None if isinstance(cache, bytes) else pack_directory(Path(cache))
    try:
        from ocibridge.oci.models import Descriptor

        if packed is None:
            assert isinstance(cache, bytes)
            layer = Descriptor.for_bytes(LAYER_TYPES[form], cache)
            blob = Blob.of_bytes(layer, cache)
        else:
            layer = Descriptor(mediaType=LAYER_TYPES[form], digest=packed.digest, size=packed.size)
            blob = Blob.of_file(layer, packed.path)
        desc, body = cache_manifest(subject, made, layer)
        write_artifact(store, desc, body, [Blob.empty(), blob])  # blobs first, the manifest last
    finally:
        if packed is not None:
            packed.path.unlink()
    forms: tuple[str, ...] = ()
    if signing is not None:
        forms = _sign(store, desc, signing)
    from ocibridge.api.store_ops import repository_text

    return WarmSaved(f"{repository_text(located)}@{desc.digest}", desc.digest, subject.digest, layer.size,
                     packed.files if packed is not None else 0, made, forms)


def _signing(sign: SignOptions | None) -> tuple[Any, SignOptions] | None:
    """The key loaded before anything is sent (a wrong password fails first)."""
    if sign is None:
        return None
    from ocibridge.signing import keys

    bad = [f for f in sign.forms if f not in ("classic", "bundle")]
    if bad:
        raise UsageError(f"a compile cache is signed as classic or bundle, not {', '.join(bad)}")
    password = sign.password.encode() if isinstance(sign.password, str) else sign.password
    return keys.load_private_key(sign.key, password), sign


def _sign(store: Store, desc: Descriptor, signing: tuple[Any, SignOptions]) -> tuple[str, ...]:
    from ocibridge.signing.sign import SignOptions as Signing
    from ocibridge.signing.sign import sign_artifact

    private, sign = signing
    done = sign_artifact(store, desc, private, Signing(identity=sign.identity or store.describe(),  # type: ignore[arg-type]
                                                       claims=dict(sign.claims), forms=tuple(sign.forms)))  # type: ignore[arg-type]
    return tuple(done.written)


@closes_its_stores
def warm_caches(reference: str | Locator, *, transfer: TransferOptions | None = None) -> WarmList:
    """The compile caches attached to the model ``reference`` names, with their keys."""
    located, store, subject, _ = _model(reference, transfer)
    found = tuple(WarmCache(c.desc.digest, c.layer.size, c.key) for c in attached_caches(store, subject))
    return WarmList(_named(located), subject.digest, found)


def _matching(name: str, attached: list[CacheArtifact], here: WarmKey) -> list[CacheArtifact]:
    """The caches whose key is ``here``, by digest, else :class:`CacheMismatch` naming what
    differs in the nearest one."""
    exact = [c for c in attached if c.key == here]
    if exact:
        return exact
    if not attached:
        raise CacheMismatch(f"{name}: no compile cache is attached to it (warm save attaches one)")
    nearest = min(attached, key=lambda c: len(here.differences(c.key)))
    said = "; ".join(f"{field} differs (here {ours}, the cache has {theirs})"
                     for field, ours, theirs in here.differences(nearest.key))
    others = f" (and {len(attached) - 1} other cache(s), further off)" if len(attached) > 1 else ""
    raise CacheMismatch(f"{name}: no compile cache for this process, nothing restored: {said}, "
                        f"in cache {nearest.desc.digest[:19]}{others}")


def _trusted(store: Store, exact: list[CacheArtifact], located: Locator, verify: Verification | None,
             allow_unsigned: bool, name: str) -> tuple[CacheArtifact, bool]:
    """The first of ``exact`` whose signature verifies (one pushed beside a signed cache by
    someone else does not stop the signed one from loading), and whether it was checked;
    none verifies: the first one's refusal."""
    refused: SignatureError | None = None
    for cache in exact:
        try:
            return cache, _checked(store, cache, located, verify, allow_unsigned,
                                   f"{name}: compile cache {cache.desc.digest[:19]}")
        except SignatureError as e:
            refused = refused or e
    assert refused is not None
    raise refused


def _cache_scope(located: Locator, digest: str) -> Scope:
    """Where the policy looks a cache up: the model's repository at the cache's digest."""
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.signing.containers_policy import DockerName, docker_scope
    from ocibridge.signing.use import scope_of

    if isinstance(located, RegistryReference):
        return docker_scope(DockerName(f"{located.registry}/{located.repository}", None, digest))
    return scope_of(located)


def _checked(store: Store, chosen: CacheArtifact, located: Locator, verify: Verification | None,
             allow_unsigned: bool, name: str) -> bool:
    """The cache's signature verified under the policy and ``verify``'s keys (raises otherwise);
    whether anything was checked. Nothing asked a check: refused unless ``allow_unsigned``."""
    from ocibridge.scanning.policy import require_clean_scan
    from ocibridge.signing.use import check_for_use

    checked = check_for_use(store, chosen.desc, _cache_scope(located, chosen.desc.digest), verify, name,
                            clean_scan=require_clean_scan)
    if not checked.checked and not allow_unsigned:
        raise SignatureError(f"{name}: refused: a compile cache is code that runs, and nothing here asks its "
                             "signature (give --verify-key PUB or a policy that asks one; --allow-unsigned "
                             "to load it unchecked)")
    return checked.checked


@closes_its_stores
def warm_load(reference: str | Locator, dest: str | os.PathLike[str] | None = None, *, torch: bool = False,
              engine: str = "torch", engine_version: str | None = None, options: Mapping[str, Any] | None = None,
              device: str | None = None, verify: Verification | None = None, allow_unsigned: bool = False,
              transfer: TransferOptions | None = None) -> WarmLoaded:
    """Restore the compile cache of the model ``reference`` names whose key is this process's:
    into the directory ``dest``, or (``torch=True``) into torch in this process with
    ``torch.compiler.load_cache_artifacts`` (``dest`` then: a file to write the bytes to). Call
    it before the first compile. Its signature must verify under the containers policy and
    ``verify``'s keys; when nothing asks one, only ``allow_unsigned`` loads it. A key that
    differs (:class:`CacheMismatch`), a refused signature or a changed byte restores nothing."""
    from ocibridge.warm.restore import fetched_blob, restore_archive

    if not torch and dest is None:
        raise UsageError("warm load needs a directory to restore into, or --torch")
    if not torch and dest is not None and not os.fspath(dest).strip():  # not the working directory
        raise UsageError("an empty directory to restore into (an unset shell variable?): name one")
    if torch and dest is not None:
        from ocibridge.core.fsutil import check_output_file

        check_output_file(dest)  # before anything is fetched
    form = "torch" if torch else "dir"
    located, store, subject, config = _model(reference, transfer)
    name = _named(located)
    here = current_key(model_config=config, form=form, engine=engine, engine_version=engine_version,
                       options=options, device=device)
    exact = _matching(name, attached_caches(store, subject), here)
    chosen, checked = _trusted(store, exact, located, verify, allow_unsigned, name)
    with fetched_blob(store, chosen.layer) as blob:
        if form == "dir":
            assert dest is not None
            done = restore_archive(blob, Path(dest))
            files, written = len(done.files), done.bytes_written
        else:
            data = blob.read_bytes()
            if dest is not None:
                from ocibridge.core.fsutil import atomic_write_bytes

                atomic_write_bytes(Path(dest), data)
            else:
                _torch_compiler().load_cache_artifacts(data)
            files, written = 0, len(data)
    return WarmLoaded(name, chosen.desc.digest, chosen.key, None if dest is None else os.fspath(dest), files,
                      written, checked)
