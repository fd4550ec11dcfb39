"""``k8s serve``'s commit evidence: serve's ``--sign-key`` (and ``--sign-form``), ``--sbom``,
``--provenance`` and ``--attest-key`` on the pods that commit. Each key is printed in a Secret or
named as a Secret the cluster has (:mod:`ocibridge.k8s.servekey`); serve reads the signing key's
password from ``$COSIGN_PASSWORD`` and the attestation key's from ``$OCIBRIDGE_ATTEST_PASSWORD``
(unset: ``$COSIGN_PASSWORD``), so the pods take each from its own key's Secret.

Only the writer commits: with replicas, the readers get no private key, and under ``--scan
quarantine`` the public half of the key serve signs its reports with (``--attest-key``, else
``--sign-key``) as one more ``--scan-verify-key`` (serve trusts its own key's reports; a reader
must trust the writer's). A named Secret's public half is not known here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocibridge.errors import UsageError
from ocibridge.k8s.servekey import KeyRole, PodKey, pod_key
from ocibridge.signing import ATTEST_PASSWORD_ENV, PASSWORD_ENV

SIGN = KeyRole("sign-key", "sign.key", PASSWORD_ENV)
ATTEST = KeyRole("attest-key", "attest.key", ATTEST_PASSWORD_ENV)
FORMS = ("classic", "bundle", "both")


@dataclass(frozen=True)
class PodEvidence:
    """What serve attaches to each commit: ``sign`` (``form``: ``--sign-form``, None: serve's
    default, both), the BOM and provenance, signed with ``attest`` (else with ``sign``)."""

    sign: PodKey | None = None
    form: str | None = None
    attest: PodKey | None = None
    sbom: bool = False
    provenance: bool = False

    def keys(self) -> list[PodKey]:
        return [key for key in (self.sign, self.attest) if key is not None]

    def own(self) -> PodKey | None:
        """The key serve signs its scan reports with: ``--attest-key``, else ``--sign-key``."""
        return self.attest or self.sign

    def args(self) -> list[str]:
        args = self.sign.args() if self.sign else []
        args += ["--sign-form", self.form] if self.form else []
        args += ["--sbom"] if self.sbom else []
        args += ["--provenance"] if self.provenance else []
        return args + (self.attest.args() if self.attest else [])

    def warnings(self) -> list[str]:
        return [warning for key in self.keys() for warning in key.warnings()]

    def secret_documents(self, meta: dict[str, Any]) -> list[dict[str, Any]]:
        return [doc for key in self.keys() if (doc := key.secret_document(meta)) is not None]

    def volumes(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return [key.volume() for key in self.keys()]

    def env(self) -> list[dict[str, Any]]:
        """Each key's password from its own Secret; a plain attestation key beside a signing key
        gets an empty one, which serve reads as none (unset, it would take the signing key's)."""
        env = [entry for key in self.keys() for entry in key.env()]
        if self.sign is not None and self.attest is not None and self.attest.plain():
            env.append({"name": ATTEST_PASSWORD_ENV, "value": ""})
        return env


def pod_evidence(name: str, *, sign_key: str | None = None, sign_key_secret: str | None = None,
                 sign_form: str | None = None, attest_key: str | None = None, attest_key_secret: str | None = None,
                 sbom: bool = False, provenance: bool = False) -> PodEvidence | None:
    """serve's evidence flags checked as serve checks them, each key loaded or its Secret named
    (:func:`~ocibridge.k8s.servekey.pod_key`); None: commits carry none."""
    sign = pod_key(SIGN, sign_key, sign_key_secret, name)
    if sign is None and sign_form is not None:
        raise UsageError("--sign-form goes with --sign-key or --sign-key-secret")
    if sign_form is not None and sign_form not in FORMS:
        raise UsageError(f"--sign-form {sign_form}: one of {', '.join(FORMS)}")
    attest = pod_key(ATTEST, attest_key, attest_key_secret, name)
    if attest is not None and not (sbom or provenance):
        raise UsageError(f"{ATTEST.flag} and {ATTEST.flag}-secret go with --sbom or --provenance: the "
                         "attestations they sign")
    if sign is None and attest is None and not (sbom or provenance):
        return None
    return PodEvidence(sign, sign_form, attest, sbom, provenance)
