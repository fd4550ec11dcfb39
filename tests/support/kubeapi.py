"""`kubectl apply --dry-run=client` without a cluster: a discovery-only API server.

kubectl needs a server even for a client-side dry run: it maps each document's kind to a resource
through discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/apps/v1``, ``/apis/batch/v1``,
``/apis/networking.k8s.io/v1``) and GETs the live object to choose between create and patch. This
server answers exactly that (every object is 404, so each document is "created (dry run)") and
nothing else, and counts any write so a test can prove none was sent. Schema validation needs the
OpenAPI documents a real server serves, which Debian ships nowhere: ``--validate=false``, and the
field-by-field check is the Kubernetes Python client's models (tests assert their round trip gives back the same dict).
The kubeconfig is a file of its own (``KUBECONFIG``), so no user's config is read or touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KUBECTL = shutil.which("kubectl")

_CORE = [("pods", "Pod"), ("configmaps", "ConfigMap"), ("secrets", "Secret"), ("services", "Service"),
         ("persistentvolumeclaims", "PersistentVolumeClaim")]
_APPS = [("deployments", "Deployment"), ("daemonsets", "DaemonSet")]
_BATCH = [("jobs", "Job")]
_NETWORKING = [("networkpolicies", "NetworkPolicy")]
_KSERVE = [("inferenceservices", "InferenceService")]
_KYVERNO = [("clusterpolicies", "ClusterPolicy")]  # cluster-scoped, as their CRDs say
_SIGSTORE = [("clusterimagepolicies", "ClusterImagePolicy")]


def _resources(group_version: str, kinds: list[tuple[str, str]], namespaced: bool = True) -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": [
        {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]} for plural, kind in kinds]}


def _group(name: str, version: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


ROUTES: dict[str, dict[str, Any]] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1",
              "groups": [_group("apps", "v1"), _group("batch", "v1"), _group("networking.k8s.io", "v1"),
                         _group("serving.kserve.io", "v1beta1"),
                         _group("kyverno.io", "v1"), _group("policy.sigstore.dev", "v1beta1")]},
    "/api/v1": _resources("v1", _CORE),
    "/apis/apps/v1": _resources("apps/v1", _APPS),
    "/apis/batch/v1": _resources("batch/v1", _BATCH),
    "/apis/networking.k8s.io/v1": _resources("networking.k8s.io/v1", _NETWORKING),
    "/apis/serving.kserve.io/v1beta1": _resources("serving.kserve.io/v1beta1", _KSERVE),
    "/apis/kyverno.io/v1": _resources("kyverno.io/v1", _KYVERNO, namespaced=False),
    "/apis/policy.sigstore.dev/v1beta1": _resources("policy.sigstore.dev/v1beta1", _SIGSTORE, namespaced=False),
}


class _Handler(BaseHTTPRequestHandler):
    writes: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ROUTES:
            self._send(200, ROUTES[path])
        else:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404, "message": f"{path} not found"})

    def _write(self) -> None:
        self.writes.append(f"{self.command} {self.path}")
        self._send(405, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 405,
                         "message": "this test server takes no writes"})

    do_POST = do_PUT = do_PATCH = do_DELETE = _write


@contextmanager
def kube_api(tmp: Path) -> Iterator[tuple[dict[str, str], list[str]]]:
    """(environment for kubectl, list of writes received) while the server runs."""
    handler = type("Handler", (_Handler,), {"writes": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test", "namespace": "default"}}],
        "users": [{"name": "test", "user": {"token": "unused"}}]}))
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp)}  # HOME: kubectl's discovery cache
    try:
        yield env, handler.writes
    finally:
        server.shutdown()
        server.server_close()


def kubectl_dry_run(tmp: Path, text: str) -> str:
    """``kubectl apply --dry-run=client --validate=false -f -`` of ``text``; its stdout.
    Fails (AssertionError with kubectl's stderr) unless every document is accepted."""
    assert KUBECTL, "kubectl is missing: scripts/test installs it (Debian: kubernetes-client)"
    with kube_api(tmp) as (env, writes):
        done = subprocess.run([KUBECTL, "apply", "--dry-run=client", "--validate=false", "-f", "-"],
                              input=text, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not writes, writes
    return done.stdout


def checked_documents(tmp: Path, text: str, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The documents of ``text``, each checked by the Kubernetes client's model of its kind (its
    round trip gives the same dict back) and all by :func:`kubectl_dry_run`; ``kinds``: the only
    kinds the command may print."""
    import yaml
    from kubernetes.client import ApiClient

    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    client = ApiClient()
    for doc in docs:
        assert kinds is None or doc["kind"] in kinds, doc["kind"]
        model = client.deserialize(json.dumps(doc), f"V1{doc['kind']}", "application/json")
        assert client.sanitize_for_serialization(model) == doc
    out = kubectl_dry_run(tmp, text)
    assert out.count("created (dry run)") == len(docs), out
    return docs
