"""What a compile cache is valid for, as one key: every field must equal this process's for the
cache to be of use (a cache keyed by less moves bytes and saves nothing).

The key travels as the cache artifact's annotations (``io.ocibridge.warm.FIELD``), so a listing
of the model's referrers already says which cache fits; the signed manifest carries them, so
a key cannot be changed without the signature failing."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
import json
import platform
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ocibridge.errors import UsageError

PREFIX = "io.ocibridge.warm."
#: the value of a field that does not apply here (no triton on a CPU-only build, no driver on CPU)
NONE = "none"
#: the forms a cache is kept in: a directory's files (a tar), or torch's portable cache artifacts (bytes)
FORMS = ("dir", "torch")
#: engines that are torch itself: their version is torch's
TORCH_ENGINES = ("torch", "inductor")


@dataclass(frozen=True)
class WarmKey:
    """Everything a compile cache is valid for. ``form``: ``dir`` (a cache directory) or
    ``torch`` (``torch.compiler.save_cache_artifacts()``'s bytes); ``engine``, ``engine_version``:
    what compiled it (``torch``, ``vllm``, ``sglang``, ...); ``device``: ``sm_90``, ``gfx942``,
    ``cpu-x86_64-avx2``; ``driver``: the CUDA driver API version on an NVIDIA GPU;
    ``model_config``: the model manifest's config digest; ``options``: the digest of the
    compile options (:func:`options_digest`)."""

    form: str
    engine: str
    engine_version: str
    torch: str
    triton: str
    cuda: str
    rocm: str
    device: str
    driver: str
    python: str
    model_config: str
    options: str

    def as_dict(self) -> dict[str, str]:
        """The fields by their camelCase names, as ``--json`` prints them."""
        return {_camel(name): value for name, value in asdict(self).items()}

    def annotations(self) -> dict[str, str]:
        return {PREFIX + name.replace("_", "-"): value for name, value in asdict(self).items()}

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None) -> WarmKey | None:
        """The key a cache's annotations hold; None when one field is missing (not a cache of ours)."""
        got = annotations or {}
        values = {f.name: got.get(PREFIX + f.name.replace("_", "-")) for f in fields(cls)}
        if any(not isinstance(v, str) for v in values.values()):
            return None
        return cls(**values)  # type: ignore[arg-type]  # (each checked a str above)

    def differences(self, other: WarmKey) -> list[tuple[str, str, str]]:
        """(field, ours, theirs) for each field that differs, in the key's order."""
        ours, theirs = asdict(self), asdict(other)
        return [(name.replace("_", "-"), ours[name], theirs[name]) for name in ours if ours[name] != theirs[name]]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def options_digest(options: Mapping[str, Any] | None) -> str:
    """The digest of the compile options: SHA-256 of their canonical JSON (keys sorted, no
    spaces, UTF-8), so the same options hash alike whichever process wrote them."""
    try:
        text = json.dumps(dict(options or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except (TypeError, ValueError) as e:
        raise UsageError(f"compile options must be JSON values: {e}") from None
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _version(distribution: str) -> str:
    try:
        return md.version(distribution)
    except md.PackageNotFoundError:
        return NONE


def torch_module(name: str, why: str) -> Any:
    """``name`` (torch or one of its modules), imported when first needed; without torch, a usage
    error saying ``why`` it is needed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise UsageError(f"{why}: pip install torch") from None


def device_arch(torch: Any, device: str) -> tuple[str, str]:
    """(architecture, driver) of ``device`` (``cpu``, ``cuda``, ``cuda:N``): ``sm_90`` and the
    CUDA driver API version, ``gfx942`` on ROCm, ``cpu-x86_64-avx2`` (the ISA level torch's
    CPU kernels and Inductor's C++ code build for)."""
    if device == "cpu":
        capability = str(torch.backends.cpu.get_cpu_capability()).lower()
        return f"cpu-{platform.machine().lower()}-{capability}", NONE
    if not device.startswith("cuda") or not torch.cuda.is_available():
        raise UsageError(f"device {device!r}: not cpu, and no CUDA or ROCm device is available")
    index = int(device.partition(":")[2] or 0)
    if torch.version.hip:
        arch = str(torch.cuda.get_device_properties(index).gcnArchName).split(":")[0]
        return arch, NONE
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm_{major}{minor}", cuda_driver_version()


def cuda_driver_version() -> str:
    """The CUDA driver API version (``cuDriverGetVersion``: 13000 for 13.0), asked of the driver
    library itself: torch keeps no public call for it, and its private ones come and go."""
    import ctypes

    try:
        library = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if library.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return NONE
    except (OSError, AttributeError):
        return NONE
    return str(version.value)


def current_key(*, model_config: str, form: str = "torch", engine: str = "torch", engine_version: str | None = None,
                options: Mapping[str, Any] | None = None, device: str | None = None) -> WarmKey:
    """This process's key: the versions installed here, the device's architecture (``device``;
    None: the first GPU if there is one, else the CPU), and the caller's ``options``."""
    if form not in FORMS:
        raise UsageError(f"unknown cache form {form!r} (choose from {', '.join(FORMS)})")
    if not engine or any(c.isspace() for c in engine):
        raise UsageError(f"engine {engine!r}: a name without spaces (torch, vllm, sglang, ...)")
    torch = torch_module("torch", "a compile cache's key names torch's version")
    chosen = device or ("cuda" if torch.cuda.is_available() else "cpu")
    arch, driver = device_arch(torch, chosen)
    version = engine_version or (str(torch.__version__) if engine in TORCH_ENGINES else _version(engine))
    return WarmKey(form=form, engine=engine, engine_version=version, torch=str(torch.__version__),
                   triton=_version("triton") if _version("triton") != NONE else _version("pytorch-triton-rocm"),
                   cuda=str(torch.version.cuda or NONE), rocm=str(torch.version.hip or NONE),
                   device=arch, driver=driver, python=f"{sys.version_info.major}.{sys.version_info.minor}",
                   model_config=model_config, options=options_digest(options))
