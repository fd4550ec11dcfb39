"""``k8s serve``'s commit evidence: serve's ``--sign-key`` (and ``--sign-form``), ``--sbom``,
``--provenance`` and ``--attest-key`` on the pods that commit. Each key is printed in a Secret or
named as a Secret the cluster has (:mod:`ocibridge.k8s.servekey`); serve reads one
``$COSIGN_PASSWORD`` for both, so the pods take it from the first Secret that carries one.

Only the writer commits: with replicas, the readers get no private key, and under ``--scan
quarantine`` the public half of the key serve signs its reports with (``--attest-key``, else
``--sign-key``) as one more ``--scan-verify-key`` (serve trusts its own key's reports; a reader
must trust the writer's). A named Secret's public half is not known here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocibridge.errors import UsageError
from ocibridge.k8s.servekey import KeyRole, PodKey, pod_key

SIGN = KeyRole("sign-key", "sign.key")
ATTEST = KeyRole("attest-key", "attest.key")
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
        """``$COSIGN_PASSWORD`` once: serve reads one password for both keys."""
        return next((env for key in self.keys() if (env := key.env())), [])


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
