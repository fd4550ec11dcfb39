"""``k8s_mount_daemon``: ``ocibridge mount`` on every node of a cluster, as documents
(``k8s/mountdaemon.py``; docs/kubernetes.md, "Lazy mounts on the nodes")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ocibridge.api.k8s_types import KubernetesDocuments, PodRegistryAccess, PullSecrets


@dataclass(frozen=True)
class MountDaemonOptions:
    """The DaemonSet mounting the models and the Pod reading one (``image``: with
    ``ocibridge[mount]`` as its entrypoint, default ``ocibridge:VERSION``; ``host_path``: where
    the models appear on each node; ``cache_host_path``: the nodes' model cache)."""

    image: str | None = None
    name: str = "ocibridge-mounts"
    namespace: str | None = None
    host_path: str = "/var/lib/ocibridge/models"
    cache_host_path: str = "/var/cache/ocibridge"
    reader_image: str = "busybox:1.36"
    selector: tuple[str, ...] = ()  # KEY=VALUE node labels


def k8s_mount_daemon(refs: Sequence[str], options: MountDaemonOptions = MountDaemonOptions(), *,
                     access: PodRegistryAccess = PodRegistryAccess(),
                     pull_secrets: PullSecrets = PullSecrets()) -> KubernetesDocuments:
    """A DaemonSet that mounts each of ``refs`` (``REF`` or ``NAME=REF``) lazily on every node
    under ``options.host_path/NAME`` (a privileged container per model, /dev/fuse, Bidirectional
    propagation), and a Pod that reads the first through the node (HostToContainer). ``access``:
    how the containers reach the registries (a docker config Secret mounted as $DOCKER_CONFIG);
    ``pull_secrets.names`` pull the images."""
    from ocibridge.errors import UsageError
    from ocibridge.k8s.mountdaemon import MountDaemon, header, model_of, objects
    from ocibridge.k8s.prewarm import check_selector
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.places.locate import Role, locate
    from ocibridge.stores.registry.pull_secret import loopback_warnings
    from ocibridge.version import __version__

    if access.ca_file:
        raise UsageError("k8s mount-daemon takes no --ca-file: build it into the image, or use --insecure")
    if pull_secrets.create:
        raise UsageError("k8s mount-daemon: create the registries' Secret with 'k8s serve --create-pull-secret' "
                         "or kubectl, and name it with --docker-config-secret")
    models = [model_of(ref) for ref in refs]
    # a node mounts from a registry: a local name or a layout is refused here, not on the node
    located = [locate(model.ref, Role.REGISTRY) for model in models]
    hosts = [where.registry for where in located if isinstance(where, RegistryReference)]
    d = MountDaemon(models=models, image=options.image or f"ocibridge:{__version__}",
                    name=options.name, namespace=options.namespace, host_path=options.host_path,
                    cache_host_path=options.cache_host_path, plain_http=access.plain_http, insecure=access.insecure,
                    docker_config_secret=access.docker_config_secret, image_pull_secrets=pull_secrets.names,
                    reader_image=options.reader_image, selector=check_selector(options.selector))
    # a loopback name is the pod itself on a node, as for k8s volume and serve
    return KubernetesDocuments(tuple(objects(d)), header=header(d), warnings=tuple(loopback_warnings(hosts)))
