"""``ocibridge k8s serve --quotas FILE``: serve's ``--quotas`` reaches the pods. The file is read
and checked here, carried in a ConfigMap mounted as a directory (an edit reaches the pods), and
passed to serve where it is mounted; the documents pass the Kubernetes client's models and
``kubectl apply --dry-run=client``; a file that is not a quotas file is one error line; and
docs/serve-kubernetes.md's block runs as printed."""

from __future__ import annotations

from ocibridge.cli import main
from tests.docrun import doc_env, reader_venvs  # noqa: F401 - fixtures used by name
from tests.k8s.test_k8s_serve import checked, checked_list, doc_block_configmap

QUOTAS = '[namespaces.acme]\nbytes = "64M"\nrepos = 2\n\n[namespaces."*"]\nbytes = "1G"\n'


def mounted_quotas(pod: dict, name: str) -> str:
    """The path serve's --quotas names, checked to be the ConfigMap ``name``'s key as mounted."""
    [c] = pod["containers"]
    path = c["args"][c["args"].index("--quotas") + 1]
    volume = next(v for v in pod["volumes"] if v.get("configMap", {}).get("name") == name)
    [mount] = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    assert "subPath" not in mount and mount["readOnly"]  # a directory: the kubelet swaps an edited file in
    directory, _, key = path.rpartition("/")
    assert directory == mount["mountPath"] and "items" not in volume["configMap"]
    return key


def test_the_quotas_file_reaches_the_pod_in_a_config_map(tmp_path, capsys):
    quotas = tmp_path / "quotas.toml"
    quotas.write_text(QUOTAS)
    capsys.readouterr()
    assert main(["k8s", "serve", "registry.internal:5000/hub", "--quotas", str(quotas), "--namespace", "ml"]) == 0
    out = capsys.readouterr().out
    docs = checked(tmp_path, out)
    assert list(docs) == ["PersistentVolumeClaim", "ConfigMap", "Deployment", "Service"]
    assert str(tmp_path) not in out  # no path of this machine goes to the cluster
    config = docs["ConfigMap"]
    assert config["metadata"]["name"] == "ocibridge-serve-quotas" and config["metadata"]["namespace"] == "ml"
    key = mounted_quotas(docs["Deployment"]["spec"]["template"]["spec"], "ocibridge-serve-quotas")
    assert config["data"] == {key: QUOTAS}


def test_every_replica_and_the_writer_get_the_quotas(tmp_path, capsys):
    quotas = tmp_path / "quotas.toml"
    quotas.write_text(QUOTAS)
    capsys.readouterr()
    assert main(["k8s", "serve", "registry.internal:5000/hub", "--quotas", str(quotas), "--replicas", "3"]) == 0
    docs = checked_list(tmp_path, capsys.readouterr().out)
    maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        name = f"{deployment['metadata']['name']}-quotas"
        assert maps[name] == {mounted_quotas(deployment["spec"]["template"]["spec"], name): QUOTAS}
    assert len(maps) == 2  # the writer's and the readers'


def test_a_quotas_file_that_is_not_one_is_one_error_line(tmp_path, capsys):
    bad = tmp_path / "quotas.toml"
    bad.write_text("[namespaces.acme]\nbytes = \"lots\"\n")
    capsys.readouterr()
    assert main(["k8s", "serve", "registry.internal:5000/hub", "--quotas", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and f"--quotas {bad}" in err and "Traceback" not in err
    assert main(["k8s", "serve", "registry.internal:5000/hub", "--quotas", str(tmp_path / "missing.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "missing.toml" in err


def test_the_docs_quotas_block_runs_as_printed(doc_env):  # noqa: F811
    work, data = doc_block_configmap(doc_env, "--quotas", "serve-quotas.yaml")
    assert data == {"quotas.toml": (work / "quotas.toml").read_text()}
