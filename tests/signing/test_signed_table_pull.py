"""A pull into a directory under a signature check (``--verify-key``, a policy file asking a
signature): each layer is checked by the BLAKE3 chunk table its manifest binds exactly when the
check verified a signature of the manifest (classic cosign, a sigstore bundle) for every
requirement that applied; a signature of the files only (OMS) keeps the whole-blob SHA-256
(signing/use.py ``CheckedUse``, api/pull_ops.py ``_table_may_check``).

One manifest, signed three ways by three keys: classic by A, bundle by C, OMS by B; so which
check ran, not what the registry holds, decides."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.faultproxy import corrupt_at
from support.fixtures import new_repo

import ocibridge
from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, MIN_CHUNK_SIZE
from ocibridge.cli import main
from ocibridge.signing.classic import signature_tag
from ocibridge.stores import partial
from ocibridge.stores.registry import open_repository
from tests.forged_tables import push_chunked, push_lookalike
from tests.signing_keys import key_pair

CHUNK = MIN_CHUNK_SIZE
SIZE = 5 * CHUNK + 123


@pytest.fixture(scope="module")
def signed(registry, tmp_path_factory):
    """(repo, data, layer digest, {"classic"|"bundle"|"oms": public key}, (OMS-only repo, its key))."""
    tmp = tmp_path_factory.mktemp("signedtable")
    repo, oms_repo = new_repo(), new_repo()
    data = push_chunked(registry, tmp / "model", repo, SIZE, CHUNK)
    publics = {}
    for form in ("classic", "bundle", "oms"):  # one key per form
        private, publics[form] = key_pair(tmp / form)
        assert main(["sign", f"{registry.host}/{repo}:v1", "--key", str(private), "--form", form]) == 0
    ocibridge.push(str(tmp / "model"), f"{registry.host}/{oms_repo}:v1",
                   options=ocibridge.PushOptions(chunk_size=CHUNK, chunk_threshold=CHUNK))
    private, oms_only = key_pair(tmp / "oms-only")
    assert main(["sign", f"{registry.host}/{oms_repo}:v1", "--key", str(private), "--form", "oms"]) == 0
    with open_repository(host=registry.host, repository=repo) as store:
        manifest = json.loads(store.fetch_bytes(store.resolve("v1")))
    assert ANNOTATION_DIGEST in manifest["annotations"]  # the manifest binds a table
    (layer,) = [entry["digest"] for entry in manifest["layers"] if entry["size"] == SIZE]
    return repo, data, layer, publics, (oms_repo, oms_only)


def _whole_blob_hashers(monkeypatch) -> list[str]:
    """The digests whole-blob SHA-256 hashers are made for from now on (none: checked by the table)."""
    made: list[str] = []
    whole = partial.new_hasher
    monkeypatch.setattr(partial, "new_hasher", lambda digest: (made.append(digest), whole(digest))[1])
    return made


def _policy(path: Path, public: Path) -> Path:
    path.write_text(json.dumps({"default": [{"type": "sigstoreSigned", "keyPath": str(public),
                                             "signedIdentity": {"type": "matchRepository"}}]}))
    return path


# which check ran -> whether the table checks the layer
CASES = {
    "classic key": (["classic"], None, True),
    "bundle key": (["bundle"], None, True),
    "either key, the classic one verifies": (["oms", "classic"], None, True),
    "policy of the classic key": ([], "classic", True),
    "OMS key (the manifest's other signatures are by other keys)": (["oms"], None, False),
    "policy of the classic key, and the OMS key": (["oms"], "classic", False),
    "policy of the OMS key (refused)": ([], "oms", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_signed_pull_checks_by_the_table_only_where_a_signature_of_the_manifest_verified(
        signed, registry, tmp_path, monkeypatch, capsys, case):
    repo, data, layer, publics, _ = signed
    keys, policy, by_table = CASES[case]
    args = [arg for form in keys for arg in ("--verify-key", str(publics[form]))]
    if policy is not None:
        args += ["--policy", str(_policy(tmp_path / "policy.json", publics[policy]))]
    made = _whole_blob_hashers(monkeypatch)
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["pull", f"{registry.host}/{repo}:v1", str(out), "-q", *args])
    if by_table is None:  # an OMS signature never meets sigstoreSigned
        assert code == 1 and "covers the model's files, not the manifest digest" in capsys.readouterr().err
        assert not out.exists() and made == []
        return
    assert code == 0, capsys.readouterr().err
    assert (out / "weights.bin").read_bytes() == data
    assert (layer in made) is not by_table, made  # by the table: no whole-blob SHA-256 of the layer


def test_an_oms_only_signed_pull_still_hashes_the_whole_blob(signed, registry, tmp_path, monkeypatch):
    _, data, layer, _, (oms_repo, oms_only) = signed
    made = _whole_blob_hashers(monkeypatch)
    out = tmp_path / "out"
    assert main(["pull", f"{registry.host}/{oms_repo}:v1", str(out), "-q", "--verify-key", str(oms_only)]) == 0
    assert (out / "weights.bin").read_bytes() == data
    assert layer in made


@pytest.mark.parametrize("form", ["classic", "bundle"])
def test_a_flipped_byte_under_a_signed_table_is_one_line_naming_the_chunk_and_dest_is_unchanged(
        signed, fault_proxy, tmp_path, capsys, form):
    repo, _, layer, publics, _ = signed
    fault_proxy.add("GET", f"/blobs/{layer}", corrupt_at(2 * CHUNK + 5), times=None)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("kept\n")
    capsys.readouterr()
    code = main(["pull", f"{fault_proxy.host}/{repo}:v1", str(out), "-q", "--verify-key", str(publics[form])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1, err
    assert f"{layer}: chunk 2 (bytes {2 * CHUNK}-{3 * CHUNK - 1}) does not match the chunk table" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"] and (out / "mine.txt").read_text() == "kept\n"
    blobs = Path(os.environ["OCIBRIDGE_CACHE"]) / "pulls" / "blobs"  # nothing kept under the layer digest
    assert [p for p in blobs.rglob("*") if layer.split(":")[1] in p.name] == []


def test_a_lookalike_manifest_binding_a_forged_table_is_refused_before_a_layer_byte(
        signed, registry, fault_proxy, tmp_path, capsys):
    """The signed manifest with its table binding replaced by a BLAKE3 table under which a
    flipped byte verifies, the classic signature re-attached (tagged for the copy): its digest
    is not the one signed, so the check refuses it and no layer is fetched at all."""
    repo, data, layer, publics, _ = signed

    def resign(store, subject, evil):  # the classic signature, tagged for the look-alike
        store.tag(store.resolve(signature_tag(subject.digest)), signature_tag(evil.digest))

    with open_repository(host=registry.host, repository=repo) as store:
        evil, _ = push_lookalike(store, layer, data, 3 * CHUNK + 9, CHUNK, hashes.BLAKE3, resign)
    fault_proxy.add("GET", f"/blobs/{layer}", corrupt_at(3 * CHUNK + 9), times=None)  # the forged bytes, sent
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["pull", f"{fault_proxy.host}/{repo}:evil", str(out), "-q", "--verify-key", str(publics["classic"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "refused" in err[0] and evil.digest in err[0], err
    assert not out.exists()
    assert fault_proxy.requests_matching("GET", f"/blobs/{layer}") == []


def test_with_signatures_under_a_signature_of_the_manifest_checks_by_the_table_and_writes_model_sig(
        signed, registry, tmp_path, monkeypatch):
    """--with-signatures alone no longer forces SHA-256: the classic signature the check verified
    binds the table, and model.sig is written once the files are checked against it."""
    repo, data, layer, publics, _ = signed
    made = _whole_blob_hashers(monkeypatch)
    out = tmp_path / "out"
    assert main(["pull", f"{registry.host}/{repo}:v1", str(out), "-q", "--with-signatures",
                 "--verify-key", str(publics["oms"]), "--verify-key", str(publics["classic"])]) == 0
    assert (out / "weights.bin").read_bytes() == data and (out / "model.sig").is_file()
    assert layer not in made
    assert main(["verify-dir", str(out), "--key", str(publics["oms"])]) == 0


def test_the_rule_itself_for_what_no_registry_case_above_reaches():
    """A manifest pulled other than the one checked (a ModelKit's ModelPack form, an index's
    entry) keeps SHA-256 even under a covering signature; with no check, --with-signatures does."""
    from ocibridge.api.pull_ops import _table_may_check
    from ocibridge.signing.coverage import Trusted, covered_by
    from ocibridge.signing.use import CheckedUse

    signed_digest, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    by_manifest = CheckedUse(signed_digest, covered_by(["classic"]))
    assert _table_may_check(by_manifest, signed_digest, with_signatures=False)
    assert not _table_may_check(by_manifest, other, with_signatures=False)
    assert not _table_may_check(CheckedUse(signed_digest, covered_by(["oms"])), signed_digest, False)
    assert not _table_may_check(CheckedUse(signed_digest, covered_by(["attestation", "keyless-v9"])),
                                signed_digest, False)
    assert _table_may_check(CheckedUse(other), other, with_signatures=False)
    assert not _table_may_check(CheckedUse(other), other, with_signatures=True)
    assert covered_by(["oms", "classic"]) >= {Trusted.CHUNK_TABLE, Trusted.FILES}


def _rereads(monkeypatch) -> list[str]:
    """The names of the files model.sig's check reads from now on (a whole-file SHA-256)."""
    from ocibridge.signing import omsdir

    read: list[str] = []
    whole = omsdir.digest_file
    monkeypatch.setattr(omsdir, "digest_file", lambda path: (read.append(Path(path).name), whole(path))[1])
    return read


def test_with_signatures_under_a_signature_of_the_manifest_reads_no_file_again(
        signed, registry, tmp_path, monkeypatch):
    """model.sig's check takes the layer digest for the file the table checked (the classic
    signature verified binds both): the file is not read again, and model.sig verifies."""
    repo, data, layer, publics, _ = signed
    out = tmp_path / "out"
    read = _rereads(monkeypatch)
    made = _whole_blob_hashers(monkeypatch)
    assert main(["pull", f"{registry.host}/{repo}:v1", str(out), "-q", "--with-signatures",
                 "--verify-key", str(publics["oms"]), "--verify-key", str(publics["classic"])]) == 0
    assert layer not in made and "weights.bin" not in read, read
    assert (out / "weights.bin").read_bytes() == data
    assert main(["verify-dir", str(out), "--key", str(publics["oms"])]) == 0


def test_with_signatures_and_no_check_hashes_the_blob_once_as_it_lands(signed, registry, tmp_path, monkeypatch):
    """No check: the table binds nothing anyone vouched for, so the layer is checked by its
    SHA-256 as it lands (the digest model.sig lists), and that check is the one made."""
    _, data, layer, _, (oms_repo, oms_only) = signed
    out = tmp_path / "out"
    read = _rereads(monkeypatch)
    made = _whole_blob_hashers(monkeypatch)
    assert main(["pull", f"{registry.host}/{oms_repo}:v1", str(out), "-q", "--with-signatures"]) == 0
    assert layer in made and "weights.bin" not in read, (made, read)
    assert (out / "weights.bin").read_bytes() == data
    assert main(["verify-dir", str(out), "--key", str(oms_only)]) == 0
