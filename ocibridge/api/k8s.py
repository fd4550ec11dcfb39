"""``ocibridge k8s`` as Python calls: whether an image volume mounts and what the pod sees
(:func:`k8s_check`), the directory the runtime would present (:func:`k8s_mount`), a ModelCar image
with a KServe InferenceService (:func:`k8s_modelcar`), a Pod pinned by digest (:func:`k8s_volume`),
a DaemonSet pulling models on every node ahead of the workload (:func:`k8s_prewarm`), ``ocibridge
serve`` on a cluster (:func:`k8s_serve`, in :mod:`ocibridge.api.k8s_serve`, whose one job it is),
admission policies matching the nodes' containers policy.

Each reference is located once, here; the stores a call opens are closed when it returns.
The documents are plain mappings in frozen results (:mod:`ocibridge.api.k8s_types`) whose
``to_yaml()`` is what the command prints and ``as_dict()`` what its ``--json`` prints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ocibridge.api.k8s_serve import k8s_serve
from ocibridge.api.k8s_types import (
    DEFAULT_PLATFORM,
    DEFAULT_RUNTIME,
    AdmissionPolicies,
    AdmissionSigners,
    K8sServeOptions,
    KServeOptions,
    KubernetesDocuments,
    ModelCarImage,
    ModelCarOptions,
    PodOptions,
    PodRegistryAccess,
    PrewarmOptions,
    PullSecrets,
    VolumeCheck,
    VolumeLayout,
    documents_with_secret,
)
from ocibridge.core.yamldocs import comments
from ocibridge.errors import UsageError
from ocibridge.stores.opened import closes_its_stores

if TYPE_CHECKING:
    from ocibridge.api.options import TransferOptions
    from ocibridge.api.policy import Verification
    from ocibridge.k8s.schemacheck import SchemaCheck
    from ocibridge.places.locators import Locator
    from ocibridge.stores.target import StoreTarget

__all__ = [
    "AdmissionPolicies",
    "AdmissionSigners",
    "K8sServeOptions",
    "KServeOptions",
    "KubernetesDocuments",
    "ModelCarImage",
    "ModelCarOptions",
    "PodOptions",
    "PodRegistryAccess",
    "PrewarmOptions",
    "PullSecrets",
    "VolumeCheck",
    "VolumeLayout",
    "check_runtime",
    "k8s_check",
    "k8s_modelcar",
    "k8s_mount",
    "k8s_policy",
    "k8s_prewarm",
    "k8s_serve",
    "k8s_validate",
    "k8s_volume",
]


def check_runtime(text: str) -> str:
    """``text`` if it names a runtime with an optional version (``cri-o``, ``containerd@2.2``);
    raises :class:`ocibridge.OcibridgeError` saying which runtimes there are otherwise."""
    from ocibridge.k8s.runtime import RuntimeVersion

    RuntimeVersion.parse(text)
    return text


def _open(located: Locator, transfer: TransferOptions | None, *, for_write: bool = False) -> StoreTarget:
    from ocibridge.api.opening import open_located

    return open_located(located, transfer, for_write=for_write).target


def _located(ref: str | Locator) -> Locator:
    from ocibridge.places.locate import Role, locate

    return locate(ref, Role.MODEL)


@closes_its_stores
def k8s_check(
    ref: str | Locator,
    *,
    runtime: str = DEFAULT_RUNTIME,
    platform: str = DEFAULT_PLATFORM,
    node_policy: str | os.PathLike[str] | None = None,
    node_registries_d: str | os.PathLike[str] | None = None,
    transfer: TransferOptions | None = None,
) -> VolumeCheck:
    """Whether ``runtime`` (``cri-o@1.33``, ``containerd``...) on ``platform`` mounts ``ref`` as an
    image volume, and the files the pod sees: every image layer is read once, digest and diff_id
    checked. ``node_policy``: a node's containers policy.json, evaluated as CRI-O applies it to
    the pull (a refusal joins the reasons); without it the node's policy is not evaluated.
    ``node_registries_d``: the node's ``/etc/containers/registries.d`` (a ``sigstoreSigned``
    scope needs ``use-sigstore-attachments: true`` there; without it the node is taken to have
    none, the default); the file the node needs comes back in ``node_files``."""
    from ocibridge.k8s import check
    from ocibridge.k8s.node_policy import node_policy as node_verdict
    from ocibridge.k8s.registries_d import read_registries_d
    from ocibridge.places.locate import text_of
    from ocibridge.signing.policy_file import read_policy_file

    located = _located(ref)
    shown = text_of(located)
    # read whatever the runtime or reference: a file named but missing or broken is an error, not skipped
    nodes = read_policy_file(node_policy) if node_policy else None
    registries = read_registries_d(node_registries_d) if node_registries_d else None
    t = _open(located, transfer)
    result = check(t.store, t.reference, runtime, platform=platform)
    assert result.version is not None
    node = node_verdict(t.store, t.reference, located, nodes, result.version, shown, registries)
    reasons = [*result.reasons, *([node.line] if node.refused else [])]
    return VolumeCheck(
        reference=shown, runtime=result.runtime.value, runtime_label=result.version.label,
        platform=result.platform, manifest=result.manifest.digest, kind=result.kind,
        will_mount=result.will_mount and not node.refused, node_policy=node.line, node_policy_refused=node.refused,
        node_files=node.files,
        reasons=tuple(reasons),
        warnings=tuple(result.warnings), layers=tuple(result.layers), layers_hidden=result.layers_hidden,
        sub_path=result.sub_path, diff_ids_verified=result.diff_ids_verified, tree=tuple(result.tree))


@closes_its_stores
def k8s_mount(
    ref: str | Locator,
    directory: str | os.PathLike[str],
    *,
    runtime: str = DEFAULT_RUNTIME,
    platform: str = DEFAULT_PLATFORM,
    verify: Verification | None = None,
    transfer: TransferOptions | None = None,
) -> VolumeLayout:
    """Lay out ``directory`` (absent or empty) exactly as ``runtime`` would present the volume,
    from what was verified (``verify``, and the containers policy file that applies): check, then
    use. Every blob is read to its end through the verifying reader; the directory appears at once."""
    from ocibridge.api.opening import open_checked
    from ocibridge.k8s import mount

    t = open_checked(_located(ref), verify, transfer)  # check, then use the digest checked
    done = mount(t.store, t.reference, directory, runtime, platform=platform)
    return VolumeLayout(os.fspath(directory), runtime, tuple(done.paths), tuple(done.not_reproduced))


@closes_its_stores
def k8s_modelcar(
    ref: str | Locator,
    options: ModelCarOptions = ModelCarOptions(),
    *,
    kserve: KServeOptions | None = None,
    pull_secrets: PullSecrets = PullSecrets(),
    verify: Verification | None = None,
    transfer: TransferOptions | None = None,
) -> ModelCarImage:
    """Build a ModelCar image (the model's files under ``/models``) of ``ref``, in its own store,
    from the digest that was verified (``verify``, and the containers policy file that applies).
    With ``kserve``, also the InferenceService serving it pinned by digest (``pull_secrets``: what
    it pulls the image with; ``ref`` must be in a registry a cluster can pull from)."""
    from ocibridge.k8s.kserve import check_name, header, inference_service
    from ocibridge.k8s.node_mirrors import not_carried
    from ocibridge.k8s.volume import pinned_reference
    from ocibridge.kinds.modelcar.from_any import build_from_any
    from ocibridge.places.locate import text_of
    from ocibridge.scanning.policy import require_clean_scan
    from ocibridge.signing.coverage import Trusted
    from ocibridge.signing.use import check_before_use, refuse_before_opening
    from ocibridge.stores.registry.pull_secret import loopback_warnings, pull_secret

    located = _located(ref)
    shown = text_of(located)
    if kserve is not None:
        check_name(kserve.name)
        pinned_reference(located, "sha256:" + "0" * 64)  # a layout: refused before anything is built
    if pull_secrets.create and not (kserve is not None and pull_secrets.names):
        raise UsageError("--create-pull-secret needs --kserve NAME and --image-pull-secret NAME "
                         "(the Secret it creates)")
    refuse_before_opening(located, verify, shown)
    t = _open(located, transfer, for_write=True)
    # the reference is resolved once: the image is built from the digest that was verified,
    # not from whatever the tag names by then (docs/security.md, "what is verified is used")
    source = t.store.resolve(t.reference)
    check_before_use(t.store, source, located, verify, shown, clean_scan=require_clean_scan, trusts=Trusted.MANIFEST)
    platforms = tuple(options.platforms) or None
    base = None
    if options.base:
        from ocibridge.kinds.modelcar.baseimage import open_base

        b = _open(_located(options.base), transfer)
        base = open_base(b.store, b.reference, platform=(platforms or (DEFAULT_PLATFORM,))[0], shown=options.base)
    desc = build_from_any(t.store, source.digest, shown=shown, tag=options.tag, index=options.index,
                          platforms=platforms, base=base)
    image = ModelCarImage(desc.digest, desc.mediaType, desc.size, options.tag)
    if kserve is None:
        return image
    pinned = pinned_reference(located, desc.digest)
    docs = [inference_service(kserve.name, str(pinned), runnable=base is not None, model_format=kserve.model_format,
                              pull_secrets=pull_secrets.names)]
    secret = pull_secret(pull_secrets.names[0], [pinned.registry]) if pull_secrets.create else None
    return ModelCarImage(desc.digest, desc.mediaType, desc.size, options.tag, documents_with_secret(
        secret, docs, header=header(str(pinned), base is not None),
        warnings=loopback_warnings([pinned.registry]) + not_carried([pinned.registry]), pinned=(str(pinned),)))


@closes_its_stores
def k8s_volume(
    ref: str | Locator,
    pod: PodOptions = PodOptions(),
    *,
    runtime: str = DEFAULT_RUNTIME,
    platform: str = DEFAULT_PLATFORM,
    pull_secrets: PullSecrets = PullSecrets(),
    transfer: TransferOptions | None = None,
) -> KubernetesDocuments:
    """A Pod mounting ``ref`` as a read-only image volume pinned by digest (``pod.snippet``: only
    the volume and its mount), refused with the reason if ``runtime`` would not mount it; a
    ModelCar image gets ``subPath: models`` where the runtime has image-volume subPath. The header
    says what the cluster and runtime need and where the model's files appear in the container."""
    from ocibridge.k8s.node_mirrors import not_carried
    from ocibridge.k8s.volume import pod_header, volume_document
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.registry.pull_secret import loopback_warnings, pull_secret

    if pull_secrets.create and (not pull_secrets.names or pod.snippet):
        raise UsageError("--create-pull-secret needs --image-pull-secret NAME (the Secret it creates) "
                         "and a whole Pod (not --snippet)")
    located = _located(ref)
    t = _open(located, transfer)
    secret = None
    warnings: list[str] = []
    if isinstance(located, RegistryReference):  # a layout reference is refused below, with its own message
        if pull_secrets.create:
            secret = pull_secret(pull_secrets.names[0], [located.registry])
        warnings = loopback_warnings([located.registry]) + not_carried([located.registry])
    doc, rv, pinned, sub_path, where = volume_document(
        t.store, t.reference, located, runtime=runtime, platform=platform, mount_path=pod.mount_path,
        name=pod.name, image=pod.image, snippet=pod.snippet, pull_secrets=pull_secrets.names)
    header = pod_header(pinned, runtime=rv, sub_path=sub_path, pull_secrets=pull_secrets.names, files_at=where)
    return documents_with_secret(secret, (doc,), header=header, warnings=warnings, pinned=(str(pinned),))


def _selector_pairs(selector: Mapping[str, str] | Sequence[str]) -> list[str]:
    if isinstance(selector, Mapping):
        return [f"{key}={value}" for key, value in selector.items()]
    if isinstance(selector, str):
        return [selector]
    return list(selector)


@closes_its_stores
def k8s_prewarm(
    refs: Sequence[str | Locator],
    options: PrewarmOptions = PrewarmOptions(),
    *,
    runtime: str = DEFAULT_RUNTIME,
    platform: str = DEFAULT_PLATFORM,
    pull_secrets: PullSecrets = PullSecrets(),
    transfer: TransferOptions | None = None,
) -> KubernetesDocuments:
    """A DaemonSet making every node ``options.selector`` picks pull the models of ``refs``
    (registry references, each resolved once and pinned by digest) before a workload needs them:
    as image volumes where ``runtime`` has them, else as ModelCar images (``options.mode``)."""
    from ocibridge.core.textlists import one_or_many
    from ocibridge.k8s.prewarm import Model, check_selector, prewarm_daemonset
    from ocibridge.k8s.prewarm_warm import warm_step
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.places.locate import text_of
    from ocibridge.stores.registry.pull_secret import loopback_warnings, pull_secret

    if pull_secrets.create and not pull_secrets.names:
        raise UsageError("--create-pull-secret needs --image-pull-secret NAME (the Secret it creates)")
    selector = check_selector(_selector_pairs(options.selector))
    if options.mode not in (None, "volume", "modelcar"):
        raise UsageError(f"--mode {options.mode!r}: volume or modelcar")
    models = []
    for ref in refs:
        located = _located(ref)
        if not isinstance(located, RegistryReference):
            raise UsageError(f"{text_of(located)} is not a registry reference: a node pulls from a registry "
                             "(push it to one first)")
        t = _open(located, transfer)
        models.append(Model(t.store, t.reference, located))
    done = prewarm_daemonset(models, runtime=runtime, platform=platform, mode=options.mode,
                             name=options.name, namespace=options.namespace, selector=selector,
                             image=options.image, pull_secrets=pull_secrets.names,
                             node_mirrors=options.node_mirrors,
                             warm=warm_step(options.warm_image, options.warm_verify_key, engine=options.warm_engine,
                                            options=one_or_many(options.warm_options), device=options.warm_device,
                                            host_path=options.warm_host_path,
                                            plain_http=transfer is not None and transfer.plain_http))
    hosts = sorted({p.registry for p in done.pinned})
    secret = (pull_secret(pull_secrets.names[0], hosts, namespace=options.namespace)
              if pull_secrets.create else None)
    warnings = loopback_warnings(hosts)
    if transfer is not None and transfer.ca_file:  # the nodes pull, with their runtime's trust, not this machine's
        warnings.append("warning: --ca-file is this machine's trust; the nodes pull with their runtime's: put the CA "
                        f"in /etc/containers/certs.d/{hosts[0]}/ca.crt (CRI-O) or containerd's hosts.toml on every "
                        "node")
    return documents_with_secret(secret, (*done.node_documents, done.daemonset), header=comments(done.header()),
                      warnings=warnings, pinned=[str(p) for p in done.pinned])


def k8s_policy(
    source: str | os.PathLike[str] | AdmissionSigners,
    *,
    name: str = "models-signed",
    kyverno: bool = True,
    policy_controller: bool = True,
) -> AdmissionPolicies:
    """Admission checks matching the signatures the nodes' containers policy asks for: a Kyverno
    ClusterPolicy and policy-controller ClusterImagePolicies, from a containers policy.json
    (``source``: its path; its docker scopes are translated) or from :class:`AdmissionSigners`.
    What does not carry over is said in the notes (and the header above the documents)."""
    from ocibridge.k8s import admission_docs
    from ocibridge.k8s.admission import from_flags, from_policy
    from ocibridge.signing.policy_file import read_policy_file

    name = admission_docs.check_name(name)
    if not (kyverno or policy_controller):
        raise UsageError("k8s policy: ask for the Kyverno policy, the policy-controller policies or both")
    if isinstance(source, AdmissionSigners):  # a rule per image, or a UsageError saying what is missing
        t = from_flags(list(source.images), list(source.keys), source.identity, source.issuer)
    else:
        t = from_policy(read_policy_file(source))
        if not t.rules:
            raise UsageError(f"{os.fspath(source)}: no docker scope asks for a signature (sigstoreSigned): "
                             "nothing for an admission controller to check")
    docs: list[dict[str, Any]] = []
    notes = list(t.notes)
    if kyverno:
        docs.append(admission_docs.kyverno(t, name))
    if policy_controller:
        docs.extend(admission_docs.policy_controller(t, name))
        notes.extend(admission_docs.policy_controller_notes(t))
    head = comments(["ocibridge k8s policy: admission checks matching the containers policy the nodes enforce",
                     *(f"note: {n}" for n in notes)])
    untranslated = (f"warning: {t.untranslated} part(s) of the policy are not translated (see the comments above "
                    "the documents)",) if t.untranslated else ()
    return AdmissionPolicies(tuple(docs), header=head, closing_warnings=untranslated,
                             notes=tuple(notes), untranslated=t.untranslated)


def k8s_validate(documents: KubernetesDocuments | Sequence[Mapping[str, Any]],
                 version: str | None = None) -> SchemaCheck:
    """Check Kubernetes documents (what a ``k8s_*`` call returned) offline against the OpenAPI
    schema of Kubernetes ``version`` (``1.33``; None: the newest the installed schemas cover),
    strictly: an unknown field is refused, as the API server refuses it. Custom resources are
    listed as not checked. Raises :class:`ocibridge.OcibridgeError` naming the document, the
    field and why; needs ``ocibridge[k8s]`` (kubernetes-validate)."""
    from ocibridge.k8s.schemacheck import check_documents

    docs = documents.documents if isinstance(documents, KubernetesDocuments) else tuple(documents)
    return check_documents(docs, version)
