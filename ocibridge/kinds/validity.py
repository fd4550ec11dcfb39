"""``validate`` of any model: a ModelPack artifact against the model-spec, any other family
(a ModelKit, a Docker model, a ModelCar image, an Ollama model) as far as it can be checked.

A user validating a ModelKit wants to hear "a valid ModelKit", not "an invalid ModelPack
artifact". Another family is valid when its own config and layers read (what ``convert`` and
``pull`` need) and the ModelPack form ``convert --to modelpack`` would write from it conforms
to the model-spec (diffIds checked against the layers' content). A container image, or
anything of no model family, is invalid with one reason saying what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.errors import OcibridgeError, ValidationError
from ocibridge.kinds.conversion import convert_reading
from ocibridge.kinds.families import Identified, NotAModel, identify_with_top
from ocibridge.kinds.family import WriteOptions
from ocibridge.model.validate import CONTAINERD, Runtime, validate_manifest
from ocibridge.model.validate import validate as validate_modelpack
from ocibridge.oci.models import Descriptor, ManifestRead
from ocibridge.stores.base import Store


@dataclass(frozen=True)
class Validated:
    """A valid model: its manifest, its family (``modelpack``, ``modelkit``, ...) and the
    family's title for messages (empty for ModelPack, the family validate is named after)."""

    descriptor: Descriptor
    family: str
    title: str


def validate_model(store: Store, reference: str, *, shown: str, strict: bool = False,
                   warnings: list[str] | None = None, runtime: Runtime | None = None) -> Validated:
    """Raise :class:`ValidationError` (with ``family`` set for another family) listing every
    broken rule, or return what was validated. ``shown`` is the reference as the user wrote it;
    ``runtime`` asks for that runtime's readiness too (see model.validate.validate)."""
    found_warnings: list[str] = []
    try:
        reference = store.resolve(reference).digest  # the tag is asked for once (docs/security.md)
        found, top = identify_with_top(store, reference, shown=shown)
    except NotAModel as e:
        raise ValidationError([str(e)]) from None
    if found.family.name == "modelpack":  # judged on the manifest identify read, not read again
        desc = validate_modelpack(store, reference, strict=strict, warnings=warnings, runtime=runtime,
                                  read=ManifestRead(found.desc, found.data, found.manifest), top=top,
                                  entries=found.entries)
        return Validated(desc, "modelpack", "")
    reasons = _other_family(store, found)
    # an Ollama manifest looks like an image, but no runtime unpacks it
    if runtime is not None and runtime.name == "containerd" and found.family.name != "modelcar":
        found_warnings.append(CONTAINERD)
    if warnings is not None:
        warnings.extend(found_warnings)
    if strict:
        reasons += [f"(strict) {w}" for w in found_warnings]
    if reasons:
        raise ValidationError(reasons, family=found.family.title)
    return Validated(found.desc, found.family.name, found.family.title)


def _other_family(store: Store, found: Identified) -> list[str]:
    """What is wrong with a model of another family: a missing blob, a config or layer its
    family cannot read, or a rule of the model-spec its ModelPack form would break."""
    manifest = found.manifest
    missing = [f"layers[{i}]: blob {layer.digest} is missing from the store"
               for i, layer in enumerate(manifest.layers) if not store.exists(layer)]
    if not store.exists(manifest.config):
        missing.insert(0, f"config: blob {manifest.config.digest} is missing from the store")
    if missing:
        return missing
    try:
        reading = found.family.read(store, found.desc, found.data, manifest)
        form = convert_reading(found, reading, "modelpack", WriteOptions()).store
    except ValidationError as e:
        return [f"{found.family.title}: {r}" for r in e.reasons]
    except OcibridgeError as e:
        return [f"{found.family.title}: {e}"]
    return [f"its ModelPack form: {r}" for r in validate_manifest(form, form.manifest)]
