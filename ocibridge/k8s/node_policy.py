"""Whether a node's containers policy file lets CRI-O pull a reference (``k8s check --node-policy``).

CRI-O applies the node's signature policy to every registry pull, images and OCI artifacts
alike: from 1.33 the artifact path copies with containers/common's libimage copier, which loads
``signature.DefaultPolicy`` and calls ``copy.Image`` with it (cri-o v1.33.0
internal/ociartifact/store.go -> vendor/github.com/containers/common/libimage/copier.go; v1.36.3
internal/storage/image.go falls back to the artifact store's ``Pull``, vendor/go.podman.io/common/
pkg/libartifact/store.go, through the same copier). containerd reads no containers policy file.
The file is evaluated here with ocibridge's own evaluator (docs/signing.md says what it verifies).
"""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.errors import SignatureError
from ocibridge.k8s.runtime import Runtime, RuntimeVersion
from ocibridge.kinds.locators import Locator
from ocibridge.oci.reference import RegistryReference
from ocibridge.signing.containers_policy import SYSTEM_POLICY, ContainersPolicy
from ocibridge.stores.base import Store


@dataclass(frozen=True)
class NodePolicy:
    """The verdict as ``check`` prints it: a refusal joins the mount's reasons (exit 1), any
    other line is said beside them, so a node that would refuse the pull is not reported as
    mounting."""

    line: str
    refused: bool = False


def node_policy(store: Store, reference: str, located: Locator, policy: ContainersPolicy | None,
                rv: RuntimeVersion, shown: str) -> NodePolicy:
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
    from ocibridge.signing.policy_eval import evaluate
    from ocibridge.signing.use import scope_of

    decision = policy.decide(scope_of(located))
    try:
        accepted = evaluate(decision, store, store.resolve(reference), shown)
    except SignatureError as e:
        return NodePolicy(f"node policy {decision.where()}: CRI-O refuses the pull: {e}", refused=True)
    how = "; ".join(f"{v.form} signature by {v.signer}" for v in accepted) or "it accepts anything"
    return NodePolicy(f"node policy {decision.where()}: CRI-O pulls it ({how})")
