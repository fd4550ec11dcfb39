"""image-spec 1.1's empty descriptor (``{}``): the config of every artifact whose content is all in
its layers (a signature, an attestation, a chunk table, serve's records and tombstone), and the one
layer of a model with no files.

A Hub repository may hold no file (its last one deleted); its commit is still an artifact. An
image manifest with ``layers: []`` is legal, but image-spec 1.1 asks for the empty descriptor
where there is no content ("for portability, layers SHOULD have at least one entry"), and
ModelPack's config schema wants at least one ``modelfs.diffIds`` entry: the empty descriptor's
digest is its own diffId (its content is not compressed). Every reader that turns layers into
files skips it (:func:`is_empty_layer`), so such a model pulls to an empty directory.
"""

from __future__ import annotations

from ocibridge.oci.mediatypes import OCI_EMPTY
from ocibridge.oci.models import Descriptor

#: the empty descriptor's content, digest and inline ``data`` (base64 of ``{}``)
EMPTY_JSON = b"{}"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
EMPTY_DATA = "e30="


def empty_descriptor() -> Descriptor:
    """The empty descriptor, without inline data (a fresh value: descriptors are mutable)."""
    return Descriptor(mediaType=OCI_EMPTY, digest=EMPTY_DIGEST, size=len(EMPTY_JSON))


def empty_layer() -> Descriptor:
    """The empty descriptor as a layer, its content inline (a fresh value: descriptors are mutable)."""
    return Descriptor(mediaType=OCI_EMPTY, digest=EMPTY_DIGEST, size=len(EMPTY_JSON),
                      model_extra={"data": EMPTY_DATA})


def is_empty_layer(layer: Descriptor) -> bool:
    """Whether ``layer`` is the empty descriptor: no file, nothing to unpack."""
    return layer.mediaType == OCI_EMPTY and layer.digest == EMPTY_DIGEST


def is_empty_model(layers: list[Descriptor]) -> bool:
    """Whether a manifest's ``layers`` are those of a model with no files (the empty descriptor alone)."""
    return len(layers) == 1 and is_empty_layer(layers[0])
