"""``ocibridge k8s policy``: a containers policy (or flags) as Kyverno and policy-controller documents.

Each document is validated against the released CRD's ``openAPIV3Schema`` (tests/data/crds,
digests checked) with jsonschema, plus a check that no field would be pruned (a structural
schema drops unknown fields silently, so a misspelt field would validate and do nothing).
``kubectl apply --dry-run=client`` then takes them (tests/support/kubeapi.py's discovery-only
server, which knows both kinds as cluster-scoped resources). kubectl validates a custom
resource only against the schema a real API server publishes, which this server does not, so
it runs with ``--validate=false``: it proves the YAML's shape and the kind-to-resource mapping;
the schema check above is the proof of the fields."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocibridge.cli import main
from tests.support.data import data
from tests.support.kubeapi import kubectl_dry_run

KEY = data("containers-policy", "cosign.pub")
KEY2 = data("containers-policy", "cosign2.pub")
REKOR = data("containers-policy", "rekor.pub")
CRDS = {
    "ClusterPolicy": ("kyverno.io_clusterpolicies.yaml.gz", "v1",
                      "fb041ee35f8e89b5bca566bb6e00cd67fccc30be8859998757333f2a40d79655"),
    "ClusterImagePolicy": ("300-clusterimagepolicy.yaml", "v1beta1",
                           "e23467593124763d9937b1180d48cefe89dc72cf04e9bcf84cbf29822d51b20c"),
}
_schemas: dict[str, dict[str, Any]] = {}


def schema(kind: str) -> dict[str, Any]:
    if kind not in _schemas:
        name, version, digest = CRDS[kind]
        raw = data("crds", name).read_bytes()
        raw = gzip.decompress(raw) if name.endswith(".gz") else raw
        assert hashlib.sha256(raw).hexdigest() == digest, f"{name} is not the released file (PROVENANCE.md)"
        crd = yaml.safe_load(raw)
        [v] = [v for v in crd["spec"]["versions"] if v["name"] == version]
        _schemas[kind] = v["schema"]["openAPIV3Schema"]
    return _schemas[kind]


def pruned(value: Any, s: dict[str, Any], where: str = "") -> list[str]:
    """Fields a structural schema would drop (not in ``properties``, no additionalProperties)."""
    found = []
    if isinstance(value, dict) and not s.get("x-kubernetes-preserve-unknown-fields") and (
            "properties" in s or "additionalProperties" in s):  # metadata: ObjectMeta, not in the CRD
        props = s.get("properties")
        extra = s.get("additionalProperties")
        for k, v in value.items():
            if props is not None and k in props:
                found += pruned(v, props[k], f"{where}.{k}")
            elif isinstance(extra, dict):
                found += pruned(v, extra, f"{where}.{k}")
            elif where or k not in ("apiVersion", "kind", "metadata"):  # every object has these
                found.append(f"{where}.{k}")
    elif isinstance(value, list) and isinstance(s.get("items"), dict):
        for i, v in enumerate(value):
            found += pruned(v, s["items"], f"{where}[{i}]")
    return found


def checked(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    import jsonschema  # not at collection, where every worker paid for it (its format checkers build grammars)

    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    for doc in docs:
        s = schema(doc["kind"])
        jsonschema.Draft7Validator(s).validate(doc)
        assert pruned(doc, s) == [], doc["kind"]
    out = kubectl_dry_run(tmp_path, text)
    assert out.count("created (dry run)") == len(docs), out
    return docs


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["k8s", "policy", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_policy(tmp_path: Path, transports: dict[str, Any], default: str = "reject") -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"default": [{"type": default}], "transports": {"docker": transports}}))
    return path


def test_the_schema_check_catches_a_misspelt_field():
    """The check itself can fail: a field a structural schema would prune is reported."""
    doc = {"apiVersion": "policy.sigstore.dev/v1beta1", "kind": "ClusterImagePolicy", "metadata": {"name": "x"},
           "spec": {"images": [{"glob": "**"}], "authorities": [{"name": "a", "kye": {"data": "x"}}]}}
    import jsonschema

    assert pruned(doc, schema("ClusterImagePolicy")) == [".spec.authorities[0].kye"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema("ClusterPolicy")).validate(
            {"spec": {"rules": [{"name": "r", "verifyImages": [{"type": "Gpg"}]}]}})


def test_a_containers_policy_becomes_both_documents(tmp_path, capsys):
    policy = write_policy(tmp_path, {
        "reg.example.com": [{"type": "sigstoreSigned", "keyPaths": [str(KEY), str(KEY2)]}],
        "reg.example.com/ml": [{"type": "sigstoreSigned", "keyPath": str(KEY),
                                "signedIdentity": {"type": "matchRepository"}}],
        "reg.example.com/ml/public": [{"type": "insecureAcceptAnything"}],
    })
    code, out, err = run(capsys, "--from-policy", str(policy))
    assert code == 0
    kyverno, *cips = checked(tmp_path, out)
    host, ml = kyverno["spec"]["rules"]
    verify = host["verifyImages"][0]
    assert verify["imageReferences"] == ["reg.example.com/*"]
    # containers/image judges reg.example.com/ml/* by its own scope: the broader rule skips it
    assert "reg.example.com/ml/*" in verify["skipImageReferences"]
    assert verify["attestors"][0]["count"] == 1 and len(verify["attestors"][0]["entries"]) == 2
    assert ml["verifyImages"][0]["skipImageReferences"] == [
        "reg.example.com/ml/public:*", "reg.example.com/ml/public@*", "reg.example.com/ml/public/*"]
    key = ml["verifyImages"][0]["attestors"][0]["entries"][0]["keys"]
    assert key["publicKeys"] == KEY.read_text() and key["rekor"] == {"ignoreTlog": True}
    assert {"name": "imageVolumes", "path": "/spec/volumes/*/image", "value": "reference"} in \
        ml["imageExtractors"]["Pod"]  # a model mounted as an image volume is verified too
    assert [c["spec"]["images"] for c in cips] == [
        [{"glob": "reg.example.com/**"}],
        [{"glob": "reg.example.com/ml:*"}, {"glob": "reg.example.com/ml@*"}, {"glob": "reg.example.com/ml/**"}]]
    assert [a["key"]["data"] for a in cips[0]["spec"]["authorities"]] == [KEY.read_text(), KEY2.read_text()]
    assert 'reject is not translated' in out and "signedIdentity matchRepository has no field" in out
    assert "images of 'reg.example.com/ml' must also pass the policy of 'reg.example.com'" in out
    assert "not image volumes" in out
    assert err.count("\n") == 1 and "1 part(s) of the policy are not translated" in err


def test_two_requirements_of_a_scope_are_two_attestors_and_two_policies(tmp_path, capsys):
    data_key = base64.b64encode(KEY2.read_bytes()).decode()
    policy = write_policy(tmp_path, {"reg.example.com/ml": [
        {"type": "sigstoreSigned", "keyPath": str(KEY), "rekorPublicKeyPath": str(REKOR)},
        {"type": "sigstoreSigned", "keyData": data_key}]}, default="insecureAcceptAnything")
    code, out, _ = run(capsys, "--from-policy", str(policy))
    assert code == 0
    kyverno, *cips = checked(tmp_path, out)
    attestors = kyverno["spec"]["rules"][0]["verifyImages"][0]["attestors"]
    assert len(attestors) == 2 and attestors[0]["entries"][0]["keys"]["rekor"] == {"pubkey": REKOR.read_text()}
    assert [c["metadata"]["name"] for c in cips] == ["models-signed-1-1", "models-signed-1-2"]
    assert "Rekor key of 'reg.example.com/ml' is not carried over" in out


def test_fulcio_becomes_keyless(tmp_path, capsys):
    policy = write_policy(tmp_path, {"docker.io/library/busybox": [
        {"type": "sigstoreSigned", "fulcio": {"caPath": str(KEY), "oidcIssuer": "https://accounts.example",
                                              "subjectEmail": "ml@example.com"},
         "rekorPublicKeyPath": str(REKOR)}]})
    code, out, _ = run(capsys, "--from-policy", str(policy), "--name", "hub")
    assert code == 0
    kyverno, cip = checked(tmp_path, out)
    verify = kyverno["spec"]["rules"][0]["verifyImages"][0]
    assert "docker.io/busybox:*" in verify["imageReferences"]  # Kyverno compares the name as the Pod writes it
    keyless = verify["attestors"][0]["entries"][0]["keyless"]
    assert keyless["subject"] == "ml@example.com" and keyless["issuer"] == "https://accounts.example"
    assert cip["spec"]["images"][0] == {"glob": "index.docker.io/library/busybox:*"}
    assert cip["spec"]["authorities"][0]["keyless"]["identities"] == [
        {"issuer": "https://accounts.example", "subject": "ml@example.com"}]


def test_flags_key_and_keyless(tmp_path, capsys):
    code, out, err = run(capsys, "--image", "reg.example.com/ml", "--image", "*.models.example",
                         "--key", str(KEY), "--identity", "ci@example.com", "--issuer", "https://token.example")
    assert code == 0 and err == ""
    kyverno, *cips = checked(tmp_path, out)
    assert [r["verifyImages"][0]["imageReferences"] for r in kyverno["spec"]["rules"]] == [
        ["reg.example.com/ml:*", "reg.example.com/ml@*", "reg.example.com/ml/*"],
        ["*.models.example/*", "*.models.example:*/*"]]
    assert [len(c["spec"]["authorities"]) for c in cips] == [2, 2]
    code, out, _ = run(capsys, "--image", "reg.example.com/ml", "--key", str(KEY), "--kyverno-only", "--json")
    assert code == 0 and [d["kind"] for d in json.loads(out)["items"]] == ["ClusterPolicy"]


@pytest.mark.parametrize("argv, message", [
    (["--key", "KEY"], "give --image SCOPE"),
    (["--image", "reg.example.com/ml/**", "--key", "KEY"], "'*' is only allowed"),
    (["--image", "reg.example.com/ml", "--key", "POLICY"], "not PEM text"),
    (["--image", "reg.example.com/ml", "--identity", "x@example.com"], "needs both --identity"),
    (["--image", "reg.example.com/ml", "--key", "KEY", "--name", "Bad_Name"], "--name 'Bad_Name'"),
    (["--from-policy", "POLICY", "--key", "KEY"], "leave out --image"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    policy = write_policy(tmp_path, {})
    argv = [{"KEY": str(KEY), "POLICY": str(policy)}.get(a, a) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1, err


def test_a_policy_with_no_signature_asked_is_refused(tmp_path, capsys):
    policy = write_policy(tmp_path, {"reg.example.com": [{"type": "insecureAcceptAnything"}]})
    code, out, err = run(capsys, "--from-policy", str(policy))
    assert code == 2 and "nothing for an admission controller to check" in err


def test_check_says_whether_the_node_policy_lets_crio_pull(tmp_path, capsys, registry, unique_repo):
    """The node's policy file, evaluated against the real registry: refused (unsigned under a
    sigstoreSigned scope, exit 1), accepted; containerd reads no such file."""
    from tests.modelgen import make_model

    make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(tmp_path / "m"), ref, "-q"]) == 0
    capsys.readouterr()
    signed = write_policy(tmp_path, {registry.host: [{"type": "sigstoreSigned", "keyPath": str(KEY)}]},
                          default="insecureAcceptAnything")
    attachments = tmp_path / "registries.d"
    attachments.mkdir()
    (attachments / "default.yaml").write_text("default-docker:\n  use-sigstore-attachments: true\n")
    assert main(["k8s", "check", ref, "--runtime", "cri-o@1.33", "--node-policy", str(signed),
                 "--node-registries-d", str(attachments)]) == 1
    out = capsys.readouterr().out
    assert "will NOT mount" in out and f'reason: node policy {signed} (docker "{registry.host}"): ' \
        "CRI-O refuses the pull" in out and "has none" in out
    accepting = tmp_path / "accept.json"
    accepting.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
    assert main(["k8s", "check", ref, "--runtime", "cri-o", "--node-policy", str(accepting), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodePolicy"] == \
        f"node policy {accepting} (default): CRI-O pulls it (it accepts anything)"
    main(["k8s", "check", ref, "--runtime", "containerd", "--node-policy", str(signed)])
    assert "containerd reads no containers policy file" in capsys.readouterr().out
    # without the flag this machine's own policy file is never read: the check is about the node
    assert main(["k8s", "check", ref, "--runtime", "cri-o", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodePolicy"].startswith("node policy: not evaluated")


@pytest.mark.parametrize("runtime", ["containerd", "cri-o@1.33"])
def test_check_refuses_a_node_policy_file_it_cannot_read_whatever_the_runtime(tmp_path, capsys, runtime):
    """A named node policy that is missing or broken is one error line (exit 2), not skipped
    because the runtime (containerd) or the reference (a layout) would not evaluate it: the
    user asked for a check of that file."""
    from tests.modelgen import make_model

    layout = f"oci:{tmp_path}/lay:v1"
    assert main(["push", str(make_model(tmp_path / "m")), layout, "-q"]) == 0
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    for path, message in ((tmp_path / "missing.json", "No such file"), (broken, "not JSON")):
        capsys.readouterr()
        code = main(["k8s", "check", layout, "--runtime", runtime, "--node-policy", str(path)])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, err


def test_a_key_that_is_not_public_is_named_once(tmp_path, capsys):
    """A private key given as --key (or as a policy's keyPath): the line names the file once
    (it read '--key K: --key K: not a PEM public key')."""
    from tests.signing_keys import key_pair

    private = key_pair(tmp_path / "k")[0]
    code, out, err = run(capsys, "--image", "reg.example.com/ml", "--key", str(private))
    assert code == 2 and out == "" and err.count(f"--key {private}") == 1 and "not a PEM public key" in err
    policy = write_policy(tmp_path, {"reg.example.com/ml": [{"type": "sigstoreSigned", "keyPath": str(private)}]})
    code, out, err = run(capsys, "--from-policy", str(policy))
    assert code == 2 and err.count(str(private)) == 1 and "not a PEM public key" in err, err


def test_the_untranslated_count_is_of_parts_left_out_not_of_words_in_notes(tmp_path, capsys):
    """The warning counted notes containing 'not translated'; each note starts with the policy
    file's path, so a file under a folder of that name made every note count (here 4, not 1)."""
    folder = tmp_path / "not translated"
    folder.mkdir()
    policy = write_policy(folder, {
        "reg.example.com/ml": [{"type": "sigstoreSigned", "keyPath": str(KEY)}],
        "reg.example.com/ml/public": [{"type": "insecureAcceptAnything"}],
    })
    code, out, err = run(capsys, "--from-policy", str(policy))
    assert code == 0 and err.count("\n") == 1 and "warning: 1 part(s) of the policy are not translated" in err, err


def test_check_says_a_sigstore_signed_scope_needs_the_nodes_registries_d(tmp_path, capsys, registry, unique_repo):
    """Issue 53.7: a node reads no sigstore attachments unless its registries.d turns them on
    for the registry (containers-registries.d(5), off by default): a signed model under a
    sigstoreSigned scope is refused there, check says so, and gives the file the node needs;
    with the node's directory turning them on, CRI-O pulls it."""
    from tests.modelgen import make_model
    from tests.signing_keys import key_pair

    make_model(tmp_path / "m")
    repo = f"{registry.host}/{unique_repo}"
    assert main(["push", str(tmp_path / "m"), f"{repo}:v1", "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", f"{repo}:v1", "--key", str(private)]) == 0
    policy = write_policy(tmp_path, {repo: [{"type": "sigstoreSigned", "keyPath": str(public),
                                             "signedIdentity": {"type": "matchRepository"}}]})
    capsys.readouterr()
    check = ["k8s", "check", f"{repo}:v1", "--runtime", "cri-o@1.36", "--node-policy", str(policy)]
    assert main(check) == 1
    out = capsys.readouterr().out
    assert "will NOT mount" in out and "use-sigstore-attachments" in out and "CRI-O pulls it" not in out, out
    assert "node file /etc/containers/registries.d/ocibridge-sigstore.yaml:" in out
    assert f"ocibridge-sigstore.yaml:\ndocker:\n  {repo}:\n    use-sigstore-attachments: true\n" in out, out
    assert main([*check, "--json"]) == 1
    [node_file] = json.loads(capsys.readouterr().out)["nodeFiles"]
    assert yaml.safe_load(node_file["content"]) == {"docker": {repo: {"use-sigstore-attachments": True}}}

    # the node's own directory: a file that names the registry without the key is the one to change
    node_dir = tmp_path / "registries.d"
    node_dir.mkdir()
    (node_dir / "default.yaml").write_text(f"docker:\n  {registry.host}:\n    lookaside: https://sigs.example\n")
    assert main([*check, "--node-registries-d", str(node_dir)]) == 1
    out = capsys.readouterr().out
    assert f"{node_dir / 'default.yaml'} (docker" not in out or "does not turn" in out, out
    assert "node file /etc/containers/registries.d/default.yaml:" in out, out
    # written as proposed, CRI-O reads the signature and pulls
    (node_dir / "default.yaml").write_text(yaml.safe_dump({"docker": {registry.host: {
        "lookaside": "https://sigs.example", "use-sigstore-attachments": True}}}))
    assert main([*check, "--node-registries-d", str(node_dir)]) == 0
    out = capsys.readouterr().out
    assert "CRI-O pulls it (classic signature by" in out and "node file" not in out, out
    # one namespace in two files is an error, as containers/image says
    (node_dir / "other.yaml").write_text(f"docker:\n  {registry.host}:\n    use-sigstore-attachments: false\n")
    assert main([*check, "--node-registries-d", str(node_dir)]) == 2
    assert "is defined in" in capsys.readouterr().err
