"""A fleet behind one mirror (issue 63 item 13): ``k8s prewarm`` carries the ``mirrors`` of
registries.toml to the nodes, as the runtime's own settings (a containers-registries.conf drop-in
for CRI-O, a ``hosts.toml`` for containerd) in a ConfigMap and the DaemonSet that installs them.

The CRI-O drop-in is read by skopeo, which reads registries.conf with the same library as CRI-O
(containers/image): three "nodes" (three empty destinations) pulling the model through Debian's
docker-registry as a pull-through cache (``proxy: remoteurl``) cost the origin one fetch per
blob. Every document passes the Kubernetes client's models and ``kubectl apply --dry-run=client``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from ocibridge.oci.models import parse_manifest_bytes
from tests.modelgen import make_model
from tests.support.kubeapi import checked_documents
from tests.support.registry import RegistryProcess

NODES = 3
#: the User-Agent of distribution's proxy (the cache) when it fetches from the origin
CACHE_AGENT = "Go-http-client/"
#: the nodes' (skopeo reads registries.conf with CRI-O's library, containers/image)
NODE_AGENT = "skopeo/"


def run(*args: str, conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OCIBRIDGE_REGISTRIES_CONF": str(conf)}, check=False)


#: where the origin's log stood when a test's fixture began (its own lines follow)
ORIGIN_START: dict[Path, int] = {}


def origin_log(origin: RegistryProcess) -> str:
    """The origin's log lines written since this test's fixture began."""
    with open(origin.log_file, "rb") as log:
        log.seek(ORIGIN_START.get(origin.log_file, 0))
        return log.read().decode(errors="replace")


@pytest.fixture
def behind_a_cache(registry, unique_repo, tmp_path_factory):
    """A model on the origin, a pull-through cache of it, and registries.toml naming the cache
    as the origin's mirror."""
    tmp = tmp_path_factory.mktemp("fleet")
    cache = RegistryProcess(tmp / "cache", proxy_remote=registry.url)
    ref = f"{registry.host}/{unique_repo}:v1"
    conf = tmp / "registries.toml"
    conf.write_text(f'[registry."{registry.host}"]\nmirrors = ["{cache.host}"]\n')
    # the origin is the session's registry: what other tests pulled from it (the same small files
    # by skopeo, containerd, podman) is in its log before this test's first line
    ORIGIN_START[registry.log_file] = registry.log_file.stat().st_size if registry.log_file.exists() else 0
    model = make_model(tmp / "m")
    # a file of its own: the nodes' stores (a private containerd other tests fill too) hold no blob of it
    (model / "nonce.txt").write_text(f"{unique_repo} {time.time_ns()}\n")
    pushed = run("push", str(model), ref, "-q", "--media-types", "cncf", conf=tmp / "none")
    assert pushed.returncode == 0, pushed.stderr
    try:
        yield registry, cache, ref, conf
    finally:
        cache.stop()


def test_prewarm_carries_the_mirror_to_cri_o_nodes_and_they_pull_through_it(behind_a_cache, tmp_path):
    origin, cache, ref, conf = behind_a_cache
    done = run("k8s", "prewarm", ref, "--runtime", "cri-o@1.33", conf=conf)
    assert done.returncode == 0, done.stderr
    configmap, installer, prewarm = checked_documents(tmp_path, done.stdout)
    assert (configmap["kind"], installer["kind"], prewarm["kind"]) == ("ConfigMap", "DaemonSet", "DaemonSet")
    assert f"Nodes pull {origin.host} through {cache.host} first" in done.stdout
    assert "kubectl rollout status ds/model-prewarm-mirrors" in done.stdout  # image volumes: wait first
    spec = installer["spec"]["template"]["spec"]
    assert {"path": "/etc/containers/registries.conf.d", "type": "DirectoryOrCreate"} in \
        [v.get("hostPath") for v in spec["volumes"]]
    [dropin] = configmap["data"].values()

    # three nodes, each with nothing yet, pull by digest with that drop-in as their registries.conf
    registries_conf = tmp_path / "registries.conf"
    registries_conf.write_text(dropin)
    digest = run("resolve", ref, conf=tmp_path / "none").stdout.split()[-1]
    pinned = f"{ref.rsplit(':', 1)[0]}@{digest}"
    fills = []
    for node in range(NODES):
        pulled = subprocess.run(["skopeo", "--registries-conf", str(registries_conf), "--insecure-policy", "copy",
                                 f"docker://{pinned}", f"oci:{tmp_path / f'node{node}'}"],
                                capture_output=True, text=True, timeout=120, check=False)
        assert pulled.returncode == 0, pulled.stderr
        if node == 0:  # the cache keeps a blob once its copy from the origin ends (after its answer)
            _until_kept(cache, _blobs(origin, digest))
        fills.append(_blob_gets(origin_log(origin), CACHE_AGENT))
    blobs = _blobs(origin, digest)
    # the origin: each blob fetched by the cache while the first node pulled, never again
    assert all(fills[0][b] >= 1 for b in blobs) and fills[-1] == fills[0], fills
    assert not _blob_gets(origin_log(origin), NODE_AGENT), "a node went to the origin"
    served = _blob_gets(cache.log_file.read_text(), NODE_AGENT)
    assert all(served[b] >= NODES for b in blobs), served  # the nodes: each blob from the cache

    # a Pod installs nothing on its node: k8s volume says where the mirror setting is
    pod = run("k8s", "volume", ref, "--runtime", "cri-o@1.33", conf=conf)
    assert pod.returncode == 0 and "k8s prewarm REF` prints the DaemonSet" in pod.stderr, pod.stderr
    # where Spegel or Dragonfly sets the nodes' mirrors, the prewarm alone
    alone = run("k8s", "prewarm", ref, "--runtime", "cri-o@1.33", "--no-node-mirrors", conf=conf)
    assert [d["kind"] for d in yaml.safe_load_all(alone.stdout) if d] == ["DaemonSet"], alone.stderr


def test_containerd_nodes_get_a_hosts_toml_and_a_modelcar_prewarm_waits_for_it(behind_a_cache, containerd,
                                                                              tmp_path):
    origin, cache, ref, conf = behind_a_cache
    assert run("k8s", "modelcar", ref, "--tag", "car", conf=tmp_path / "none").returncode == 0
    car = ref.rsplit(":", 1)[0] + ":car"
    done = run("k8s", "prewarm", car, "--runtime", "containerd@1.7", "--name", "llm", conf=conf)
    assert done.returncode == 0, done.stderr
    configmap, installer, prewarm = checked_documents(tmp_path, done.stdout)
    [(key, hosts)] = configmap["data"].items()
    assert hosts == (f'server = "http://{origin.host}"\n\n[host."http://{cache.host}"]\n'
                     '  capabilities = ["pull", "resolve"]\n')
    files = installer["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"]
    assert files == [{"key": key, "path": f"{origin.host}/hosts.toml"}]
    inits = [c["name"] for c in prewarm["spec"]["template"]["spec"]["initContainers"]]
    assert inits == ["tools", "mirrors", "model-0"]  # the model's pull waits for the node's hosts.toml
    assert "config_path" in done.stdout

    # containerd reads that hosts.toml (ctr's --hosts-dir is its certs.d): the image comes from the cache
    hosts_dir = tmp_path / "certs.d"
    (hosts_dir / origin.host).mkdir(parents=True)
    (hosts_dir / origin.host / "hosts.toml").write_text(hosts)
    containerd.ctr("images", "pull", "--hosts-dir", str(hosts_dir), "--platform", "linux/amd64", car)
    assert not _blob_gets(origin_log(origin), "containerd/"), "the node went to the origin"
    assert _blob_gets(cache.log_file.read_text(), "containerd/"), "the node did not pull from the cache"


def test_k8s_serve_pods_read_through_the_mirror(behind_a_cache, tmp_path):
    """``k8s serve`` runs ocibridge in the pods: they get the sources' mirrors as a registries.toml
    (a ConfigMap, ``$OCIBRIDGE_REGISTRIES_CONF``), and that file sends ocibridge's reads to the cache."""
    origin, cache, ref, conf = behind_a_cache
    done = run("k8s", "serve", ref.rsplit("/", 1)[0], conf=conf)
    assert done.returncode == 0, done.stderr
    docs = checked_documents(tmp_path, done.stdout)
    [settings] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-registries")]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "OCIBRIDGE_REGISTRIES_CONF", "value": "/etc/ocibridge/registries.toml"} in container["env"]
    in_pod = tmp_path / "registries.toml"
    in_pod.write_text(settings["data"]["registries.toml"])
    before = _blob_gets(cache.log_file.read_text(), "ocibridge/")
    pulled = run("pull", ref, str(tmp_path / "out"), "-q", conf=in_pod)
    assert pulled.returncode == 0, pulled.stderr
    assert _blob_gets(cache.log_file.read_text(), "ocibridge/") != before  # read from the cache


def test_a_mirror_that_is_no_host_is_refused(registry, unique_repo, tmp_path):
    conf = tmp_path / "registries.toml"
    conf.write_text(f'[registry."{registry.host}"]\nmirrors = ["evil\\"]\\n[x]"]\n')
    ref = f"{registry.host}/{unique_repo}:v1"
    assert run("push", str(make_model(tmp_path / "m")), ref, "-q", "--media-types", "cncf",
               conf=tmp_path / "none").returncode == 0
    done = run("k8s", "prewarm", ref, conf=conf)
    assert done.returncode != 0 and done.stdout == "", done
    [line] = done.stderr.splitlines()
    assert "mirrors must be a list of host[:port][/namespace]" in line, line


def _blobs(origin, digest: str) -> list[str]:
    """The config's and layers' digests of the manifest ``digest`` names on the origin."""
    found = re.findall(rf"/v2/([^\s\"]+)/manifests/{digest}", origin_log(origin))
    assert found, "the origin never served the manifest"
    import urllib.request

    request = urllib.request.Request(f"{origin.url}/v2/{found[0]}/manifests/{digest}",
                                     headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        manifest = parse_manifest_bytes(answer.read())
    return [manifest.config.digest, *(layer.digest for layer in manifest.layers)]


def _until_kept(cache: RegistryProcess, blobs: list[str], seconds: float = 20) -> None:
    """Until the cache's storage holds each blob (distribution's proxy stores a blob after it
    answered with it; a request for it before then is fetched from the origin again)."""
    root = cache.storage / "docker" / "registry" / "v2" / "blobs" / "sha256"
    deadline = time.monotonic() + seconds
    while not all((root / b[7:9] / b[7:] / "data").is_file() for b in blobs):
        assert time.monotonic() < deadline, "the cache never kept the blobs"
        time.sleep(0.05)


def _blob_gets(log: str, agent: str) -> Counter[str]:
    """GETs of each blob a registry's log records as answered, from a client whose User-Agent
    starts with ``agent``."""
    return Counter(m[0] for m in re.findall(
        r'http\.request\.method=GET http\.request\.remoteaddr=\S+ '
        r'http\.request\.uri="?/v2/[^\s"]+/blobs/(sha256:[0-9a-f]{64})[^\s"]*"? '
        r'http\.request\.useragent="?([^"\s]*)', log)
        if m[1].startswith(agent))
