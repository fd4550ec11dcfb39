"""What a cluster's admission controller must check, from a containers policy file or from flags.

The nodes' ``/etc/containers/policy.json`` is what CRI-O enforces at pull time; an admission
controller (Kyverno, sigstore policy-controller) refuses the Pod before any node pulls. This
module turns either input into one neutral form (:class:`Translation`: per scope, requirements
that must all hold, each met by any one of its signers) plus a line for everything that does
not carry over, so both controllers' documents (:mod:`ocibridge.k8s.admission_docs`) say the same.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibridge.core.smallfile import read_small
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.k8s.admission_scopes import ImageScope
from ocibridge.signing.containers_policy import (
    ACCEPT,
    REJECT,
    SIGSTORE_SIGNED,
    ContainersPolicy,
    KeySource,
    Requirement,
)

PUBLIC_REKOR = "https://rekor.sigstore.dev"
PUBLIC_FULCIO = "https://fulcio.sigstore.dev"
MAX_PEM = 1 << 20


@dataclass(frozen=True)
class Signer:
    """One way to meet a requirement: a public key (PEM), or a keyless identity (issuer,
    subject, optional Fulcio CA). ``rekor_key``: a private Rekor's key; None: a key signature
    needs no log entry (cosign ``--tlog-upload=false``, what ``ocibridge sign`` makes), a
    keyless one the public Rekor."""

    key: str | None = None
    issuer: str | None = None
    subject: str | None = None
    roots: str | None = None
    rekor_key: str | None = None


@dataclass(frozen=True)
class Rule:
    """A scope and its requirements: every one must hold, each by any of its signers."""

    scope: ImageScope
    requirements: tuple[tuple[Signer, ...], ...]


@dataclass
class Translation:
    """Both controllers' documents are made from this one form, so a policy file and the
    flags give the same Kyverno and policy-controller output, and the notes travel with it."""

    rules: list[Rule]
    #: scopes that are not rules (accept, reject, untranslatable) yet hide broader ones
    other_scopes: list[ImageScope] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what does not carry over, one line each
    untranslated: int = 0  # of those, parts of the policy left out entirely (the command warns)

    def left_out(self, note: str) -> None:
        """A part of the policy neither controller can check: noted, and counted for the warning."""
        self.notes.append(note)
        self.untranslated += 1

    def narrower(self, rule: Rule) -> list[ImageScope]:
        """Scopes more specific than ``rule``'s, whose images containers/image judges by them instead."""
        every = [r.scope for r in self.rules] + self.other_scopes
        return [s for s in every if s.narrower_than(rule.scope)]


def read_pem(path: str, what: str) -> str:
    """A PEM file named on the command line or in the policy (a certificate chain for
    ``roots``): read bounded, so a FIFO or a huge file named by mistake cannot hang or flood."""
    return _pem_text(_read_bytes(path, what), f"{what} {path}")


def _pem_text(data: bytes, where: str) -> str:
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not PEM text") from None
    if not text.startswith("-----BEGIN ") or not text.endswith("-----"):
        raise UsageError(f"{where}: not PEM text (no -----BEGIN line)")
    return text + "\n"


def _public_key(data: bytes, where: str) -> str:
    from ocibridge.signing import keys

    text = _pem_text(data, where)
    try:
        keys.public_key_from_pem(text.encode(), where)
    except OcibridgeError as e:  # its message already starts with ``where``
        raise UsageError(str(e).splitlines()[0]) from None
    return text


def from_flags(scopes: Sequence[str], key_paths: Sequence[str], identity: str | None,
               issuer: str | None) -> Translation:
    """``--image SCOPE`` (repeatable) signed by any ``--key`` or the keyless ``--identity``/``--issuer``."""
    if not scopes:
        raise UsageError("give --image SCOPE (repeatable) or --from-policy FILE")
    if (identity is None) != (issuer is None):
        raise UsageError("keyless needs both --identity (the certificate's subject) and --issuer (the OIDC issuer)")
    signers = [Signer(key=_public_key(_read_bytes(p, "--key"), f"--key {p}")) for p in key_paths]
    if identity is not None:
        signers.append(Signer(issuer=issuer, subject=identity))
    if not signers:
        raise UsageError("give --key PUB.pem (repeatable) or --identity and --issuer")
    parsed = [ImageScope.parse(s) for s in dict.fromkeys(scopes)]
    return Translation([Rule(s, (tuple(signers),)) for s in parsed])


def _read_bytes(path: str, what: str) -> bytes:
    try:
        return read_small(Path(path), MAX_PEM, what, error=UsageError)
    except OSError as e:
        raise UsageError(f"{what} {path}: {e.strerror or e}") from None


def from_policy(policy: ContainersPolicy) -> Translation:
    """The ``docker`` transport of ``policy`` (its ``""`` scope, else ``default``, for every
    other image); other transports are said to stay on the nodes."""
    t = Translation([])
    where = str(policy.path)
    docker = dict(policy.transports.get("docker", {}))
    if "" not in docker:
        docker[""] = policy.default
        if any(r.type != ACCEPT for r in policy.default):
            t.notes.append(f'{where}: "default" stands for the docker transport\'s "" scope (no docker "" scope)')
    for transport in sorted(set(policy.transports) - {"docker"}):
        t.left_out(f"{where}: transport {transport!r} is not translated: a Pod names registry images only")
    for text, requirements in docker.items():
        label = f'docker "{text}"'
        try:
            scope = ImageScope.parse(text)
        except UsageError as e:
            t.left_out(f"{where} ({label}): not translated: {e}")
            continue
        translated = _requirements(requirements, f"{where} ({label})", t)
        if translated:
            t.rules.append(Rule(scope, translated))
        else:
            t.other_scopes.append(scope)
    t.rules.sort(key=lambda r: r.scope.text)
    return t


def _requirements(requirements: Sequence[Requirement], where: str,
                  t: Translation) -> tuple[tuple[Signer, ...], ...] | None:
    """The scope's requirements as signer sets; None when the scope is no rule (accept, reject,
    or a requirement neither CRD can express), with a note saying so."""
    types = {r.type for r in requirements}
    if REJECT in types:
        t.left_out(f"{where}: reject is not translated: neither verifyImages nor an authority refuses every "
                     "image (policy-controller: an authority `static: {action: fail}`; Kyverno: a validate rule)")
        return None
    if types == {ACCEPT}:
        if where.endswith('docker "")'):
            t.notes.append(f"{where}: insecureAcceptAnything: no document; images no policy matches are then "
                         "admitted by Kyverno, and by policy-controller as its no-match-policy says")
        else:
            t.notes.append(f"{where}: insecureAcceptAnything: no document (Kyverno skips these images; "
                         "policy-controller still applies a broader policy's glob to them)")
        return None
    out: list[tuple[Signer, ...]] = []
    for r in requirements:
        if r.type == ACCEPT:
            continue
        if r.type != SIGSTORE_SIGNED:
            t.left_out(f"{where}: {r.type} is not translated (neither CRD verifies it): the scope is left out")
            return None
        if r.pki is not None:
            t.left_out(f"{where}: sigstoreSigned with pki is not translated: the scope is left out")
            return None
        t.notes.append(f"{where}: signedIdentity {r.identity.describe()} has no field in either CRD: the "
                     "controllers check that a signature names the digest, not which reference it names")
        rekor = _key_text(r.rekor_keys[0], where) if r.rekor_keys else None
        if len(r.rekor_keys) > 1:
            t.notes.append(f"{where}: only the first Rekor key is carried over")
        if r.fulcio is not None:
            out.append((_keyless(r.fulcio, rekor, where),))
        else:
            out.append(tuple(Signer(key=_key_text(k, where), rekor_key=rekor) for k in r.keys))
    return tuple(out)


def _key_text(source: KeySource, where: str) -> str:
    if source.path is not None:
        return _public_key(_read_bytes(source.path, f"{where} key file"), f"{where} key file {source.path}")
    return _public_key(source.read(), f"{where} {source.name}")


def _keyless(fulcio: Mapping[str, Any], rekor: str | None, where: str) -> Signer:
    roots = None
    if "caPath" in fulcio:
        roots = read_pem(str(fulcio["caPath"]), f"{where} fulcio caPath")
    elif "caData" in fulcio:
        try:
            roots = _pem_text(base64.b64decode(str(fulcio["caData"]), validate=True), f"{where} fulcio caData")
        except ValueError:
            raise UsageError(f"{where}: fulcio caData is not base64") from None
    issuer, subject = fulcio.get("oidcIssuer"), fulcio.get("subjectEmail")
    if not isinstance(issuer, str) or not isinstance(subject, str):
        raise UsageError(f"{where}: fulcio needs oidcIssuer and subjectEmail to be translated")
    return Signer(issuer=issuer, subject=subject, roots=roots, rekor_key=rekor)
