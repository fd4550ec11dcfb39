"""A :class:`Translation` as a Kyverno ``ClusterPolicy`` and policy-controller ``ClusterImagePolicy``s.

Shapes follow the released CRDs (tests/data/crds/PROVENANCE.md: Kyverno v1.19.0, policy-controller
v0.15.1), which the tests validate every document against. Two differences of meaning are handled
here rather than left to the reader:

- containers/image judges an image by its most specific scope only; both controllers apply every
  rule or policy whose pattern matches. Kyverno's ``skipImageReferences`` takes the narrower scopes
  out of a broader rule; policy-controller has no exclusion, so the overlap is a note.
- a model mounted as an image volume is ``spec.volumes[].image.reference``, which Kyverno does not
  extract by default (pkg/utils/api/image.go: containers, initContainers, ephemeralContainers):
  the rule names the three standard extractors and one for image volumes.
"""

from __future__ import annotations

import re
from typing import Any

from ocibridge.errors import UsageError
from ocibridge.k8s.admission import PUBLIC_FULCIO, PUBLIC_REKOR, Rule, Signer, Translation

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
POD_IMAGES = [
    {"name": "initContainers", "path": "/spec/initContainers/*", "value": "image", "key": "name"},
    {"name": "containers", "path": "/spec/containers/*", "value": "image", "key": "name"},
    {"name": "ephemeralContainers", "path": "/spec/ephemeralContainers/*", "value": "image", "key": "name"},
    {"name": "imageVolumes", "path": "/spec/volumes/*/image", "value": "reference"},
]


def check_name(name: str) -> str:
    """A name both CRDs take (an RFC 1123 label; suffixes ``-N`` are added)."""
    if len(name) > 50 or not _NAME.match(name):
        raise UsageError(f"--name {name!r}: lowercase letters, digits and '-', at most 50 characters")
    return name


def kyverno(t: Translation, name: str) -> dict[str, Any]:
    """One ClusterPolicy, one rule per scope: its images verified before a Pod is admitted."""
    rules = []
    for i, rule in enumerate(t.rules, 1):
        skip = [p for s in t.narrower(rule) for p in s.kyverno()]
        verify: dict[str, Any] = {
            "type": "Cosign",
            "imageReferences": rule.scope.kyverno(),
            **({"skipImageReferences": skip} if skip else {}),
            "failureAction": "Enforce",
            "mutateDigest": True,
            "verifyDigest": True,
            "required": True,
            "attestors": [_attestor(signers) for signers in rule.requirements],
        }
        rules.append({
            "name": _rule_name(i, rule),
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "imageExtractors": {"Pod": POD_IMAGES},
            "verifyImages": [verify],
        })
    return {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": name},
            "spec": {"background": False, "webhookConfiguration": {"failurePolicy": "Fail"}, "rules": rules}}


def _rule_name(i: int, rule: Rule) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", rule.scope.text.lower()).strip("-") or "all"
    return f"verify-{i}-{slug}"[:63].rstrip("-")


def _attestor(signers: tuple[Signer, ...]) -> dict[str, Any]:
    entries = [_entry(s) for s in signers]
    return {"count": 1, "entries": entries} if len(entries) > 1 else {"entries": entries}


def _entry(s: Signer) -> dict[str, Any]:
    rekor: dict[str, Any] = {"pubkey": s.rekor_key} if s.rekor_key else {}
    if s.key is not None:
        return {"keys": {"publicKeys": s.key, "rekor": rekor or {"ignoreTlog": True},
                         "ctlog": {"ignoreSCT": True}}}
    keyless: dict[str, Any] = {"subject": s.subject, "issuer": s.issuer, "rekor": rekor or {"url": PUBLIC_REKOR}}
    if s.roots:
        keyless["roots"] = s.roots
    return {"keyless": keyless}


def policy_controller(t: Translation, name: str) -> list[dict[str, Any]]:
    """One ClusterImagePolicy per scope and requirement (policy-controller admits an image only
    when every policy matching it passes, each by any one of its authorities)."""
    docs = []
    for i, rule in enumerate(t.rules, 1):
        for j, signers in enumerate(rule.requirements, 1):
            suffix = f"-{i}" + (f"-{j}" if len(rule.requirements) > 1 else "")
            docs.append({
                "apiVersion": "policy.sigstore.dev/v1beta1", "kind": "ClusterImagePolicy",
                "metadata": {"name": name + suffix},
                "spec": {"images": [{"glob": g} for g in rule.scope.policy_controller()],
                         "authorities": [_authority(k, s) for k, s in enumerate(signers, 1)]},
            })
    return docs


def _authority(k: int, s: Signer) -> dict[str, Any]:
    if s.key is not None:
        return {"name": f"key-{k}", "key": {"data": s.key}}
    keyless: dict[str, Any] = {"url": PUBLIC_FULCIO, "identities": [{"issuer": s.issuer, "subject": s.subject}]}
    if s.roots:
        keyless["ca-cert"] = {"data": s.roots}
    return {"name": f"keyless-{k}", "keyless": keyless, "ctlog": {"url": PUBLIC_REKOR}}


def policy_controller_notes(t: Translation) -> list[str]:
    """What policy-controller's documents do not carry: overlaps, private Rekor keys, image volumes."""
    notes = []
    for rule in t.rules:
        for narrower in t.narrower(rule):
            notes.append(f"policy-controller: images of {narrower.text!r} must also pass the policy of "
                         f"{rule.scope.text!r} (it applies every matching glob; containers/image only the "
                         "most specific scope)")
        if any(s.rekor_key for signers in rule.requirements for s in signers):
            notes.append(f"policy-controller: the Rekor key of {rule.scope.text!r} is not carried over (a ctlog "
                         "needs a TrustRoot resource): its authorities check the signature only")
    notes.append("policy-controller v0.15.1 checks the images of containers, not image volumes "
                 "(pkg/webhook/validator.go): a model mounted as an image volume is not verified by it")
    return notes
