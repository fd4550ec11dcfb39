"""`verify-dir` (issue 42): messages name the signature file whole (it was cut at 19
characters, `OMS signature signed-out/model.si: …`), and a `model.sig` in the directory checked
is used without `--signature`, as `pull --with-signatures` leaves it there."""

from __future__ import annotations

import json

from ocibridge.cli import main
from tests.modelgen import make_model
from tests.signing_keys import key_pair


def signed_out(tmp_path, capsys):
    private, public = key_pair(tmp_path / "k")
    assert main(["push", str(make_model(tmp_path / "m")), f"oci:{tmp_path}/store:v1", "-q"]) == 0
    assert main(["sign", f"oci:{tmp_path}/store:v1", "--key", str(private), "--form", "oms"]) == 0
    out = tmp_path / "signed-out"
    assert main(["pull", f"oci:{tmp_path}/store:v1", str(out), "-q", "--with-signatures"]) == 0
    capsys.readouterr()
    assert (out / "model.sig").is_file()
    return out, public


def test_model_sig_in_the_directory_is_used_without_signature(tmp_path, capsys, monkeypatch):
    out, public = signed_out(tmp_path, capsys)
    assert main(["verify-dir", str(out), "--key", str(public)]) == 0
    assert "file(s) signed by" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["verify-dir", "signed-out", "--key", str(public), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    (out / "model.sig").rename(tmp_path / "elsewhere.sig")  # none there: say what to pass (a usage mistake)
    assert main(["verify-dir", "signed-out", "--key", str(public)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no model.sig" in err and "--signature" in err
    assert main(["verify-dir", "signed-out", "--signature", "elsewhere.sig", "--key", str(public)]) == 0


def test_messages_name_the_signature_file_whole(tmp_path, capsys, monkeypatch):
    out, _ = signed_out(tmp_path, capsys)
    _, other = key_pair(tmp_path / "other")
    monkeypatch.chdir(tmp_path)
    assert main(["verify-dir", "signed-out", "--key", str(other)]) == 1
    err = capsys.readouterr().err
    assert "OMS signature signed-out/model.sig: DSSE signature does not verify" in err, err
    assert main(["verify-dir", "signed-out", "--signature", str(out / "model.sig"), "--key", str(other)]) == 1
    assert f"OMS signature {out / 'model.sig'}: " in capsys.readouterr().err
