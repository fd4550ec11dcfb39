"""The warning of a ``k8s serve --upstream`` without ``--token-secret``. serve tells anonymous
clients apart by the address a request comes from (it believes no ``X-Forwarded-For``, which
anyone could write), so the clients that reach it from one address share one
``--upstream-asks-per-client`` budget. Which address that is depends on how the Service is
reached, and the warning names the one the chosen exposure gives; ``--upstream-anonymous-shared-budget``
says the user accepts it, and silences it."""

from __future__ import annotations

from ocibridge.errors import UsageError

ACCEPT_FLAG = "--upstream-anonymous-shared-budget"

#: where anonymous clients arrive from, by the Service's type (kube-proxy rewrites the source of
#: traffic from outside the cluster under the Service's default externalTrafficPolicy, Cluster)
_ARRIVAL = {
    "ClusterIP": "the ClusterIP Service is reached from inside the cluster, each pod from its own address, but "
                 "through an Ingress or a proxy put in front of it every client arrives from that one's address",
    "NodePort": "through the NodePort Service every client from outside the cluster arrives from the address of "
                "the node it came in by (kube-proxy rewrites it under externalTrafficPolicy Cluster)",
    "LoadBalancer": "through the LoadBalancer Service every client arrives from the address of the node the load "
                    "balancer sent it to (kube-proxy rewrites it under externalTrafficPolicy Cluster), or from "
                    "the load balancer's own when it proxies",
}
_INGRESS = ("behind the Ingress that ends TLS for --public-url every client arrives from the Ingress "
            "controller's address")


def shared_budget_warning(service_type: str, public_url: str | None) -> str:
    """The warning, saying where anonymous clients arrive from for this exposure."""
    where = _ARRIVAL.get(service_type, _ARRIVAL["ClusterIP"])
    if public_url and service_type == "ClusterIP":
        where = _INGRESS
    return (f"warning: --upstream without --token-secret: serve tells anonymous clients apart by their address, and "
            f"{where}: the clients arriving from one address share one --upstream-asks-per-client budget (and "
            "--upstream-max-fetches-per-client); give each client a token (--token-secret) to give each its own, "
            f"or pass {ACCEPT_FLAG} to accept it")


def check_accepted(accepted: bool, tokens: bool) -> None:
    """The acceptance goes with what it accepts: with tokens no client is anonymous."""
    if accepted and tokens:
        raise UsageError(f"{ACCEPT_FLAG} goes with --upstream without --token-secret: with tokens no client is "
                         "anonymous, so there is no shared budget to accept")
