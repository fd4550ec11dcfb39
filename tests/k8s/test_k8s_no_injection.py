"""No input text reaches emitted YAML unescaped (issue 52, item 5): a scope of a containers
policy holding a line break and ``---`` (a file containers/image loads: docker scopes are not
checked there) used to end the ``# note:`` comment and add a whole document (``kind: Evil``) to
what users ``kubectl apply``. Every header goes through core/yamldocs.py's ``comments``, every
document through its emitter: the output parses to exactly the expected documents, and kubectl
takes exactly those."""

from __future__ import annotations

import json

import yaml

from ocibridge.cli import main
from tests.support.data import data
from tests.support.kubeapi import kubectl_dry_run

KEY = data("containers-policy", "cosign.pub")
EVIL = "\n---\napiVersion: v1\nkind: Evil\nmetadata:\n  name: evil\n"
SIGNED = [{"type": "sigstoreSigned", "keyPath": str(KEY), "signedIdentity": {"type": "matchRepository"}}]


def test_a_hostile_scope_adds_no_document_to_k8s_policy(tmp_path, capsys):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {
        "registry.example.com/ml": SIGNED,
        f"registry.example.com/a{EVIL}": [{"type": "reject"}],  # untranslatable: its text lands in a note
        f"registry.example.com/b\r\u2028{EVIL}": SIGNED,
    }}}))
    assert main(["k8s", "policy", "--from-policy", str(policy)]) == 0
    out = capsys.readouterr().out
    docs = [d for d in yaml.safe_load_all(out) if d is not None]
    kinds = sorted(d["kind"] for d in docs)
    assert "Evil" not in kinds and all(d["apiVersion"] != "v1" for d in docs), kinds
    assert kinds == ["ClusterImagePolicy", "ClusterPolicy"], kinds
    # the note is still there, on its own comment line, with the text escaped
    notes = [line for line in out.splitlines() if line.startswith("# note:") and "registry.example.com/a" in line]
    assert notes and "\\n---\\napiVersion: v1\\nkind: Evil" in notes[0], out[:2000]
    assert all(line.startswith("#") or not line.startswith(("kind: Evil", "---\napiVersion: v1")) for line in
               out.splitlines())
    assert kubectl_dry_run(tmp_path, out).count("created (dry run)") == 2


def test_comments_are_one_line_whatever_they_hold():
    from ocibridge.core.yamldocs import comments

    text = comments(["a\nb", "c\rd", "e\u2028f\u2029g\x85h", "i\x00j\x1bk\ufeffl", "", "plain é ✓"])
    assert text.count("\n") == 6
    assert [d for d in yaml.safe_load_all(text + "kind: X\n")] == [{"kind": "X"}]
    assert "# plain é ✓\n" in text
