"""``ocibridge k8s serve``: a Deployment, Service and cache volume running ``ocibridge serve``.
The documents pass the Kubernetes client's models and ``kubectl apply --dry-run=client``
(test_k8s_apply.py's check); the cache volume is what the replicas can share; and the
container's command line, environment and mounts, laid out on this machine, make a server
whose probes answer and which serves a model from the registry."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ocibridge.cli import main
from tests.k8s.test_k8s_apply import _login, _pem, own_credentials  # noqa: F401 - a fixture used by name
from tests.modelgen import make_bert_model
from tests.serve.test_serve_cli import free_port
from tests.support.kubeapi import checked_documents

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"Secret", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "NetworkPolicy"}


def checked(tmp_path: Path, text: str) -> dict[str, dict]:
    """The documents of ``text`` by kind, each checked by the client's model and all by kubectl."""
    docs = checked_list(tmp_path, text)
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs)
    return by_kind


def checked_list(tmp_path: Path, text: str) -> list[dict]:
    return checked_documents(tmp_path, text, KINDS)


def doc_block_run(doc_env, page: str, needle: str) -> Path:
    """Run ``page``'s one block naming ``needle`` as printed; its work folder."""
    from tests.docrun import run_block, runnable_blocks

    work, env = doc_env(page)
    [(lang, code, line)] = [b for b in runnable_blocks(page) if needle in b[1]]
    proc = run_block(lang, code, work, env)
    assert proc.returncode == 0, f"docs/{page}:{line}\n{proc.stdout}\n{proc.stderr}"
    return work


def doc_block_documents(doc_env, page: str, needle: str, output: str) -> tuple[Path, list[dict]]:
    """:func:`doc_block_run`, and the documents the block wrote into ``output``."""
    work = doc_block_run(doc_env, page, needle)
    return work, [d for d in yaml.safe_load_all((work / output).read_text()) if d]


def doc_block_configmap(doc_env, needle: str, output: str) -> tuple[Path, dict[str, str]]:
    """Run serve-kubernetes.md's block naming ``needle`` as printed; its work folder and the data
    of the one ConfigMap the block wrote into ``output``."""
    work, docs = doc_block_documents(doc_env, "serve-kubernetes.md", needle, output)
    [config] = [d for d in docs if d["kind"] == "ConfigMap"]
    return work, config["data"]


def _pod(docs: dict[str, dict]) -> dict:
    return docs["Deployment"]["spec"]["template"]["spec"]


def test_one_replica_keeps_its_cache_on_a_claim(tmp_path, capsys, registry):
    assert main(["k8s", "serve", f"{registry.host}/models", "--image", "reg.example/ocibridge:1"]) == 0
    out, err = capsys.readouterr()
    docs = checked(tmp_path, out)
    assert list(docs) == ["PersistentVolumeClaim", "Deployment", "Service"]
    claim = docs["PersistentVolumeClaim"]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}}
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    pod = _pod(docs)
    [c] = pod["containers"]
    assert c["image"] == "reg.example/ocibridge:1"
    assert c["args"] == ["serve", f"{registry.host}/models", "--listen", ":8080"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert pod["terminationGracePeriodSeconds"] > 30  # serve's own grace after SIGTERM fits in it
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cache"]["persistentVolumeClaim"] == {"claimName": claim["metadata"]["name"]}
    cache_env = {e["name"]: e["value"] for e in c["env"]}["OCIBRIDGE_CACHE"]
    assert {"name": "cache", "mountPath": cache_env} in c["volumeMounts"]
    assert pod["securityContext"]["fsGroup"] == 10001  # the Containerfile's user writes the claim
    service = docs["Service"]["spec"]
    assert service["selector"] == deployment["selector"]["matchLabels"]
    assert service["ports"][0]["targetPort"] == "http" and service["ports"][0]["port"] == 8080
    assert "HF_ENDPOINT=http://ocibridge-serve.NAMESPACE.svc:8080" in out
    assert "loopback name" in err  # the test registry is 127.0.0.1:PORT


def by_name(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_replicas_are_readers_sending_their_writes_to_one_writer(tmp_path, capsys):
    """--replicas 3: three readers (serve --writer) behind the Service users reach, one writer
    (Recreate, its cache on a ReadWriteOnce claim) behind its own Service, which a
    NetworkPolicy opens to the readers only; --validate passes."""
    src = "registry.internal:5000/models"
    assert main(["k8s", "serve", src, "--replicas", "3", "--token-secret", "serve-tokens", "--validate"]) == 0
    out = capsys.readouterr()
    assert "valid for Kubernetes" in out.err
    docs = by_name(checked_list(tmp_path, out.out))
    assert set(docs) == {("PersistentVolumeClaim", "ocibridge-serve-writer-cache"),
                         ("Deployment", "ocibridge-serve-writer"), ("Service", "ocibridge-serve-writer"),
                         ("NetworkPolicy", "ocibridge-serve-writer"),
                         ("Deployment", "ocibridge-serve"), ("Service", "ocibridge-serve")}
    writer, readers = docs["Deployment", "ocibridge-serve-writer"], docs["Deployment", "ocibridge-serve"]
    assert writer["spec"]["replicas"] == 1 and writer["spec"]["strategy"] == {"type": "Recreate"}
    assert docs["PersistentVolumeClaim", "ocibridge-serve-writer-cache"]["spec"]["accessModes"] == ["ReadWriteOnce"]
    [wc] = writer["spec"]["template"]["spec"]["containers"]
    assert {"name": "cache", "persistentVolumeClaim": {"claimName": "ocibridge-serve-writer-cache"}} in \
        writer["spec"]["template"]["spec"]["volumes"]
    assert "--writer" not in wc["args"] and "--token-file" in wc["args"]
    assert wc["args"][wc["args"].index("--trust-forwarded") + 1] == "0.0.0.0/0"
    assert readers["spec"]["replicas"] == 3
    [rc] = readers["spec"]["template"]["spec"]["containers"]
    writer_service = docs["Service", "ocibridge-serve-writer"]
    assert rc["args"][rc["args"].index("--writer") + 1] == f"http://ocibridge-serve-writer:{writer_service['spec']['ports'][0]['port']}"
    assert "--trust-forwarded" not in rc["args"] and "--token-file" in rc["args"]
    # users reach the readers; only the readers reach the writer
    assert docs["Service", "ocibridge-serve"]["spec"]["selector"] == readers["spec"]["selector"]["matchLabels"]
    assert writer_service["spec"]["selector"] == writer["spec"]["selector"]["matchLabels"]
    assert writer_service["spec"]["selector"] != readers["spec"]["selector"]["matchLabels"]
    policy = docs["NetworkPolicy", "ocibridge-serve-writer"]["spec"]
    assert policy["podSelector"]["matchLabels"] == writer["spec"]["selector"]["matchLabels"]
    readers_only = {"podSelector": {"matchLabels": readers["spec"]["selector"]["matchLabels"]}}
    assert policy["ingress"] == [{"from": [readers_only], "ports": [{"port": "http", "protocol": "TCP"}]}]
    assert "one writer (ocibridge-serve-writer" in out.out


def test_readers_share_a_read_write_many_claim_or_have_a_cache_each(tmp_path, capsys):
    src = "registry.internal:5000/models"
    assert main(["k8s", "serve", src, "--replicas", "3", "--cache-access-mode", "ReadWriteMany",
                 "--storage-class", "cephfs", "--cache-size", "200Gi", "--namespace", "ml"]) == 0
    docs = by_name(checked_list(tmp_path / "a", capsys.readouterr().out))
    assert docs["PersistentVolumeClaim", "ocibridge-serve-cache"]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert docs["PersistentVolumeClaim", "ocibridge-serve-cache"]["spec"]["storageClassName"] == "cephfs"
    assert docs["PersistentVolumeClaim", "ocibridge-serve-writer-cache"]["spec"]["storageClassName"] == "cephfs"
    assert docs["Deployment", "ocibridge-serve"]["spec"]["replicas"] == 3
    assert docs["Deployment", "ocibridge-serve"]["spec"]["strategy"]["type"] == "RollingUpdate"
    assert {d["metadata"]["namespace"] for d in docs.values()} == {"ml"}

    assert main(["k8s", "serve", src, "--replicas", "3", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    readers = [i for i in listed["items"] if i["metadata"]["name"] == "ocibridge-serve"]
    assert [i["kind"] for i in readers] == ["Deployment", "Service"]  # no claim: an emptyDir each
    pod = readers[0]["spec"]["template"]["spec"]
    [cache] = [v for v in pod["volumes"] if v["name"] == "cache"]
    assert cache == {"name": "cache", "emptyDir": {"sizeLimit": "50Gi"}}
    assert pod["containers"][0]["resources"]["requests"]["ephemeral-storage"] == "50Gi"


@pytest.mark.usefixtures("own_credentials")
def test_credentials_ca_and_tokens_reach_the_pod(tmp_path, capsys, monkeypatch, auth_registry):
    _login(monkeypatch, auth_registry)
    ca = _pem(tmp_path)
    capsys.readouterr()
    assert main(["k8s", "serve", f"{auth_registry.host}/llm", "registry.internal:5000", "--ca-file", str(ca),
                 "--token-secret", "hf-tokens", "--image-pull-secret", "tools", "--create-pull-secret",
                 "--default-tag", "stable"]) == 1
    assert "no stored credentials for registry.internal:5000" in capsys.readouterr().err
    assert main(["k8s", "serve", f"{auth_registry.host}/llm", "--ca-file", str(ca), "--token-secret", "hf-tokens",
                 "--image-pull-secret", "tools", "--create-pull-secret", "--default-tag", "stable"]) == 0
    out, err = capsys.readouterr()
    docs = checked(tmp_path, out)
    assert list(docs) == ["Secret", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service"]
    assert str(tmp_path) not in out  # no path of this machine goes to the cluster
    auths = json.loads(base64.b64decode(docs["Secret"]["data"][".dockerconfigjson"]))["auths"]
    assert list(auths) == [auth_registry.host] and "holds registry credentials" in err
    assert docs["ConfigMap"]["data"] == {"ca-0.crt": ca.read_text()}
    pod = _pod(docs)
    assert pod["imagePullSecrets"] == [{"name": "tools"}]
    volumes = {v["name"]: v for v in pod["volumes"]}
    [c] = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    env = {e["name"]: e["value"] for e in c["env"]}
    assert volumes["docker-config"]["secret"]["secretName"] == docs["Secret"]["metadata"]["name"]
    assert env["DOCKER_CONFIG"] == mounts["docker-config"]
    assert volumes["registry-ca"]["configMap"]["items"] == [{"key": "ca-0.crt", "path": f"{auth_registry.host}/ca.crt"}]
    assert mounts["registry-ca"] == "/etc/containers/certs.d"
    assert volumes["tokens"]["secret"]["secretName"] == "hf-tokens"
    assert c["args"][c["args"].index("--token-file") + 1].startswith(mounts["tokens"] + "/")
    assert c["args"][c["args"].index("--default-tag") + 1] == "stable"


def test_an_upstream_proxy_takes_its_flags_and_its_token_from_a_secret(tmp_path, capsys):
    assert main(["k8s", "serve", "registry.internal:5000/proxied", "--upstream", "https://huggingface.co",
                 "--upstream-token-secret", "hub-token", "--upstream-fresh", "60", "--upstream-deny", "secret/*",
                 "--upstream-license", "apache-2.0", "--upstream-license", "mit",
                 "--upstream-refuse-files", "*.onnx", "--replicas", "2", "--no-docker-config"]) == 0
    docs = checked_list(tmp_path, capsys.readouterr().out)
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    assert len(pods) == 2  # the writer and the readers: each asks the upstream on a miss
    for pod in pods:
        [c] = pod["containers"]
        args = c["args"]
        at = args.index("--upstream")
        assert args[at:at + 2] == ["--upstream", "https://huggingface.co"]
        pairs = list(zip(args[:-1], args[1:], strict=True))
        assert {("--upstream-fresh", "60"), ("--upstream-deny", "secret/*"), ("--upstream-license", "apache-2.0"),
                ("--upstream-license", "mit"), ("--upstream-refuse-files", "*.onnx")} <= set(pairs)
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert volumes["upstream-token"]["secret"] == {"secretName": "hub-token",
                                                       "items": [{"key": "token", "path": "token"}]}
        assert args[args.index("--upstream-token-file") + 1] == mounts["upstream-token"] + "/token"
        assert "--upstream-allow-pickle" not in args


def test_an_upstream_proxy_keeps_gated_and_private_repositories_it_is_allowed(tmp_path, capsys):
    assert main(["k8s", "serve", "registry.internal:5000/proxied", "--upstream", "https://huggingface.co",
                 "--token-secret", "hf-tokens", "--upstream-allow-gated", "meta-llama/*",
                 "--upstream-allow-gated", "google/gemma-*", "--upstream-allow-private", "acme/*",
                 "--no-docker-config"]) == 0
    [pod] = [d["spec"]["template"]["spec"] for d in checked_list(tmp_path, capsys.readouterr().out)
             if d["kind"] == "Deployment"]
    args = pod["containers"][0]["args"]
    pairs = set(zip(args[:-1], args[1:], strict=True))
    assert {("--upstream-allow-gated", "meta-llama/*"), ("--upstream-allow-gated", "google/gemma-*"),
            ("--upstream-allow-private", "acme/*")} <= pairs


def test_refusals(tmp_path, capsys):
    src = "registry.internal:5000/models"
    for args, words in (
        ([f"oci:{tmp_path}/lay"], "a path on this machine"),
        (["local"], "a path on this machine"),
        ([src, "--replicas", "2", "--cache-access-mode", "ReadWriteOnce"], "attaches to one node"),
        ([src, "--replicas", "2", "--name", "n" * 41], "the writer's names add -writer"),
        ([src, "--replicas", "0"], "--replicas"),
        ([src, "--name", "Serve_1"], "--name 'Serve_1'"),
        ([src, "--cache-size", "lots"], "--cache-size 'lots'"),
        ([src, "--token-secret", "Bad_Name"], "--token-secret 'Bad_Name'"),
        ([src, "--create-pull-secret", "--no-docker-config"], "--no-docker-config"),
        ([f"{src}:v1"], "registry prefix"),
        ([src, "--upstream-deny", "a/*"], "go with --upstream URL"),
        ([src, "--upstream", "ftp://hub"], "--upstream 'ftp://hub'"),
        ([src, "--upstream", "https://hub", "--upstream-token-secret", "Bad_Name"], "--upstream-token-secret"),
        ([src, "--upstream", "https://hub", "--upstream-fresh", "-1"], "--upstream-fresh"),
        ([src, "--upstream-allow-gated", "a/*"], "go with --upstream URL"),
        ([src, "--upstream", "https://hub", "--upstream-allow-private", "a/*"], "go with --token-secret"),
    ):
        assert main(["k8s", "serve", *args]) == 2, args
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, (args, err)


def test_the_container_runs_as_emitted(tmp_path, capsys, registry, unique_repo):
    """The Deployment's args, env and mounts, laid out here, are an ``ocibridge serve`` whose
    probes answer and which serves the model (mount paths mapped to directories of the test)."""
    prefix = f"{registry.host}/{unique_repo}"
    src = make_bert_model(tmp_path / "tiny")
    assert main(["push", str(src), f"{prefix}/acme/tiny:stable", "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "serve", prefix, "--token-secret", "hf-tokens", "--default-tag", "stable",
                 "--public-url", "https://hub.example/models", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    [c] = [i for i in items if i["kind"] == "Deployment"][0]["spec"]["template"]["spec"]["containers"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    here = {path: str(tmp_path / "pod" / name) for name, path in mounts.items()}
    (tmp_path / "pod" / "tokens").mkdir(parents=True)
    (tmp_path / "pod" / "tokens" / "tokens").write_text("t0ken\n")
    port = free_port()

    def local(text: str) -> str:
        """A value with the mount it starts with mapped to its directory here; the listen address."""
        for path, directory in here.items():
            if text == path or text.startswith(path + "/"):
                return directory + text[len(path):]
        return f"127.0.0.1:{port}" if text == ":8080" else text

    env = {**os.environ, "PYTHONPATH": str(ROOT), **{e["name"]: local(e["value"]) for e in c["env"]}}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", *map(local, c["args"])], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()[1].decode()
            try:
                if httpx.get(url + c["livenessProbe"]["httpGet"]["path"]).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        assert httpx.get(url + c["readinessProbe"]["httpGet"]["path"]).status_code == 200
        auth = {"Authorization": "Bearer t0ken"}
        body = httpx.get(f"{url}/acme/tiny/resolve/main/model.safetensors", headers=auth).content
        assert body == (src / "model.safetensors").read_bytes()
        grant = httpx.get(f"{url}/api/models/acme/tiny/xet-read-token/main", headers=auth)  # Xet URLs: the Ingress's
        assert grant.headers["x-xet-cas-url"].startswith("https://hub.example/models/xet/")
        assert any((tmp_path / "pod" / "cache" / "models" / "blobs" / "sha256").iterdir())  # the cache is the volume
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


@pytest.mark.parametrize("path", ["Containerfile"])
def test_the_image_has_serve(path):
    text = (ROOT / path).read_text()
    assert re.search(r"/src\[[a-z,]*serve[a-z,]*\]", text) and 'ENTRYPOINT ["ocibridge"]' in text
