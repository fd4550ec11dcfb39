"""Kubernetes output that applies as is: every document `k8s volume` and `mirror --emit k8s-job`
print passes the Kubernetes Python client's models (round trip to the same dict: no misspelt
field) and `kubectl apply --dry-run=client` (against tests/support/kubeapi.py, a discovery-only
API server: kubectl needs one even for a client-side dry run). A registry that needs credentials
gets imagePullSecrets and, on request, the Secret itself built from the stored login; a
registry with its own CA gets the CA as a ConfigMap mounted where ocibridge's certs.d lookup
reads it, and no path of this machine reaches the cluster."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml

from ocibridge.cli import main
from ocibridge.stores.registry.pull_secret import is_loopback
from tests.modelgen import make_model
from tests.support.kubeapi import checked_documents

KINDS = {"Pod", "Secret", "ConfigMap", "Job"}


def k8s_checked(tmp_path: Path, text: str) -> list[dict]:
    return checked_documents(tmp_path, text, KINDS)


@pytest.fixture
def own_credentials(tmp_path, monkeypatch):
    """A docker config and containers auth files of this test only."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


def _login(monkeypatch, reg) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(reg.password + "\n"))
    assert main(["login", reg.host, "-u", reg.username, "--password-stdin"]) == 0


def test_volume_with_pull_secret_applies_and_carries_the_login(tmp_path, capsys, monkeypatch, own_credentials,
                                                               auth_registry, unique_repo):
    _login(monkeypatch, auth_registry)
    ref = f"{auth_registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    assert main(["k8s", "modelcar", ref, "--tag", "car"]) == 0
    car = f"{auth_registry.host}/{unique_repo}:car"
    capsys.readouterr()

    assert main(["k8s", "volume", car, "--runtime", "containerd@2.1"]) == 0
    out, err = capsys.readouterr()
    [pod] = k8s_checked(tmp_path / "a", out)
    assert "imagePullSecrets" not in pod["spec"] and "add --image-pull-secret NAME" in out
    assert "files are under /models/models, not /models: containerd@2.1 has no image-volume subPath" in out
    assert "GA and on by default from 1.36" in out and "1.35" not in out
    assert "loopback name" in err  # the test registry is 127.0.0.1:PORT

    assert main(["k8s", "volume", car, "--runtime", "containerd", "--image-pull-secret", "regcred",
                 "--create-pull-secret"]) == 0
    out, err = capsys.readouterr()
    secret, pod = k8s_checked(tmp_path / "b", out)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert "directly under /models (subPath models)" in out
    assert secret["type"] == "kubernetes.io/dockerconfigjson" and secret["metadata"]["name"] == "regcred"
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    entry = config["auths"][auth_registry.host]
    assert base64.b64decode(entry["auth"]).decode() == f"{auth_registry.username}:{auth_registry.password}"
    assert "holds registry credentials" in err

    assert main(["k8s", "volume", car, "--image-pull-secret", "regcred", "--create-pull-secret", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [i["kind"] for i in listed["items"]] == ["Secret", "Pod"]
    assert main(["k8s", "volume", car, "--runtime", "containerd", "--snippet", "--image-pull-secret", "a",
                 "--image-pull-secret", "b"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["imagePullSecrets"] == [{"name": "a"}, {"name": "b"}]


def test_pull_secret_refusals(tmp_path, capsys, own_credentials, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "volume", ref, "--image-pull-secret", "regcred", "--create-pull-secret"]) == 1
    assert "no stored credentials for" in capsys.readouterr().err
    assert main(["k8s", "volume", ref, "--create-pull-secret"]) == 2
    assert main(["k8s", "volume", ref, "--image-pull-secret", "Bad_Name"]) == 2
    err = capsys.readouterr().err
    assert "--image-pull-secret 'Bad_Name'" in err and "Traceback" not in err


@pytest.mark.parametrize("host, loopback", [
    ("localhost:5000", True), ("127.0.0.1:5000", True), ("127.9.9.9", True), ("[::1]:5000", True),
    ("::1", True), ("registry.localhost", False),
    ("127.attacker.example", False), ("registry.internal:5000", False), ("10.0.0.1", False),
    ("localhost.example.com", False)])
def test_loopback_names(host, loopback):
    assert is_loopback(host) is loopback


def _pem(tmp_path: Path) -> Path:
    from tests.support.certs import make_tls_files

    return Path(make_tls_files(tmp_path / "pki").ca_file)


def test_mirror_job_mounts_the_ca_and_pull_secrets(tmp_path, capsys, monkeypatch, own_credentials, auth_registry):
    _login(monkeypatch, auth_registry)
    ca = _pem(tmp_path)
    job = tmp_path / "job.toml"
    job.write_text(f'[registries."registry.internal:5000"]\nca_file = "{ca}"\n\n'
                   f'[[sync]]\nsource = "{auth_registry.host}/llm/a"\ntarget = "registry.internal:5000/llm/a"\n')
    capsys.readouterr()
    args = ["mirror", str(job), "--emit", "k8s-job", "--shards", "2", "--image-pull-secret", "tools-pull"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    cm, ca_map, k8s_job = k8s_checked(tmp_path / "a", out)
    assert str(tmp_path) not in out  # no path of this machine goes to the cluster
    [(key, text)] = cm["data"].items()
    assert key == "job.json" and "ca_file" not in text
    assert ca_map["data"] == {"ca-0.crt": ca.read_text()}
    pod = k8s_job["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "tools-pull"}]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    items = [{"key": "ca-0.crt", "path": "registry.internal:5000/ca.crt"}]
    assert volumes["registry-ca"]["configMap"] == {"name": ca_map["metadata"]["name"], "items": items}
    assert mounts["registry-ca"]["mountPath"] == "/etc/containers/certs.d"
    assert "docker-config" in volumes and "loopback name" in err and auth_registry.host in err

    assert main([*args, "--create-pull-secret", "--namespace", "mirroring"]) == 0
    out, err = capsys.readouterr()
    secret, *_ = k8s_checked(tmp_path / "b", out)
    assert secret["metadata"] == {"name": "ocibridge-mirror-docker-config", "namespace": "mirroring"}
    auths = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"]
    assert list(auths) == [auth_registry.host]  # registry.internal has no login: read anonymously
    assert "holds registry credentials" in err


def test_ca_in_the_pod_is_found_by_the_certs_d_lookup(tmp_path, monkeypatch, tls_registry):
    """What the CA ConfigMap mounts, laid out on disk the same way, is what ocibridge trusts."""
    from ocibridge.mirror import load_job
    from ocibridge.mirror.k8s_job import MirrorK8sOptions as JobOptions
    from ocibridge.mirror.k8s_job import k8s_objects
    from ocibridge.stores.registry.trust import ssl_context

    job = tmp_path / "job.toml"
    job.write_text(f'[registries."{tls_registry.host}"]\nca_file = "{tls_registry.ca_file}"\n\n'
                   f'[[sync]]\nsource = "{tls_registry.host}/a"\ntarget = "{tls_registry.host}/b"\n')
    objects = k8s_objects(load_job(job), job, job.read_text(), JobOptions(shards=1, image="x"))
    ca_map = objects[1]
    pod = objects[2]["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "registry-ca"]
    certs = tmp_path / "certs.d"
    for item in volume["configMap"]["items"]:
        (certs / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (certs / item["path"]).write_text(ca_map["data"][item["key"]])
    monkeypatch.setenv("OCIBRIDGE_CERTS_DIRS", str(certs))
    import socket

    host, port = tls_registry.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock, \
            ssl_context(tls_registry.host).wrap_socket(sock, server_hostname=host) as tls:
        assert tls.version()
    monkeypatch.setenv("OCIBRIDGE_CERTS_DIRS", str(tmp_path / "empty"))
    with socket.create_connection((host, int(port)), timeout=10) as sock, pytest.raises(Exception, match="CERTIFICATE"):
        ssl_context(tls_registry.host).wrap_socket(sock, server_hostname=host)


def test_docker_config_secret_only_when_credentials_come_from_it(tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_text('[registries."a.example"]\nusername = "u"\npassword_env = "A_PW"\n\n'
                   '[registries."b.example"]\nusername = "u"\npassword_env = "B_PW"\n\n'
                   '[[sync]]\nsource = "a.example/x"\ntarget = "b.example/x"\n')
    base = ["mirror", str(job), "--emit", "k8s-job", "--shards", "1", "--env-secret", "pw"]
    assert main(base) == 0
    [_, k8s_job] = k8s_checked(tmp_path / "a", capsys.readouterr().out)
    pod = k8s_job["spec"]["template"]["spec"]
    assert "docker-config" not in {v["name"] for v in pod["volumes"]}
    assert "DOCKER_CONFIG" not in {e["name"] for e in pod["containers"][0]["env"]}
    assert main([*base, "--docker-config-secret", "regcred"]) == 0  # named: mounted
    [_, k8s_job] = k8s_checked(tmp_path / "b", capsys.readouterr().out)
    assert "docker-config" in {v["name"] for v in k8s_job["spec"]["template"]["spec"]["volumes"]}
    job.write_text(job.read_text().replace('target = "b.example/x"', 'target = "c.example/x"'))
    assert main(base) == 0  # c.example's credentials can only come from a docker config
    [_, k8s_job] = k8s_checked(tmp_path / "c", capsys.readouterr().out)
    assert "docker-config" in {v["name"] for v in k8s_job["spec"]["template"]["spec"]["volumes"]}


def test_relative_ca_file_is_read_next_to_the_job(tmp_path, capsys):
    (tmp_path / "ca.pem").write_bytes(_pem(tmp_path).read_bytes())
    job = tmp_path / "job.toml"
    job.write_text('[registries."r.example"]\nca_file = "ca.pem"\n\n[[sync]]\nsource = "r.example/a"\n'
                   'target = "m.example/a"\n')
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "1"]) == 0
    _, ca_map, _ = k8s_checked(tmp_path / "k", capsys.readouterr().out)
    assert ca_map["data"]["ca-0.crt"] == (tmp_path / "ca.pem").read_text()
    (tmp_path / "ca.pem").write_text("not a certificate")
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "1"]) == 1
    assert "holds no PEM certificate" in capsys.readouterr().err
    (tmp_path / "ca.pem").unlink()
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "1"]) == 1
    err = capsys.readouterr().err
    assert "ca_file: cannot read" in err and "Traceback" not in err


def test_pull_secret_from_a_lookup():
    from ocibridge.errors import OcibridgeError
    from ocibridge.stores.registry.options import Credentials
    from ocibridge.stores.registry.pull_secret import pull_secret

    creds = {"a.example": Credentials("u", "p"), "t.example": Credentials("", identity_token="tok")}
    secret = pull_secret("s", ["a.example", "b.example"], lookup=creds.get, every_host=False)
    assert list(json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"]) == ["a.example"]
    with pytest.raises(OcibridgeError, match="no stored credentials for b.example"):
        pull_secret("s", ["a.example", "b.example"], lookup=creds.get)
    with pytest.raises(OcibridgeError, match="identity token"):
        pull_secret("s", ["t.example"], lookup=creds.get)
    with pytest.raises(OcibridgeError, match="no stored credentials for any of b.example"):
        pull_secret("s", ["b.example"], lookup=creds.get, every_host=False)
