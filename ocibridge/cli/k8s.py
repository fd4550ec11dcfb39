"""``k8s check|modelcar|volume|mount|prewarm|serve|mount-daemon|policy``: Kubernetes image volumes.
Whether one will mount and what the pod sees, a ModelCar image (with a KServe InferenceService), a
Pod pinned by digest, a directory laid out as the runtime would mount it, a DaemonSet that pulls
models on every node ahead of the workload, ``ocibridge serve`` on a cluster, ``ocibridge mount``
on every node, and admission policies. Each
command is one call of :mod:`ocibridge.api.k8s`, whose result it prints."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ocibridge.cli.args import given
from ocibridge.cli.common import (
    EXIT_FAILURE,
    Command,
    CommandAdder,
    add_pull_secret_flags,
    add_transfer_flags,
    add_workload_flags,
    emit,
    image_name,
    transfer_options,
    warn,
)
from ocibridge.cli.k8s_serve_flags import add_serve_setting_flags, serve_flags
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.cli.upstream_flags import add_default_tag_flag, add_upstream_policy_flags, upstream_policy
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import human_size, one_line, printable
from ocibridge.errors import OcibridgeError, UsageError

if TYPE_CHECKING:
    from ocibridge.api import k8s as api_k8s
    from ocibridge.api import k8s_mount as api_k8s_mount
    from ocibridge.api.k8s_types import KubernetesDocuments
else:  # loaded when a k8s command runs (or its --runtime is parsed), not for --help
    api_k8s = LazyModule("ocibridge.api.k8s")
    api_k8s_mount = LazyModule("ocibridge.api.k8s_mount")


def _pull_secrets(args: argparse.Namespace) -> api_k8s.PullSecrets:
    return api_k8s.PullSecrets(tuple(args.image_pull_secret), args.create_pull_secret)


def add_validate_flag(p: argparse.ArgumentParser) -> None:
    """``--validate [VERSION]`` of every command that prints Kubernetes documents."""
    p.add_argument("--validate", nargs="?", const="", default=None, metavar="VERSION",
                   help="check the documents offline against Kubernetes VERSION's OpenAPI schema (1.33; default "
                        "the newest known), strictly, before printing them (pip install 'ocibridge[k8s]')")


def add_documents_flags(p: argparse.ArgumentParser, *, notes: bool = False) -> None:
    """``--json`` and ``--validate`` of the commands that print Kubernetes documents (not a summary)."""
    p.add_argument("--json", action="store_true",
                   help="print the documents as a JSON List" + (" (with notes)" if notes else ""))
    add_validate_flag(p)


def _add_selector_flag(p: argparse.ArgumentParser) -> None:
    """``--selector`` of the commands that print a DaemonSet (a nodeSelector)."""
    p.add_argument("--selector", action="append", default=[], metavar="KEY=VALUE",
                   help="only nodes with this label (nodeSelector; repeatable)")


def _pod_registry_access(p: argparse.ArgumentParser, where: str) -> Any:
    """The group of flags saying how ocibridge running in the cluster (``where``) reaches the registries."""
    g = p.add_argument_group(f"registry access (in the {where})")
    g.add_argument("--plain-http", action="store_true", help="the registries speak HTTP")
    g.add_argument("--insecure", action="store_true", help="skip TLS certificate verification")
    return g


def _add_docker_config_secret(g: Any, default: str) -> None:
    """``--docker-config-secret`` of those commands (``default``: what it is without the flag, said in the help)."""
    g.add_argument("--docker-config-secret", metavar="SECRET",
                   help="a Secret of type kubernetes.io/dockerconfigjson with the registries' credentials, "
                        f"mounted as $DOCKER_CONFIG{default}")


def _subcommand(ksub: Any, name: str, func: Command, help: str) -> argparse.ArgumentParser:
    """A ``k8s`` command: its parser, with ``help`` as its description too, running ``func``."""
    p: argparse.ArgumentParser = ksub.add_parser(name, help=help, description=help)
    p.set_defaults(func=func)
    return p


def _validate(args: argparse.Namespace, done: KubernetesDocuments) -> None:
    """With ``--validate``: the documents checked before anything is printed (a refusal is one
    error line and nothing on stdout); what was checked said on stderr."""
    if args.validate is None:
        return
    checked = api_k8s.k8s_validate(done, args.validate or None)
    skipped = [f"{d.kind} {d.name}" for d in checked.documents if not d.checked]
    note = f"; not checked (custom resources): {', '.join(skipped)}" if skipped else ""
    count = len(checked.documents) - len(skipped)
    print(one_line(f"ocibridge: valid for Kubernetes {checked.version} ({count} document(s)){note}"), file=sys.stderr)


def _print_documents(args: argparse.Namespace, done: KubernetesDocuments) -> None:
    """The warnings, the documents (YAML, or JSON with --json), then what to warn about after them."""
    _validate(args, done)
    warn(done.warnings)
    if args.json:
        print(json.dumps(done.as_dict(), indent=2, ensure_ascii=True))
    else:
        print(printable(done.to_yaml()), end="")
    warn(done.closing_warnings)


def cmd_k8s_check(args: argparse.Namespace) -> int:
    result = api_k8s.k8s_check(args.ref, runtime=args.runtime, platform=args.platform, node_policy=args.node_policy,
                               node_registries_d=args.node_registries_d, transfer=transfer_options(args))
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0 if result.will_mount else EXIT_FAILURE
    verdict = "will mount" if result.will_mount else "will NOT mount"
    hidden = result.layers_hidden if result.will_mount else 0
    but = f", but {hidden} layer(s) will not be visible (see warnings)" if hidden else ""
    print(one_line(f"{args.ref}: {verdict} on {result.runtime_label} ({result.kind}){but}"))
    for reason in result.reasons:
        print(one_line(f"  reason: {reason}"))
    if not result.node_policy_refused:
        print(one_line(f"  {result.node_policy}"))
    for node_file in result.node_files:  # what every node needs, to write as it is
        print(one_line(f"  node file {node_file.path}:"))
        print(printable(node_file.content), end="")
    for warning in result.warnings:
        print(one_line(f"  warning: {warning}"))
    for layer in result.layers:
        print(one_line(f"  {layer}"))
    if result.tree:
        print(f"files at the mount path{' (subPath ' + result.sub_path + ')' if result.sub_path else ''}:")
        for entry in result.tree:
            extra = f" -> {entry.target}" if entry.type == "symlink" else f" {entry.target or ''}".rstrip()
            size = human_size(entry.size) if entry.type == "file" else entry.type
            print(one_line(f"  {entry.path}  {size}{extra}"))
    return 0 if result.will_mount else EXIT_FAILURE


def cmd_k8s_modelcar(args: argparse.Namespace) -> int:
    if args.validate is not None and not args.kserve:
        raise UsageError("--validate checks the documents printed: add --kserve NAME (the InferenceService)")
    options = api_k8s.ModelCarOptions(tag=args.tag, index=args.index, platforms=tuple(args.platform),
                                      base=args.base)
    kserve = api_k8s.KServeOptions(args.kserve, args.model_format) if args.kserve else None
    done = api_k8s.k8s_modelcar(args.ref, options, kserve=kserve, pull_secrets=_pull_secrets(args),
                                verify=policy_from_args(args), transfer=transfer_options(args))
    text = f"built {done.media_type} {done.digest}" + (f" tagged {done.tag}" if done.tag else "")
    if done.kserve is None:
        emit(args, done.as_dict(), text)
        return 0
    _validate(args, done.kserve)
    warn(done.kserve.warnings)
    if args.json:
        print(json.dumps(done.as_dict(), indent=2))
    else:
        print(one_line(text), file=sys.stderr)
        print(printable(done.to_yaml()), end="")
    warn(done.kserve.closing_warnings)
    return 0


def cmd_k8s_volume(args: argparse.Namespace) -> int:
    pod = api_k8s.PodOptions(mount_path=args.mount_path, name=args.name, image=args.image, snippet=args.snippet)
    done = api_k8s.k8s_volume(args.ref, pod, runtime=args.runtime, platform=args.platform,
                              pull_secrets=_pull_secrets(args), transfer=transfer_options(args))
    _print_documents(args, done)  # --json: the same Pod (or snippet) as a JSON document: kubectl takes either
    return 0


def cmd_k8s_mount(args: argparse.Namespace) -> int:
    done = api_k8s.k8s_mount(args.ref, args.dir, runtime=args.runtime, platform=args.platform,
                             verify=policy_from_args(args), transfer=transfer_options(args))
    text = f"laid out {len(done.files)} paths in {args.dir} as {args.runtime} would mount them"
    emit(args, done.as_dict(), "\n".join([text, *(f"  not reproduced: {one_line(n)}" for n in done.not_reproduced)]))
    return 0


def cmd_k8s_serve(args: argparse.Namespace) -> int:
    options = api_k8s.K8sServeOptions(
        image=args.image, name=args.name, namespace=args.namespace, replicas=args.replicas, port=args.port,
        service_type=args.service_type, cache_size=args.cache_size, cache_access_mode=args.cache_access_mode,
        storage_class=args.storage_class, token_secret=args.token_secret, default_tag=args.default_tag,
        public_url=args.public_url, cpu=args.cpu, memory=args.memory, upstream=args.upstream,
        upstream_token_secret=args.upstream_token_secret, upstream_fresh=args.upstream_fresh, quotas=args.quotas,
        anonymous_shared_budget=args.upstream_anonymous_shared_budget,
        scan=args.scan, scan_verify_keys=tuple(args.scan_verify_key), sign_key=args.sign_key,
        sign_key_secret=args.sign_key_secret, sign_form=args.sign_form, sbom=args.sbom, provenance=args.provenance,
        attest_key=args.attest_key, attest_key_secret=args.attest_key_secret, verify_keys=tuple(args.verify_key),
        policy=args.policy, serve_flags=tuple(serve_flags(args)), **upstream_policy(args))
    access = api_k8s.PodRegistryAccess(plain_http=args.plain_http, insecure=args.insecure, ca_file=args.ca_file,
                                       docker_config_secret=args.docker_config_secret,
                                       docker_config=not args.no_docker_config)
    _print_documents(args, api_k8s.k8s_serve(args.sources, options, access=access, pull_secrets=_pull_secrets(args)))
    return 0


def cmd_k8s_mount_daemon(args: argparse.Namespace) -> int:
    options = api_k8s_mount.MountDaemonOptions(
        image=args.image, name=args.name, namespace=args.namespace, host_path=args.host_path,
        cache_host_path=args.cache_host_path, reader_image=args.reader_image, selector=tuple(args.selector))
    access = api_k8s.PodRegistryAccess(plain_http=args.plain_http, insecure=args.insecure,
                                       docker_config_secret=args.docker_config_secret)
    _print_documents(args, api_k8s_mount.k8s_mount_daemon(args.refs, options, access=access,
                                                          pull_secrets=api_k8s.PullSecrets(tuple(args.image_pull_secret))))
    return 0


def cmd_k8s_prewarm(args: argparse.Namespace) -> int:
    options = api_k8s.PrewarmOptions(mode=args.mode, name=args.name, namespace=args.namespace,
                                     selector=tuple(args.selector), image=args.image,
                                     node_mirrors=not args.no_node_mirrors, warm_image=args.warm_image,
                                     warm_engine=args.warm_engine, warm_verify_key=args.warm_verify_key,
                                     warm_options=tuple(args.warm_option), warm_device=args.warm_device,
                                     warm_host_path=args.warm_host_path)
    done = api_k8s.k8s_prewarm(args.refs, options, runtime=args.runtime, platform=args.platform,
                               pull_secrets=_pull_secrets(args), transfer=transfer_options(args))
    _print_documents(args, done)
    return 0


def cmd_k8s_policy(args: argparse.Namespace) -> int:
    source: str | api_k8s.AdmissionSigners = args.from_policy
    if not args.from_policy:
        source = api_k8s.AdmissionSigners(tuple(args.image), tuple(args.key), args.identity, args.issuer)
    elif args.image or args.key or args.identity or args.issuer:
        raise UsageError("--from-policy takes the scopes and keys from the file: "
                         "leave out --image, --key, --identity and --issuer")
    done = api_k8s.k8s_policy(source, name=args.name, kyverno=not args.policy_controller_only,
                              policy_controller=not args.kyverno_only)
    _print_documents(args, done)
    return 0


def _runtime_arg(text: str) -> str:
    """``--runtime``: a runtime with an optional version, checked when the line is parsed."""
    try:
        return api_k8s.check_runtime(text)
    except OcibridgeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(command: CommandAdder) -> None:
    """The ``k8s`` group and its commands (each takes REF, ``--json`` and the registry flags)."""
    k8s = command("k8s", None, group=True)
    ksub = k8s.add_subparsers(dest="k8s_command", required=True, metavar="K8S_COMMAND")

    def kcommand(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        p = _subcommand(ksub, name, func, help)
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
        if name == "prewarm":
            p.add_argument("refs", metavar="REF", nargs="+")
        else:
            p.add_argument("ref", metavar="REF")
        if name != "modelcar":
            p.add_argument("--runtime", type=_runtime_arg, default="cri-o", metavar="RUNTIME[@VERSION]",
                           help="cri-o[@1.33|@1.34|…] or containerd[@1.6|@1.7|@2.0|@2.1|@2.2|@2.3|…]; "
                                "default: the current release (cri-o 1.36, containerd 2.3)")
            p.add_argument("--platform", default="linux/amd64", help="node platform os/arch")
        add_transfer_flags(p)
        return p

    p = kcommand("check", cmd_k8s_check, "say whether an image volume will mount and what the pod will see")
    p.add_argument("--node-policy", metavar="FILE",
                   help="a node's containers policy.json, evaluated as CRI-O applies it to the pull "
                        "(CRI-O reads /etc/containers/policy.json there; not evaluated without this flag)")
    p.add_argument("--node-registries-d", metavar="DIR",
                   help="the node's /etc/containers/registries.d: a sigstoreSigned scope needs "
                        "use-sigstore-attachments: true there (off by default); check says which file the node needs")
    p = kcommand("modelcar", cmd_k8s_modelcar, "build a ModelCar-style image (files under /models) for containerd")
    p.add_argument("--tag", help="tag the image (or index) in the same store")
    p.add_argument("--index", action="store_true", help="one index serving the image and the ModelPack artifact")
    p.add_argument("--platform", action="append", default=[], help="platform os/arch (repeatable)")
    p.add_argument("--base", metavar="IMAGE", help="build on this runnable image (busybox, say: read from its "
                   "registry or layout) so KServe's ModelCar sidecar can start; its platform is the image's")
    p.add_argument("--kserve", metavar="NAME", help="print a KServe InferenceService serving the image (pinned)")
    p.add_argument("--model-format", default="huggingface", help="the InferenceService's modelFormat name")
    add_pull_secret_flags(p, pulls="the InferenceService's image", creates="the registry")
    add_validate_flag(p)
    add_verify_flags(p)
    p = kcommand("volume", cmd_k8s_volume, "print a Pod with the image volume pinned by digest")
    p.add_argument("--mount-path", default="/models")
    p.add_argument("--name", default="model-consumer", help="Pod name")
    p.add_argument("--image", default="busybox:1.36", type=image_name, help="container image of the Pod")
    p.add_argument("--snippet", action="store_true", help="only the volume and volumeMount")
    add_pull_secret_flags(p, pulls="the model", creates="the registry")
    add_validate_flag(p)
    p = kcommand("mount", cmd_k8s_mount, "lay out DIR as the runtime would present the mount")
    p.add_argument("dir", metavar="DIR")
    add_verify_flags(p)
    p = kcommand("prewarm", cmd_k8s_prewarm, "print a DaemonSet that makes every selected node pull the "
                 "models (pinned by digest) ahead of the workload")
    _add_selector_flag(p)
    p.add_argument("--mode", choices=("volume", "modelcar"),
                   help="image volumes of a sleeping container (default where the runtime has them) or "
                        "ModelCar images as init containers (any cluster; REF must be an image)")
    p.add_argument("--name", default="model-prewarm", help="DaemonSet name")
    p.add_argument("--namespace", help="DaemonSet namespace")
    p.add_argument("--image", default="busybox:1.36", type=image_name,
                   help="the image of the container that holds the models")
    p.add_argument("--no-node-mirrors", action="store_true",
                   help="leave out the ConfigMap and DaemonSet that give the nodes the models' registries.toml "
                        "mirrors (the nodes' mirrors are set otherwise: Spegel, Dragonfly)")
    g = p.add_argument_group("compile caches (docs/warm.md): each node restores the models' caches for its key")
    g.add_argument("--warm-image", metavar="IMAGE", type=image_name,
                   help="restore them with warm load in this image: the engine's, with ocibridge installed")
    g.add_argument("--warm-engine", default="vllm", metavar="ENGINE", help="the engine they are keyed by (vllm)")
    g.add_argument("--warm-verify-key", metavar="KIND/NAME/ITEM",
                   help="the public key: secret/NAME/ITEM or configmap/NAME/ITEM (required with --warm-image)")
    g.add_argument("--warm-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a compile option of the key (repeatable; as warm load --option)")
    g.add_argument("--warm-device", choices=("cuda", "cpu"), default="cuda", help="the device the key names")
    g.add_argument("--warm-host-path", metavar="DIR",
                   help="the node's directory for the caches (default /var/lib/ocibridge/warm/NAME), which the "
                        "engine's pods mount at their cache directory")
    add_pull_secret_flags(p, pulls="the models", creates="their registries")
    add_validate_flag(p)
    _register_serve(ksub)
    _register_mount_daemon(ksub)
    _register_policy(ksub)


def _register_mount_daemon(ksub: Any) -> None:
    help = ("print a DaemonSet that mounts models lazily on every node (ocibridge mount, FUSE) under a host path, "
            "and a Pod that reads one")
    p = _subcommand(ksub, "mount-daemon", cmd_k8s_mount_daemon, help)
    p.add_argument("refs", nargs="+", metavar="REF", help="a model (host/repo:tag or @digest), or NAME=REF: "
                   "mounted at HOST-PATH/NAME (default NAME: the repository's last part and the tag)")
    add_documents_flags(p)
    add_workload_flags(p, extra="[mount]", name="ocibridge-mounts", named="DaemonSet name",
                       namespace_help="namespace of the documents")
    p.add_argument("--host-path", default="/var/lib/ocibridge/models",
                   help="where the models appear on each node (default /var/lib/ocibridge/models)")
    p.add_argument("--cache-host-path", default="/var/cache/ocibridge",
                   help="the nodes' model cache: a restarted daemon fetches nothing again "
                        "(default /var/cache/ocibridge)")
    _add_selector_flag(p)
    p.add_argument("--reader-image", default="busybox:1.36", type=image_name,
                   help="the image of the example Pod reading the first model")
    g = _pod_registry_access(p, "containers")
    _add_docker_config_secret(g, "")
    g.add_argument("--image-pull-secret", action="append", default=[], metavar="NAME",
                   help="a Secret of type kubernetes.io/dockerconfigjson to pull the images with (repeatable)")


def _register_policy(ksub: Any) -> None:
    help = ("print a Kyverno ClusterPolicy and policy-controller ClusterImagePolicies that check at admission "
            "the signatures the nodes' containers policy asks for")
    p = _subcommand(ksub, "policy", cmd_k8s_policy, help)
    p.add_argument("--from-policy", metavar="FILE", help="translate this containers policy.json's docker scopes")
    p.add_argument("--image", action="append", default=[], metavar="SCOPE",
                   help="a scope as policy.json writes it: host, host/namespace, host/repo[:tag], *.domain "
                        "(repeatable)")
    p.add_argument("--key", action="append", default=[], metavar="PUB",
                   help="a public key (PEM) whose signature is accepted (repeatable: any one)")
    p.add_argument("--identity", type=given, metavar="SUBJECT",
                   help="keyless: the certificate's subject (an email, a URI)")
    p.add_argument("--issuer", metavar="URL", help="keyless: the OIDC issuer")
    p.add_argument("--name", default="models-signed", help="name of the documents (default models-signed)")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--kyverno-only", action="store_true", help="only the Kyverno ClusterPolicy")
    only.add_argument("--policy-controller-only", action="store_true",
                      help="only the policy-controller ClusterImagePolicies")
    add_documents_flags(p, notes=True)


def _register_serve(ksub: Any) -> None:
    help = "print a Deployment, Service and cache volume running 'ocibridge serve' (the Hub's API over registries)"
    p = _subcommand(ksub, "serve", cmd_k8s_serve, help)
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="a registry prefix (host/path), as 'ocibridge serve' takes it; searched in order")
    add_documents_flags(p)
    p.add_argument("--replicas", type=int, default=1, metavar="N", help="replicas behind the Service (default 1)")
    add_workload_flags(p, extra="[serve]", name="ocibridge-serve", named="name of the Deployment and Service",
                       namespace_help="namespace of every document")
    p.add_argument("--port", type=int, default=8080, help="port of the container and the Service (default 8080)")
    p.add_argument("--service-type", default="ClusterIP", choices=["ClusterIP", "NodePort", "LoadBalancer"],
                   help="the Service's type (default ClusterIP)")
    p.add_argument("--cache-size", default="50Gi", metavar="SIZE",
                   help="size of the model cache's volume (default 50Gi)")
    p.add_argument("--cache-access-mode", choices=["ReadWriteOnce", "ReadWriteMany"],
                   help="the cache claim's access mode; default: ReadWriteOnce for one replica, else an "
                        "emptyDir cache per replica (ReadWriteMany: one claim every replica shares)")
    p.add_argument("--storage-class", metavar="CLASS", help="storage class of the cache's claim")
    p.add_argument("--token-secret", metavar="SECRET",
                   help="a Secret whose key 'tokens' holds the read tokens, one a line (serve --token-file)")
    p.add_argument("--quotas", metavar="FILE",
                   help="serve --quotas: each namespace's bytes and repositories (docs/quotas.md), a TOML file "
                        "read here and carried to the pods in a ConfigMap NAME-quotas")
    p.add_argument("--scan", choices=("refuse", "quarantine", "off"), default="off",
                   help="serve --scan: every commit's files scanned by content before its branch's tag moves, a "
                        "flagged one refused or quarantined (docs/scanning.md; default off)")
    p.add_argument("--scan-verify-key", action="append", default=[], metavar="PUB",
                   help="serve --scan-verify-key, with --scan quarantine (needed unless the pods sign "
                        "their own reports with --sign-key or --attest-key, and with --replicas and a key's "
                        "-secret): a public key read here and carried to the pods in a ConfigMap "
                        "NAME-scan-keys; a scan report it signed may release a model (repeatable)")
    p.add_argument("--sign-key", metavar="KEY",
                   help="serve --sign-key: every commit published is signed (ECDSA P-256 PEM or a cosign key "
                        "file; its password in $COSIGN_PASSWORD); the key, loaded here, and its password are "
                        "carried in a Secret NAME-sign-key mounted read-only (the output then holds them)")
    p.add_argument("--sign-key-secret", metavar="SECRET",
                   help="instead of --sign-key: a Secret already in the cluster whose key 'sign.key' is the "
                        "private key (and 'password', if any, its password), mounted read-only; nothing secret "
                        "is printed")
    p.add_argument("--sign-form", choices=("classic", "bundle", "both"), default=None,
                   help="serve --sign-form: classic (.sig tag), bundle (OCI 1.1 referrer) or both (default)")
    p.add_argument("--sbom", action="store_true",
                   help="serve --sbom: each commit's AI-BOM attached (the image needs ocibridge[evidence])")
    p.add_argument("--provenance", action="store_true", help="serve --provenance: each commit's SLSA provenance")
    p.add_argument("--attest-key", metavar="KEY",
                   help="serve --attest-key, with --sbom or --provenance: their attestations and the pods' scan "
                        "reports signed with this key (else --sign-key's), carried as --sign-key's in a Secret "
                        "NAME-attest-key (the output then holds it)")
    p.add_argument("--attest-key-secret", metavar="SECRET",
                   help="instead of --attest-key: a Secret already in the cluster whose key 'attest.key' is the "
                        "private key (and 'password', if any), mounted read-only; nothing secret is printed")
    add_default_tag_flag(p, default=None)
    p.add_argument("--public-url", metavar="URL",
                   help="the URL clients reach the Service at, when an Ingress ends TLS (serve --public-url)")
    p.add_argument("--cpu", default="500m", help="CPU request per replica (default 500m)")
    p.add_argument("--memory", default="1Gi", help="memory request and limit per replica (default 1Gi)")
    g = p.add_argument_group("a proxy of an upstream Hub (serve --upstream; docs/serve.md)")
    g.add_argument("--upstream", metavar="URL", help="serve --upstream: what the registry lacks is fetched from it")
    g.add_argument("--upstream-token-secret", metavar="SECRET",
                   help="a Secret whose key 'token' is the token sent to the upstream (mounted as "
                        "--upstream-token-file; never in the args)")
    g.add_argument("--upstream-fresh", type=float, metavar="SECONDS", help="serve --upstream-fresh")
    g.add_argument("--upstream-anonymous-shared-budget", action="store_true",
                   help="without --token-secret: accept that anonymous clients arriving from one address (an "
                        "Ingress', a node's) share one per-client budget, and print no warning of it")
    add_upstream_policy_flags(g)
    g = _pod_registry_access(p, "pods")
    g.add_argument("--ca-file", metavar="PEM", help="CA of the registries: read here, put in a ConfigMap mounted "
                   "where ocibridge looks for each registry's CA")
    _add_docker_config_secret(g, " (default with --create-pull-secret: NAME-docker-config)")
    g.add_argument("--no-docker-config", action="store_true", help="mount no docker config Secret")
    add_pull_secret_flags(g, pulls="IMAGE", creates="the sources' registries, mounted as $DOCKER_CONFIG")
    add_serve_setting_flags(p)


