"""``k8s check|modelcar|volume|mount|prewarm``: Kubernetes image volumes. Whether one will mount
and what the pod sees, a ModelCar image (with a KServe InferenceService), a Pod pinned by digest,
a directory laid out as the runtime would mount it, and a DaemonSet that pulls models on every
node ahead of the workload."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ocibridge.cli.common import (
    EXIT_FAILURE,
    Command,
    CommandAdder,
    add_pull_secret_flags,
    add_transfer_flags,
    emit,
    transfer_options,
)
from ocibridge.cli.signing import add_verify_flags, policy_from_args
from ocibridge.core.terminal import human_size, one_line, printable
from ocibridge.errors import OcibridgeError, UsageError

if TYPE_CHECKING:
    from ocibridge.kinds.locate import Locator
    from ocibridge.kinds.targets import StoreTarget


def _located(args: argparse.Namespace) -> Locator:
    """REF, located (once per command: the command passes it on)."""
    from ocibridge.kinds.locate import Role, locate

    return locate(args.ref, Role.MODEL)


def _k8s_target(args: argparse.Namespace, located: Locator, for_write: bool = False) -> StoreTarget:
    from ocibridge.kinds.targets import open_store_target

    return open_store_target(located, for_write=for_write, options=transfer_options(args).registry_options())


def cmd_k8s_check(args: argparse.Namespace) -> int:
    from ocibridge.k8s import check
    from ocibridge.k8s.node_policy import node_policy
    from ocibridge.signing.containers_policy import read_policy_file

    located = _located(args)
    # read whatever the runtime or reference: a file named but missing or broken is an error, not skipped
    nodes = read_policy_file(args.node_policy) if args.node_policy else None
    t = _k8s_target(args, located)
    result = check(t.store, t.reference, args.runtime, platform=args.platform)
    result.reference = args.ref  # as the user wrote it, not the store-relative tag
    assert result.version is not None
    node = node_policy(t.store, t.reference, located, nodes, result.version, args.ref)
    if node.refused:
        result.reasons.append(node.line)
        result.will_mount = False
    if args.json:
        print(json.dumps({**result.to_json(), "nodePolicy": node.line}, indent=2))
    else:
        verdict = "will mount" if result.will_mount else "will NOT mount"
        hidden = result.layers_hidden if result.will_mount else 0
        but = f", but {hidden} layer(s) will not be visible (see warnings)" if hidden else ""
        label = result.version.label if result.version else args.runtime
        print(one_line(f"{args.ref}: {verdict} on {label} ({result.kind}){but}"))
        for reason in result.reasons:
            print(one_line(f"  reason: {reason}"))
        if not node.refused:
            print(one_line(f"  {node.line}"))
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
    from ocibridge.kinds.modelcar.from_any import build_from_any
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    located = _located(args)
    if args.kserve:
        from ocibridge.k8s.kserve import check_name
        from ocibridge.k8s.volume import pinned_reference

        check_name(args.kserve)
        pinned_reference(located, "sha256:" + "0" * 64)  # a layout: refused before anything is built
    if args.create_pull_secret and not (args.kserve and args.image_pull_secret):
        raise UsageError("--create-pull-secret needs --kserve NAME and --image-pull-secret NAME "
                         "(the Secret it creates)")
    from ocibridge.signing.coverage import Trusted
    from ocibridge.signing.use import check_before_use, refuse_before_opening

    refuse_before_opening(located, policy_from_args(args), args.ref)
    t = _k8s_target(args, located, for_write=True)
    # the reference is resolved once: the image is built from the digest that was verified,
    # not from whatever the tag names by then (docs/security.md, "what is verified is used")
    source = t.store.resolve(t.reference)
    check_before_use(t.store, source, located, policy_from_args(args), args.ref, trusts=Trusted.MANIFEST)
    platforms = tuple(args.platform) if args.platform else None
    base = None
    if args.base:
        from ocibridge.kinds.locate import Role, locate
        from ocibridge.kinds.modelcar.base import open_base
        from ocibridge.kinds.targets import open_store_target

        b = open_store_target(locate(args.base, Role.MODEL), options=transfer_options(args).registry_options())
        base = open_base(b.store, b.reference, platform=(args.platform or ["linux/amd64"])[0], shown=args.base)
    desc = build_from_any(t.store, source.digest, shown=args.ref, tag=args.tag, index=args.index,
                          platforms=platforms, base=base)
    summary: dict[str, Any] = {"digest": desc.digest, "mediaType": desc.mediaType, "size": desc.size}
    text = f"built {desc.mediaType} {desc.digest}" + (f" tagged {args.tag}" if args.tag else "")
    if not args.kserve:
        emit(args, summary, text)
        return 0
    from ocibridge.k8s.kserve import header, inference_service
    from ocibridge.k8s.volume import pinned_reference
    from ocibridge.mirror.yamlout import dump_all

    pinned = pinned_reference(located, desc.digest)
    host = pinned.registry
    docs = [inference_service(args.kserve, str(pinned), runnable=base is not None, model_format=args.model_format,
                              pull_secrets=args.image_pull_secret)]
    if args.create_pull_secret:
        docs.insert(0, pull_secret(args.image_pull_secret[0], [host]))
    for line in loopback_warnings([host]):
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps({**summary, "objects": docs}, indent=2))
    else:
        print(one_line(text), file=sys.stderr)
        print(printable(header(str(pinned), base is not None) + dump_all(docs)), end="")
    if args.create_pull_secret:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    return 0


def cmd_k8s_volume(args: argparse.Namespace) -> int:
    from ocibridge.k8s import volume_yaml
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    secret = None
    if args.create_pull_secret and (not args.image_pull_secret or args.snippet):
        raise UsageError("--create-pull-secret needs --image-pull-secret NAME (the Secret it creates) "
                         "and a whole Pod (not --snippet)")
    located = _located(args)
    t = _k8s_target(args, located)
    if isinstance(located, RegistryReference):  # a layout reference is refused below, with its own message
        if args.create_pull_secret:
            secret = pull_secret(args.image_pull_secret[0], [located.registry])
        for line in loopback_warnings([located.registry]):
            print(line, file=sys.stderr)
    if args.json:  # the same Pod (or snippet) as a JSON document: kubectl takes either
        from ocibridge.k8s.volume import volume_document

        doc, *_ = volume_document(
            t.store, t.reference, located, runtime=args.runtime, platform=args.platform,
            mount_path=args.mount_path, name=args.name, image=args.image, snippet=args.snippet,
            pull_secrets=args.image_pull_secret,
        )
        if secret is not None:
            doc = {"apiVersion": "v1", "kind": "List", "items": [secret, doc]}
        print(json.dumps(doc, indent=2, ensure_ascii=True))
    else:
        text = volume_yaml(
            t.store, t.reference, located, runtime=args.runtime, mount_path=args.mount_path,
            name=args.name, image=args.image, snippet=args.snippet, platform=args.platform,
            pull_secrets=args.image_pull_secret,
        )
        if secret is not None:
            from ocibridge.mirror.yamlout import dump_all

            text = dump_all([secret]) + "---\n" + text
        print(printable(text), end="")
    if secret is not None:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    return 0


def cmd_k8s_mount(args: argparse.Namespace) -> int:
    from ocibridge.k8s import mount
    from ocibridge.signing.use import check_before_use, refuse_before_opening

    located = _located(args)
    refuse_before_opening(located, policy_from_args(args), args.ref)
    t = _k8s_target(args, located)
    used = check_before_use(t.store, t.reference, located, policy_from_args(args), args.ref)  # check, then use
    done = mount(t.store, used, args.dir, args.runtime, platform=args.platform)
    text = f"laid out {len(done.paths)} paths in {args.dir} as {args.runtime} would mount them"
    emit(args, {"files": done.paths, "notReproduced": done.not_reproduced},
         "\n".join([text, *(f"  not reproduced: {one_line(n)}" for n in done.not_reproduced)]))
    return 0


def cmd_k8s_serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ocibridge.k8s.serve import ServeDeployment, header, objects
    from ocibridge.mirror.yamlout import dump_all
    from ocibridge.serve.server import GRACE, parse_public_url
    from ocibridge.serve.sources import RegistrySource, parse_sources
    from ocibridge.stores.registry.pull_secret import (
        CREDENTIALS_WARNING,
        check_secret_name,
        loopback_warnings,
        pull_secret,
        read_ca_pem,
    )
    from ocibridge.version import __version__

    sources = parse_sources(args.sources)  # each located once, as serve will
    for source in sources:
        if not isinstance(source, RegistrySource):
            raise UsageError(f"{source.shown}: a path on this machine, which the pods cannot read; "
                             "push the models to a registry the cluster reaches and serve that")
    hosts = [s.host for s in sources if isinstance(s, RegistrySource)]
    if args.create_pull_secret and args.no_docker_config:
        raise UsageError("--create-pull-secret creates the docker config Secret that --no-docker-config leaves out")
    docker = None if args.no_docker_config else (
        args.docker_config_secret or (f"{args.name}-docker-config" if args.create_pull_secret else None))
    if docker:
        check_secret_name("--docker-config-secret", docker)
    d = ServeDeployment(
        sources=[s.shown for s in sources], hosts=hosts, image=args.image or f"ocibridge:{__version__}",
        name=args.name, namespace=args.namespace, replicas=args.replicas, port=args.port,
        cache_size=args.cache_size, storage_class=args.storage_class, cache_access_mode=args.cache_access_mode,
        token_secret=args.token_secret, default_tag=args.default_tag, plain_http=args.plain_http,
        public_url=parse_public_url(args.public_url),
        insecure=args.insecure, ca_pem=read_ca_pem(Path(args.ca_file), "--ca-file") if args.ca_file else None,
        docker_config_secret=docker, image_pull_secrets=args.image_pull_secret, cpu=args.cpu,
        memory=args.memory, grace=GRACE, service_type=args.service_type)
    docs = objects(d)
    if args.create_pull_secret:
        assert docker is not None
        docs.insert(0, pull_secret(docker, hosts, namespace=args.namespace))
    for line in loopback_warnings(hosts):
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2))
    else:
        print(printable(header(d) + dump_all(docs)), end="")
    if args.create_pull_secret:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    return 0


def cmd_k8s_prewarm(args: argparse.Namespace) -> int:
    from ocibridge.k8s.prewarm import Model, check_selector, prewarm_daemonset
    from ocibridge.kinds.locate import Role, locate
    from ocibridge.mirror.yamlout import dump_all
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.registry.pull_secret import CREDENTIALS_WARNING, loopback_warnings, pull_secret

    if args.create_pull_secret and not args.image_pull_secret:
        raise UsageError("--create-pull-secret needs --image-pull-secret NAME (the Secret it creates)")
    selector = check_selector(args.selector)
    models = []
    for ref in args.refs:
        located = locate(ref, Role.MODEL)
        if not isinstance(located, RegistryReference):
            raise UsageError(f"{ref} is not a registry reference: a node pulls from a registry "
                             "(push it to one first)")
        t = _k8s_target(args, located)
        models.append(Model(t.store, t.reference, located))
    done = prewarm_daemonset(models, runtime=args.runtime, platform=args.platform, mode=args.mode,
                             name=args.name, namespace=args.namespace, selector=selector, image=args.image,
                             pull_secrets=args.image_pull_secret)
    hosts = sorted({p.registry for p in done.pinned})
    docs = [done.daemonset]
    if args.create_pull_secret:
        docs.insert(0, pull_secret(args.image_pull_secret[0], hosts, namespace=args.namespace))
    for line in loopback_warnings(hosts):
        print(line, file=sys.stderr)
    if args.ca_file:  # the nodes pull, with their runtime's trust, not this machine's
        print("warning: --ca-file is this machine's trust; the nodes pull with their runtime's: put the CA in "
              f"/etc/containers/certs.d/{hosts[0]}/ca.crt (CRI-O) or containerd's hosts.toml on every node",
              file=sys.stderr)
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs},
                         indent=2, ensure_ascii=True))
    else:
        print(printable("\n".join(done.header()) + "\n" + dump_all(docs)), end="")
    if args.create_pull_secret:
        print(CREDENTIALS_WARNING, file=sys.stderr)
    return 0


def cmd_k8s_policy(args: argparse.Namespace) -> int:
    from ocibridge.k8s.admission import from_flags, from_policy
    from ocibridge.k8s.admission_docs import check_name, kyverno, policy_controller, policy_controller_notes
    from ocibridge.mirror.yamlout import dump_all
    from ocibridge.signing.containers_policy import read_policy_file

    name = check_name(args.name)
    if args.from_policy:
        if args.image or args.key or args.identity or args.issuer:
            raise UsageError("--from-policy takes the scopes and keys from the file: "
                             "leave out --image, --key, --identity and --issuer")
        t = from_policy(read_policy_file(args.from_policy))
    else:
        t = from_flags(args.image, args.key, args.identity, args.issuer)
    if not t.rules:
        raise UsageError(f"{args.from_policy}: no docker scope asks for a signature (sigstoreSigned): "
                         "nothing for an admission controller to check")
    docs: list[dict[str, Any]] = []
    notes = list(t.notes)
    if not args.policy_controller_only:
        docs.append(kyverno(t, name))
    if not args.kyverno_only:
        docs.extend(policy_controller(t, name))
        notes.extend(policy_controller_notes(t))
    if args.json:
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs, "notes": notes}, indent=2))
    else:
        head = ["# ocibridge k8s policy: admission checks matching the containers policy the nodes enforce",
                *(f"# note: {n}" for n in notes)]
        print(printable("\n".join(head) + "\n" + dump_all(docs)), end="")
    if t.untranslated:
        print(f"warning: {t.untranslated} part(s) of the policy are not translated (see the comments above "
              "the documents)", file=sys.stderr)
    return 0


def _runtime_arg(text: str) -> str:
    """``--runtime``: a runtime with an optional version, checked when the line is parsed."""
    from ocibridge.k8s.runtime import RuntimeVersion

    try:
        RuntimeVersion.parse(text)
    except OcibridgeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def register(command: CommandAdder) -> None:
    """The ``k8s`` group and its commands (each takes REF, ``--json`` and the registry flags)."""
    k8s = command("k8s", None, group=True)
    ksub = k8s.add_subparsers(dest="k8s_command", required=True, metavar="K8S_COMMAND")

    def kcommand(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        p = ksub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
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
    p = kcommand("modelcar", cmd_k8s_modelcar, "build a ModelCar-style image (files under /models) for containerd")
    p.add_argument("--tag", help="tag the image (or index) in the same store")
    p.add_argument("--index", action="store_true", help="one index serving the image and the ModelPack artifact")
    p.add_argument("--platform", action="append", default=[], help="platform os/arch (repeatable)")
    p.add_argument("--base", metavar="IMAGE", help="build on this runnable image (busybox, say: read from its "
                   "registry or layout) so KServe's ModelCar sidecar can start; its platform is the image's")
    p.add_argument("--kserve", metavar="NAME", help="print a KServe InferenceService serving the image (pinned)")
    p.add_argument("--model-format", default="huggingface", help="the InferenceService's modelFormat name")
    add_pull_secret_flags(p, pulls="the InferenceService's image", creates="the registry")
    add_verify_flags(p)
    p = kcommand("volume", cmd_k8s_volume, "print a Pod with the image volume pinned by digest")
    p.add_argument("--mount-path", default="/models")
    p.add_argument("--name", default="model-consumer", help="Pod name")
    p.add_argument("--image", default="busybox:1.36", help="container image of the Pod")
    p.add_argument("--snippet", action="store_true", help="only the volume and volumeMount")
    add_pull_secret_flags(p, pulls="the model", creates="the registry")
    p = kcommand("mount", cmd_k8s_mount, "lay out DIR as the runtime would present the mount")
    p.add_argument("dir", metavar="DIR")
    add_verify_flags(p)
    p = kcommand("prewarm", cmd_k8s_prewarm, "print a DaemonSet that makes every selected node pull the "
                 "models (pinned by digest) ahead of the workload")
    p.add_argument("--selector", action="append", default=[], metavar="KEY=VALUE",
                   help="only nodes with this label (nodeSelector; repeatable)")
    p.add_argument("--mode", choices=("volume", "modelcar"),
                   help="image volumes of a sleeping container (default where the runtime has them) or "
                        "ModelCar images as init containers (any cluster; REF must be an image)")
    p.add_argument("--name", default="model-prewarm", help="DaemonSet name")
    p.add_argument("--namespace", help="DaemonSet namespace")
    p.add_argument("--image", default="busybox:1.36", help="the image of the container that holds the models")
    add_pull_secret_flags(p, pulls="the models", creates="their registries")
    _register_serve(ksub)
    _register_policy(ksub)


def _register_policy(ksub: Any) -> None:
    help = ("print a Kyverno ClusterPolicy and policy-controller ClusterImagePolicies that check at admission "
            "the signatures the nodes' containers policy asks for")
    p = ksub.add_parser("policy", help=help, description=help)
    p.set_defaults(func=cmd_k8s_policy)
    p.add_argument("--from-policy", metavar="FILE", help="translate this containers policy.json's docker scopes")
    p.add_argument("--image", action="append", default=[], metavar="SCOPE",
                   help="a scope as policy.json writes it: host, host/namespace, host/repo[:tag], *.domain "
                        "(repeatable)")
    p.add_argument("--key", action="append", default=[], metavar="PUB",
                   help="a public key (PEM) whose signature is accepted (repeatable: any one)")
    p.add_argument("--identity", metavar="SUBJECT", help="keyless: the certificate's subject (an email, a URI)")
    p.add_argument("--issuer", metavar="URL", help="keyless: the OIDC issuer")
    p.add_argument("--name", default="models-signed", help="name of the documents (default models-signed)")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--kyverno-only", action="store_true", help="only the Kyverno ClusterPolicy")
    only.add_argument("--policy-controller-only", action="store_true",
                      help="only the policy-controller ClusterImagePolicies")
    p.add_argument("--json", action="store_true", help="print the documents as a JSON List (with notes)")


def _register_serve(ksub: Any) -> None:
    help = "print a Deployment, Service and cache volume running 'ocibridge serve' (the Hub's API over registries)"
    p = ksub.add_parser("serve", help=help, description=help)
    p.set_defaults(func=cmd_k8s_serve)
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="a registry prefix (host/path), as 'ocibridge serve' takes it; searched in order")
    p.add_argument("--json", action="store_true", help="print the documents as a JSON List")
    p.add_argument("--replicas", type=int, default=1, metavar="N", help="replicas behind the Service (default 1)")
    p.add_argument("--image", metavar="IMAGE",
                   help="image with ocibridge[serve] as its entrypoint (default ocibridge:VERSION; see Containerfile)")
    p.add_argument("--name", default="ocibridge-serve",
                   help="name of the Deployment and Service (default ocibridge-serve)")
    p.add_argument("--namespace", help="namespace of every document")
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
    p.add_argument("--default-tag", metavar="TAG", help="the tag the revision 'main' names (default latest)")
    p.add_argument("--public-url", metavar="URL",
                   help="the URL clients reach the Service at, when an Ingress ends TLS (serve --public-url)")
    p.add_argument("--cpu", default="500m", help="CPU request per replica (default 500m)")
    p.add_argument("--memory", default="1Gi", help="memory request and limit per replica (default 1Gi)")
    g = p.add_argument_group("registry access (in the pods)")
    g.add_argument("--plain-http", action="store_true", help="the registries speak HTTP")
    g.add_argument("--insecure", action="store_true", help="skip TLS certificate verification")
    g.add_argument("--ca-file", metavar="PEM", help="CA of the registries: read here, put in a ConfigMap mounted "
                   "where ocibridge looks for each registry's CA")
    g.add_argument("--docker-config-secret", metavar="SECRET",
                   help="a Secret of type kubernetes.io/dockerconfigjson with the registries' credentials, "
                        "mounted as $DOCKER_CONFIG (default with --create-pull-secret: NAME-docker-config)")
    g.add_argument("--no-docker-config", action="store_true", help="mount no docker config Secret")
    add_pull_secret_flags(g, pulls="IMAGE", creates="the sources' registries, mounted as $DOCKER_CONFIG")


