"""The containers policy file fails closed (issue 52, items 3 and 4): a file containers/image
refuses to load is refused here too, by every command, serve included, with one line naming the
file and the entry; and a scope is matched on the canonical reference, so another spelling of
the same registry (``LOCALHOST:PORT``, ``127.0.0.1:0PORT``) does not step around a ``reject``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from tests.modelgen import make_model

ACCEPT = [{"type": "insecureAcceptAnything"}]
REJECT = [{"type": "reject"}]


def _raw(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# Each is a file skopeo refuses ("invalid policy in ..."), and was loaded and obeyed in part.
REFUSED = [
    ("a scope given twice (its reject overridden by the later entry)",
     '{"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {'
     '"example.com/bad": [{"type": "reject"}], "example.com/bad": [{"type": "insecureAcceptAnything"}]}}}',
     '"example.com/bad" is given twice'),
    ("default given twice",
     '{"default": [{"type": "reject"}], "default": [{"type": "insecureAcceptAnything"}]}',
     '"default" is given twice'),
    ("a key twice inside a requirement",
     '{"default": [{"type": "reject", "type": "insecureAcceptAnything"}]}', '"type" is given twice'),
    ("an oci scope with a trailing /",
     '{"default": [{"type": "insecureAcceptAnything"}], "transports": {"oci": {"/srv/models/": [{"type": "reject"}]}}}',
     'oci "/srv/models/": invalid scope: is not a clean path'),
    ("a relative oci scope",
     '{"default": [{"type": "insecureAcceptAnything"}], "transports": {"oci": {"srv/models": [{"type": "reject"}]}}}',
     'oci "srv/models": invalid scope: must be an absolute path'),
    ("the oci scope /",
     '{"default": [{"type": "insecureAcceptAnything"}], "transports": {"oci": {"/": [{"type": "reject"}]}}}',
     'oci "/": invalid scope'),
    ("an unknown requirement type",
     '{"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {"x.io": [{"type": "rejectt"}]}}}',
     "unknown policy requirement type 'rejectt'"),
    ("signedBy without a keyType", '{"default": [{"type": "signedBy", "keyPath": "/k"}]}', "unknown keyType"),
    ("signedBaseLayer without its identity", '{"default": [{"type": "signedBaseLayer"}]}', "baseLayerIdentity"),
    ("a docker-archive scope", '{"default": [{"type": "insecureAcceptAnything"}], "transports": '
     '{"docker-archive": {"/x.tar": [{"type": "reject"}]}}}', "takes no scope"),
    ("two spellings of one docker scope",
     '{"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {'
     '"LOCALHOST:5000/bad": [{"type": "reject"}], "localhost:05000/bad": [{"type": "insecureAcceptAnything"}]}}}',
     "names the same scope as"),
]


@pytest.mark.parametrize("what, text, error", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_policy_file_containers_image_refuses_is_refused(tmp_path, capsys, what, text, error):
    src = f"oci:{tmp_path}/src:v1"
    assert main(["push", str(make_model(tmp_path / "model")), src, "-q"]) == 0
    policy = _raw(tmp_path / "policy.json", text)
    capsys.readouterr()
    code = main(["pull", src, str(tmp_path / "out"), "--policy", str(policy), "-q"])
    err = capsys.readouterr().err
    assert code != 0 and not (tmp_path / "out").exists(), what
    assert err.startswith(f"ocibridge: error: policy file {policy}: ") and error in err, err
    assert err.count("\n") == 1, err


def test_serve_does_not_start_without_the_policy_it_was_told_to_enforce(tmp_path, capsys):
    src = f"oci:{tmp_path}/src:v1"
    assert main(["push", str(make_model(tmp_path / "model")), src, "-q"]) == 0
    policy = _raw(tmp_path / "policy.json", REFUSED[0][1])
    capsys.readouterr()
    code = main(["serve", f"oci:{tmp_path}/src", "--policy", str(policy), "--listen", "127.0.0.1:0"])
    err = capsys.readouterr().err
    assert code != 0 and f"policy file {policy}: " in err and err.count("\n") == 1, err


def test_serve_keeps_the_policy_file_it_found(tmp_path, monkeypatch):
    """A policy found by the default search is the one enforced for serve's life: when it is
    removed, requests are still refused, not served under no policy at all."""
    from starlette.testclient import TestClient

    import ocibridge
    from ocibridge.signing import policy_place
    from ocibridge.stores.layout import LayoutStore

    layout = tmp_path / "layout"
    LayoutStore(layout, create=True)
    assert main(["push", str(make_model(tmp_path / "model")), f"oci:{layout}:acme/tiny:latest", "-q"]) == 0
    home = tmp_path / "home"
    user = home / ".config" / "containers" / "policy.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"default": REJECT}))
    monkeypatch.delenv("OCIBRIDGE_POLICY", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(policy_place, "SYSTEM_POLICY", tmp_path / "none.json")
    with TestClient(ocibridge.create_app(f"oci:{layout}")) as client:
        assert client.get("/api/models/acme/tiny").status_code == 403  # the policy rejects it
        user.unlink()
        refused = client.get("/api/models/acme/tiny/revision/main")
        assert refused.status_code >= 400, refused.text


def test_another_spelling_of_the_registry_does_not_step_around_a_reject(tmp_path, registry, unique_repo, capsys):
    port = registry.host.rsplit(":", 1)[1]
    bad, good = f"ns/{unique_repo}-bad", f"ns/{unique_repo}-good"
    for repo in (bad, good):
        assert main(["push", str(make_model(tmp_path / "model")), f"{registry.host}/{repo}:v1", "-q"]) == 0
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": ACCEPT, "transports": {"docker": {
        f"localhost:{port}/{bad}": REJECT, f"127.0.0.1:{port}/{bad}": REJECT}}}))
    capsys.readouterr()
    for host in (f"LOCALHOST:{port}", f"Localhost:{port}", f"127.0.0.1:0{port}", f"localhost:00{port}"):
        out = tmp_path / f"out-{host.replace(':', '_')}"
        code = main(["pull", f"{host}/{bad}:v1", str(out), "--policy", str(policy), "-q"])
        err = capsys.readouterr().err
        assert code != 0 and "rejects it" in err and not out.exists(), (host, err)
        # the same spelling of a repository the policy does not name is pulled: the refusal is the policy's
        assert main(["pull", f"{host}/{good}:v1", str(out), "--policy", str(policy), "-q"]) == 0, host


@pytest.mark.parametrize("host", ["127.000.000.001", "0x7f.0.0.1", "127.1", "2130706433", "127.0.0.1:99999"])
def test_odd_host_spellings_are_one_clear_line(tmp_path, capsys, host):
    spelled = host if ":" in host else f"{host}:5000"
    for argv in (["pull", f"{spelled}/ns/m:v1", str(tmp_path / "out")], ["inspect", f"{spelled}/ns/m:v1"],
                 ["check-registry", spelled]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code != 0 and err.count("\n") == 1 and "unexpected" not in err, (argv, err)
        assert "ambiguous spelling" in err or "port must be a number" in err, err
