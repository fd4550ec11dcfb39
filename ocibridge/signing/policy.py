"""The policy on use: commands that use an artifact (pull, path, copy, k8s, mirror entries,
lazy reads, save, load) refuse it unless the containers policy file that applies
(:mod:`ocibridge.signing.containers_policy`) and the keys given (``--verify-key``) accept it,
and do so before they write anything; what is then used is the digest that was checked."""

from __future__ import annotations

from ocibridge.errors import SignatureError
from ocibridge.oci.models import Descriptor
from ocibridge.signing.coverage import Trusted
from ocibridge.signing.verify import Verified, VerifyPolicy, verify_artifact
from ocibridge.stores.base import Store

__all__ = ["Trusted", "VerifyPolicy", "verify_before_use"]


def verify_before_use(store: Store, subject: Descriptor | str, policy: VerifyPolicy | None,
                      name: str | None = None, *, trusts: Trusted) -> list[Verified]:
    """Verify ``subject`` (a descriptor, or a tag or digest of ``store``) under ``policy``, by a
    signature covering what the caller ``trusts`` (an OMS signature covers the files only).

    None means no policy: nothing is checked. Raises :class:`SignatureError` with one line,
    ``NAME: refused: why``, when no signature verifies.
    """
    if policy is None:
        return []
    desc = store.resolve(subject) if isinstance(subject, str) else subject
    try:
        return verify_artifact(store, desc, policy, trusts=trusts)
    except SignatureError as e:
        raise SignatureError(f"{name or store.describe()}: refused: {e}") from None

