"""``ocibridge k8s serve`` as a Python call: a Deployment of ``ocibridge serve`` over registry
prefixes, its Service, cache volume and the Secrets and ConfigMaps its pods read (re-exported by
:mod:`ocibridge.api.k8s`, with the other ``k8s`` calls). Each flag the pods get is checked here
as serve checks it at start (:mod:`ocibridge.api.k8s_serve_values`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.api.k8s_types import (
    K8sServeOptions,
    KubernetesDocuments,
    PodRegistryAccess,
    PullSecrets,
    documents_with_secret,
)
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.k8s.serve import ServeUpstream

__all__ = ["k8s_serve"]


def _serve_upstream(options: K8sServeOptions) -> ServeUpstream | None:
    """serve's ``--upstream`` flags for the pods, checked as serve checks them; None without ``upstream``."""
    from ocibridge.hubserver.server import parse_public_url
    from ocibridge.k8s.serve import ServeUpstream
    from ocibridge.k8s.sharedbudget import ACCEPT_FLAG

    others = [flag for flag, given in (("--upstream-token-secret", options.upstream_token_secret),
                                       (ACCEPT_FLAG, options.anonymous_shared_budget)) if given]
    if not options.upstream_wanted(options.upstream, tokens=bool(options.token_secret), token_flag="--token-secret",
                                   others_given=others, fresh=options.upstream_fresh):
        return None
    url = parse_public_url(options.upstream, "--upstream")
    assert url is not None
    return ServeUpstream(url, options.upstream_token_secret, options.upstream_fresh, options.upstream_policy_flags(),
                         options.anonymous_shared_budget)


def k8s_serve(
    sources: Sequence[str],
    options: K8sServeOptions = K8sServeOptions(),
    *,
    access: PodRegistryAccess = PodRegistryAccess(),
    pull_secrets: PullSecrets = PullSecrets(),
) -> KubernetesDocuments:
    """A Deployment of ``ocibridge serve`` over ``sources`` (registry prefixes, in order), its Service and
    cache volume, and what the pods reach the registries (``access``) and pull the image (``pull_secrets``) with."""
    from ocibridge.api.k8s_serve_values import checked_pod_flags
    from ocibridge.hubserver.quotas.quotafile import quotas_text
    from ocibridge.hubserver.repo.sources import RegistrySource, parse_sources
    from ocibridge.hubserver.server import GRACE, parse_public_url
    from ocibridge.k8s.node_mirrors import mirrors_of, settings_toml
    from ocibridge.k8s.serve import ServeDeployment, header, objects
    from ocibridge.k8s.servescan import pod_scan
    from ocibridge.k8s.servesign import pod_evidence
    from ocibridge.k8s.serveverify import pod_verification
    from ocibridge.stores.registry.pull_secret import check_secret_name, loopback_warnings, pull_secret, read_ca_pem
    from ocibridge.version import __version__

    flags = checked_pod_flags(options)  # each value read as serve reads it at start
    located = parse_sources(sources)  # each located once, as serve will
    for source in located:
        if not isinstance(source, RegistrySource):
            raise UsageError(f"{source.shown}: a path on this machine, which the pods cannot read; "
                             "push the models to a registry the cluster reaches and serve that")
    hosts = [s.host for s in located if isinstance(s, RegistrySource)]
    if pull_secrets.create and not access.docker_config:
        raise UsageError("--create-pull-secret creates the docker config Secret that --no-docker-config leaves out")
    docker = None if not access.docker_config else (
        access.docker_config_secret or (f"{options.name}-docker-config" if pull_secrets.create else None))
    if docker:
        check_secret_name("--docker-config-secret", docker)
    d = ServeDeployment(
        sources=[s.shown for s in located], hosts=hosts, image=options.image or f"ocibridge:{__version__}",
        name=options.name, namespace=options.namespace, replicas=options.replicas, port=options.port,
        cache_size=options.cache_size, storage_class=options.storage_class,
        cache_access_mode=options.cache_access_mode, token_secret=options.token_secret,
        default_tag=options.default_tag, plain_http=access.plain_http, public_url=parse_public_url(options.public_url),
        insecure=access.insecure, ca_pem=read_ca_pem(Path(access.ca_file), "--ca-file") if access.ca_file else None,
        docker_config_secret=docker, image_pull_secrets=pull_secrets.names, cpu=options.cpu,
        memory=options.memory, grace=GRACE, service_type=options.service_type,
        settings=settings_toml(found) if (found := mirrors_of(hosts)) else None, upstream=_serve_upstream(options),
        quotas=quotas_text(options.quotas) if options.quotas is not None else None,
        evidence=(evidence := pod_evidence(options.name, **options.evidence_flags())),
        scan=pod_scan(options.scan, options.scan_verify_keys, signs=bool(evidence and evidence.own())),
        flags=flags, verification=(checks := pod_verification(*options.checks())))
    secret = pull_secret(docker, hosts, namespace=options.namespace) if pull_secrets.create and docker else None
    return documents_with_secret(secret, objects(d), header=header(d), holding=evidence.warnings() if evidence else [],
                      warnings=loopback_warnings(hosts) + d.warnings() + (checks.warnings() if checks else []))
