"""Whether a node's containers policy file lets CRI-O pull a reference (``k8s check --node-policy``).

CRI-O applies the node's signature policy to every registry pull, images and OCI artifacts
alike: from 1.33 the artifact path copies with containers/common's libimage copier, which loads
``signature.DefaultPolicy`` and calls ``copy.Image`` with it (cri-o v1.33.0
internal/ociartifact/store.go -> vendor/github.com/containers/common/libimage/copier.go; v1.36.3
internal/storage/image.go falls back to the artifact store's ``Pull``, vendor/go.podman.io/common/
pkg/libartifact/store.go, through the same copier). containerd reads no containers policy file.
The file is evaluated here with ocibridge's own evaluator (docs/signing.md says what it verifies).

A ``sigstoreSigned`` scope also needs the node to read sigstore signatures at all: its
``registries.d`` must set ``use-sigstore-attachments: true`` for the repository (off by default,
containers-registries.d(5)); without it CRI-O refuses the pull whatever the registry holds. The
node's directory is read with ``--node-registries-d DIR`` (:mod:`ocibridge.k8s.registries_d`);
without it the node is taken to have none (the default), and the file the node needs is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocibridge.errors import SignatureError
from ocibridge.k8s.registries_d import SYSTEM_DIR, NodeFile, RegistriesD, proposed_file
from ocibridge.k8s.runtime import Runtime, RuntimeVersion
from ocibridge.oci.reference import RegistryReference
from ocibridge.places.locators import Locator
from ocibridge.signing.containers_policy import SIGSTORE_SIGNED, ContainersPolicy, Decision
from ocibridge.signing.policy_place import SYSTEM_POLICY
from ocibridge.stores.base import Store


@dataclass(frozen=True)
class NodePolicy:
    """The verdict as ``check`` prints it: a refusal joins the mount's reasons (exit 1), any
    other line is said beside them, so a node that would refuse the pull is not reported as
    mounting."""

    line: str
    refused: bool = False
    #: files the node needs for the pull to pass (registries.d: sigstore attachments on)
    files: tuple[NodeFile, ...] = field(default=())


def node_policy(store: Store, reference: str, located: Locator, policy: ContainersPolicy | None,
                rv: RuntimeVersion, shown: str, registries: RegistriesD | None = None) -> NodePolicy:
    """The node's verdict on ``located`` (``policy``: the node's file, read at the command's
    edge so a bad one is an error whatever the runtime). Without one nothing is evaluated: the
    machine running ``check`` is seldom the node, and its own policy file refusing would turn a
    mount check into a failure the node may never see."""
    if rv.runtime is not Runtime.CRIO:
        return NodePolicy("node policy: containerd reads no containers policy file: nothing is verified at pull")
    if not isinstance(located, RegistryReference):
        return NodePolicy("node policy: not evaluated: a node pulls from a registry, not from a layout")
    if policy is None:
        return NodePolicy(f"node policy: not evaluated (give the node's {SYSTEM_POLICY} with --node-policy FILE)")
    from ocibridge.scanning.policy import require_clean_scan
    from ocibridge.signing.policy_eval import evaluate
    from ocibridge.signing.use import scope_of

    decision = policy.decide(scope_of(located))
    refused = _without_attachments(decision, registries)
    if refused is not None:
        return refused
    try:
        accepted = evaluate(decision, store, store.resolve(reference), shown, clean_scan=require_clean_scan)
    except SignatureError as e:
        return NodePolicy(f"node policy {decision.where()}: CRI-O refuses the pull: {e}", refused=True)
    how = "; ".join(f"{v.form} signature by {v.signer}" for v in accepted) or "it accepts anything"
    return NodePolicy(f"node policy {decision.where()}: CRI-O pulls it ({how})")


def _without_attachments(decision: Decision, registries: RegistriesD | None) -> NodePolicy | None:
    """The refusal of a ``sigstoreSigned`` scope on a node that reads no sigstore signatures for
    the reference, with the registries.d file it needs; None when it reads them (or no
    requirement asks for them)."""
    if not any(r.type == SIGSTORE_SIGNED for r in decision.requirements) or decision.scope.docker is None:
        return None
    if registries is not None:
        on, where = registries.sigstore_attachments(decision.scope)
        if on:
            return None
        said = f"the node's registries.d {where} does not turn use-sigstore-attachments on"
    else:
        said = (f"the node reads no sigstore signatures unless its {SYSTEM_DIR} sets use-sigstore-attachments: "
                "true (off by default; give the node's directory with --node-registries-d DIR)")
    needed, namespace = proposed_file(registries, decision.scope)
    return NodePolicy(f"node policy {decision.where()}: CRI-O refuses the pull: sigstoreSigned, but {said}; "
                      f"the node needs {needed.path} with use-sigstore-attachments: true for {namespace}",
                      refused=True, files=(needed,))
