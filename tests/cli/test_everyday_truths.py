"""Small truths a new user met (issue 107, item 7): what the docs say to install, what the proxy
logs without --debug, the date of a repository pushed without one."""

from __future__ import annotations

import importlib.metadata as md
import re

from huggingface_hub import snapshot_download
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from upstream_proxy import Proxied

from tests.docrun import DOCS_DIR, PIP_INSTALL


def test_no_doc_says_to_install_what_every_install_has():
    """mirroring.md said YAML job files need ``pip install pyyaml``: PyYAML is a requirement of
    ocibridge itself, there after a plain ``pip install ocibridge``."""
    core = {canonicalize_name(Requirement(line).name) for line in md.requires("ocibridge") or []
            if Requirement(line).marker is None}
    assert "pyyaml" in core
    told = []
    for doc in sorted(DOCS_DIR.glob("*.md")):
        for m in PIP_INSTALL.finditer(doc.read_text()):
            words = [w.strip("'\"") for w in m[1].split()]
            told += [f"{doc.name}: {m[0]}" for w in words
                     if re.fullmatch(r"[A-Za-z][\w.-]*", w) and canonicalize_name(w) in core]
    assert told == []


def test_the_proxy_logs_no_http_request_lines_without_debug(proxied: Proxied, tmp_path):
    """httpx's INFO lines (``HTTP Request: GET …``) of the proxy's upstream requests are for
    ``--debug``; the proxy's log keeps its own lines."""
    snapshot_download("acme/tiny", endpoint=proxied.proxy, token="client-token", cache_dir=tmp_path / "hf")
    log = (proxied.root / "proxy" / "serve.log").read_text()
    assert "ocibridge: " in log
    assert [line for line in log.splitlines() if "HTTP Request:" in line] == []


def test_a_dateless_repository_s_storage_row_has_the_date_the_hubs_client_needs_and_serve_md_says_so():
    """``hf repos ls`` showed ``1970-01-01`` for a repository pushed without a date. The row
    cannot leave the date out, as model_info does: huggingface_hub's ``RepoStorageInfo`` reads
    ``updatedAt`` unconditionally and parses it. So the epoch stays, and serve.md says what it means."""
    from huggingface_hub.hf_api import RepoStorageInfo

    from ocibridge.hubserver.reading.storage import storage_row

    row = storage_row("acme/undated", False, None)
    assert RepoStorageInfo(**row).updated_at.year == 1970
    without = {k: v for k, v in row.items() if k != "updatedAt"}
    try:
        RepoStorageInfo(**without)
    except KeyError:
        pass
    else:
        raise AssertionError("huggingface_hub now takes a row without updatedAt: leave the date out")
    text = " ".join((DOCS_DIR / "serve-commits.md").read_text().split())
    assert "a repository whose artifact names no date, or that has no commit yet, shows `1970-01-01` there" in text


def test_check_registry_names_what_it_leaves_in_the_registry(registry, unique_repo, capsys):
    """The probe's mount made ``REPO-ocibridge-probe``, and the artifact manifest stays where the
    registry refuses deletes (Debian's distribution, as configured here): both were in the catalog
    afterwards, unsaid. Every repository the catalog gained is named in the report."""
    import httpx

    from ocibridge.cli import main

    def catalog() -> set[str]:
        answer = httpx.get(f"{registry.url}/v2/_catalog", params={"n": 1000})
        assert answer.status_code == 200, answer.text
        return set(answer.json()["repositories"])

    before = catalog()
    assert main(["check-registry", f"{registry.host}/{unique_repo}/probed"]) == 0
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if line.startswith("  note: left in the registry: ")]
    assert len(said) == 1, out
    gained = catalog() - before
    assert gained, "the probe left nothing: the note would say too much"
    named = {word.split("@")[0].strip(";,()") for word in said[0].split()}
    assert gained <= named, (gained, said)
    assert "garbage collection" in said[0]


def test_load_tensors_of_a_missing_name_names_the_nearest_as_pull_does(registry, unique_repo, tmp_path):
    """``load_tensors`` said the registry's ``manifest not found`` where pull names the nearest
    repositories (docs/cli.md promises it of the API calls too)."""
    import pytest

    import ocibridge
    from ocibridge.errors import NotFound
    from tests.modelgen import make_model

    prefix = f"{registry.host}/{unique_repo}"
    ocibridge.push(str(make_model(tmp_path / "m")), f"{prefix}/acme/tiny:latest")
    with pytest.raises(NotFound) as pulled:
        ocibridge.pull(f"{prefix}/acme/tinny:latest", str(tmp_path / "out"))
    with pytest.raises(NotFound) as loaded:
        ocibridge.load_tensors(f"{prefix}/acme/tinny:latest")
    assert f"nearest there: {prefix}/acme/tiny" in str(pulled.value)
    assert str(loaded.value) == str(pulled.value)


def test_a_destination_whose_parent_is_missing_is_one_line_and_nothing_is_made(tmp_path, capsys):
    """``pull REF /nonexistent/deep/dir`` and ``push … oci:/nonexistent/store:…`` made the whole
    tree from the root, unsaid. As cp, oras and skopeo, the destination is made only inside a
    directory that exists; its parent missing is one line naming it, nothing made."""
    from ocibridge.cli import main
    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    missing = tmp_path / "nonexistent"
    assert main(["push", str(model), f"oci:{missing}/store:v1", "-q"]) == 1
    assert main(["pull", f"oci:{tmp_path}/ok:v1", str(missing / "deep" / "dir"), "-q"]) == 1  # (before ok exists)
    assert main(["push", str(model), f"oci:{tmp_path}/ok:v1", "-q"]) == 0
    capsys.readouterr()
    assert main(["pull", f"oci:{tmp_path}/ok:v1", str(missing / "deep" / "dir"), "-q"]) == 1
    said = capsys.readouterr().err
    assert said == (f"ocibridge: error: {missing}/deep/dir: no such directory {missing}/deep to make dir in "
                    f"(create it first: mkdir -p {missing}/deep)\n"), said
    assert not missing.exists()
    assert main(["pull", f"oci:{tmp_path}/ok:v1", str(tmp_path / "made"), "-q"]) == 0  # its parent exists
    assert (tmp_path / "made" / "config.json").is_file()
