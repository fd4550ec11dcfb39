"""Which of ``ocibridge serve``'s flags ``k8s serve`` passes to the pods, to which of them, and
for every other one the ``k8s serve`` flag that stands for it or why it has none: a user who runs
serve with a flag finds here how to carry it to a cluster (tests/k8s/test_k8s_serve_flags.py
fails on a serve flag this module does not decide).

The flags passed as given go to every pod, to the pod that commits alone (one replica, else the
writer: uploads are staged and commits attested there) or to the pods users reach alone (one
replica, else the readers). Their values are checked as serve checks them at start before the
documents are written, by the command and the Python API alike (api/k8s_serve_values.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ocibridge.core.textlists import one_or_many
from ocibridge.errors import UsageError

#: serve's flags passed as given to every pod
EVERY_POD = ("--concurrency", "--part-size", "--parts", "--limit-rate", "--upload-part-size", "--send-timeout",
             "--compare-budget", "--xet-min-size", "--upstream-max-size", "--upstream-quota-namespace",
             "--upstream-asks-per-client", "--audit-log", "--no-access-log", "--no-metrics")
#: ... to the pod that commits: it stages the uploads and attests the commits (--sbom, --provenance)
COMMITTING = ("--staging-budget", "--staging-expiry", "--lfs-multipart-min", "--lfs-part-size", "--sbom-time",
              "--provenance-time")
#: ... to the pods users reach, behind an Ingress (the writer believes its readers: serve.py)
FACING = ("--trust-forwarded",)
#: those that take no value
SWITCHES = ("--no-access-log", "--no-metrics")
#: what a pod's ``--audit-log`` may be: the container's stdout, which the cluster keeps per pod
AUDIT_TO_STDOUT = "-"

#: serve's flags not passed as themselves: the ``k8s serve`` flag standing for each, or why none does
NOT_PASSED: dict[str, str] = {
    "--listen": "k8s serve --port: the container listens on :PORT, behind the Service",
    "--token-file": "k8s serve --token-secret: a Secret's key 'tokens', mounted and passed as --token-file",
    "--upstream-token-file": "k8s serve --upstream-token-secret: a Secret's key 'token', mounted and passed as "
                             "--upstream-token-file",
    "--authfile": "k8s serve --docker-config-secret (or --create-pull-secret): the registries' credentials, "
                  "mounted as $DOCKER_CONFIG",
    "--username": "k8s serve --docker-config-secret (or --create-pull-secret): a credential in the args would be "
                  "readable by whoever reads the Deployment",
    "--password": "k8s serve --docker-config-secret (or --create-pull-secret): a credential in the args would be "
                  "readable by whoever reads the Deployment",
    "--password-stdin": "k8s serve --docker-config-secret (or --create-pull-secret): a pod has no one to type it",
    "--ca-file": "k8s serve --ca-file: read here, carried in a ConfigMap mounted where ocibridge looks for each "
                 "registry's CA",
    "--writer": "k8s serve --replicas N: N readers run --writer, sending their writes to one writer Deployment",
    "--peer": "k8s serve --replicas N: one writer Deployment (Recreate) takes every write; serves taking writes "
              "in turn under a lease are not what a Deployment runs",
    "--cert": "TLS ends at the Ingress or load balancer in front of the Service (serve keeps its sendfile); "
              "k8s serve --public-url names the https URL clients use",
    "--key": "TLS ends at the Ingress or load balancer in front of the Service (serve keeps its sendfile); "
             "k8s serve --public-url names the https URL clients use",
    "--upstream-keep-dry-run": "a report, not a server: run 'ocibridge serve SOURCE --upstream-keep DURATION "
                               "--upstream-keep-dry-run' wherever the registry is reached",
    "--json": "serve's shapes --upstream-keep-dry-run's report only; k8s serve --json prints the documents as JSON",
    "--chunk-size": "the hidden former name of --upload-part-size, which k8s serve passes",
}


@dataclass(frozen=True)
class PodFlags:
    """serve's flags passed as given: to every pod, to the pod that commits, to the pods users reach."""

    every: tuple[str, ...] = ()
    committing: tuple[str, ...] = ()
    facing: tuple[str, ...] = ()

    def args(self) -> list[str]:
        return [*self.every, *self.committing, *self.facing]

    def writers(self) -> PodFlags:
        """What the writer of several replicas is given: it commits; users do not reach it."""
        return replace(self, facing=())

    def readers(self) -> PodFlags:
        """What the readers are given: they commit nothing (their writes go to the writer)."""
        return replace(self, committing=())


def pod_flags(flags: Sequence[str]) -> PodFlags | None:
    """serve's flags (``["--concurrency", "8", "--no-metrics"]``) sorted by the pods they go to;
    one error line for a flag not passed (the ``k8s serve`` flag standing for it) or without its
    value; None: none given."""
    found: dict[tuple[str, ...], list[str]] = {EVERY_POD: [], COMMITTING: [], FACING: []}
    words = list(one_or_many(flags))
    while words:
        flag = words.pop(0)
        flag, eq, value = flag.partition("=")
        group = next((g for g in found if flag in g), None)
        if group is None:
            why = NOT_PASSED.get(flag)
            raise UsageError(f"{flag}: not passed to the pods by k8s serve; {why}" if why
                             else f"{flag}: not one of serve's flags that k8s serve passes to the pods")
        if flag in SWITCHES:
            if eq:
                raise UsageError(f"{flag} takes no value")
            found[group].append(flag)
            continue
        if not eq:
            if not words:
                raise UsageError(f"{flag}: expected a value")
            value = words.pop(0)
        if flag == "--audit-log" and value != AUDIT_TO_STDOUT:
            raise UsageError(f"--audit-log {value}: in a pod, '-' (each write a JSON line on the container's "
                             "stdout, each pod's own log); a file would go with an emptyDir cache, and the "
                             "replicas would share one on a ReadWriteMany claim")
        found[group] += [flag, value]
    if not any(found.values()):
        return None
    return PodFlags(tuple(found[EVERY_POD]), tuple(found[COMMITTING]), tuple(found[FACING]))
