"""Mirror jobs without a registry: job files, tag filters and semver ranges, re-labelling,
and whole jobs between OCI layouts (plan, dry run, copy, re-run, conversion)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocibridge.errors import OcibridgeError
from ocibridge.mirror import load_job, parse_job, run_job
from ocibridge.mirror.filters import select_tags
from ocibridge.mirror.jobsections import TagFilter
from ocibridge.mirror.ratelimit import TokenBucket
from ocibridge.mirror.relabel import RelabelStore
from ocibridge.mirror.semver import parse_range, parse_version
from ocibridge.model.builder import BuildOptions, build
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import Family, Kind
from ocibridge.oci.models import Descriptor, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore, WritableStore
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry.options import RegistryOptions
from ocibridge.transfer.copy import copy
from tests.support.data import data

SHARED = bytes(range(256)) * 256  # 64 KiB every model carries


def package(seed: int) -> ModelPackage:
    unique = bytes((i * 7 + seed) % 256 for i in range(4096 + seed))
    return ModelPackage(
        files=[
            ModelFile.from_bytes("base.safetensors", SHARED, Kind.WEIGHT),
            ModelFile.from_bytes(f"delta-{seed}.safetensors", unique, Kind.WEIGHT),
            ModelFile.from_bytes("config.json", b'{"hidden": 4}\n', Kind.WEIGHT_CONFIG),
            ModelFile.from_bytes("README.md", f"# model {seed}\n".encode(), Kind.DOC),
        ],
        descriptor={"name": f"m{seed}", "version": f"1.{seed}.0"},
        config={"format": "safetensors"},
    )


def push_models(store: LayoutStore, tags: list[str], family: Family = Family.CNAI) -> dict[str, str]:
    out = {}
    for i, tag in enumerate(tags):
        art = build(package(i), BuildOptions(family=family))
        out[tag] = copy(art, "artifact", store, tag).root.digest
    return out


def blob_set(root: Path) -> set[str]:
    return {p.name for p in (root / "blobs" / "sha256").iterdir()}


# -- semver ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rng", "yes", "no"),
    [
        (">=1.2.0 <2", ["1.2.0", "v1.9.9", "1.2"], ["1.1.9", "2.0.0", "2.0.0-rc.1", "1.5.0-beta"]),
        ("^1.2", ["1.2.0", "1.99.0"], ["1.1.0", "2.0.0"]),
        ("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0", "0.2.2"]),
        ("^0.0.3", ["0.0.3"], ["0.0.4"]),
        ("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0", "1.2.2"]),
        ("~1", ["1.0.0", "1.9.0"], ["2.0.0"]),
        ("1.x", ["1.0.0", "1.5.2"], ["0.9.0", "2.0.0"]),
        ("1.2.*", ["1.2.0", "1.2.7"], ["1.3.0"]),
        ("*", ["0.0.1", "9.9.9"], ["1.0.0-alpha"]),
        ("<=1.2", ["1.2.9", "0.1.0"], ["1.3.0"]),
        (">1.2", ["1.3.0"], ["1.2.9"]),
        ("=1.2.3", ["1.2.3", "v1.2.3"], ["1.2.4"]),
        (">=2.0.0-rc.1 <2.0.1", ["2.0.0-rc.1", "2.0.0-rc.2", "2.0.0"], ["2.0.0-beta", "2.0.1-rc.1"]),
        ("^1.0 || >=3", ["1.4.0", "3.0.0", "7.0.0"], ["2.0.0"]),
        (">= 1.2 < 1.4", ["1.3.0"], ["1.4.0"]),
    ],
)
def test_semver_ranges(rng: str, yes: list[str], no: list[str]) -> None:
    r = parse_range(rng)
    for tag in yes:
        assert r.matches(parse_version(tag)), (rng, tag)
    for tag in no:
        assert not r.matches(parse_version(tag)), (rng, tag)


def test_semver_precedence() -> None:
    order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.10.0", "2.0.0"]
    parsed = [parse_version(t) for t in order]
    assert sorted(parsed, key=lambda v: v.key()) == parsed
    assert parse_version("latest") is None and parse_version("1.2.3.4") is None
    with pytest.raises(OcibridgeError, match="not a version"):
        parse_range(">=banana")


def test_tag_filters() -> None:
    tags = ["latest", "1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.0.0-rc.1", "dev-abc", "v1.10.0",
            "sha256-" + "a" * 64, "sha256-" + "b" * 64 + ".sig"]
    assert select_tags(tags, TagFilter()) == sorted(t for t in tags if not t.startswith("sha256-"))
    assert select_tags(tags, TagFilter(allow=["1.*", "v1.*"])) == ["1.0.0", "1.1.0", "1.2.0", "v1.10.0"]
    assert select_tags(tags, TagFilter(allow=[r"re:v?\d+\.\d+\.\d+"], deny=["2.*"])) == [
        "1.0.0", "1.1.0", "1.2.0", "v1.10.0"]
    assert select_tags(tags, TagFilter(semver="^1.1")) == ["1.1.0", "1.2.0", "v1.10.0"]
    # latest counts releases only: a pre-release is not "the newest" unless asked for
    assert select_tags(tags, TagFilter(latest=2)) == ["2.0.0", "v1.10.0"]
    assert select_tags(tags + ["3.0.0-rc.1"], TagFilter(latest=1)) == ["2.0.0"]
    assert select_tags(tags + ["3.0.0-rc.1"], TagFilter(latest=2, prereleases=True)) == ["3.0.0-rc.1", "2.0.0"]
    assert select_tags(tags, TagFilter(latest=2, deny=["*-*"])) == ["2.0.0", "v1.10.0"]
    assert select_tags(tags, TagFilter(latest=2, order="tag")) == ["v1.10.0", "latest"]
    assert select_tags(tags, TagFilter(deny=["re:.*"])) == []
    with pytest.raises(OcibridgeError, match="invalid tag pattern"):
        select_tags(tags, TagFilter(allow=["re:("]))


def test_token_bucket_paces() -> None:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    bucket = TokenBucket(rate=10, burst=3, clock=lambda: now[0], sleep=sleep)
    for _ in range(13):
        bucket.acquire()
    # 3 at once, then 10 more at 10/s
    assert now[0] == pytest.approx(1.0, abs=1e-6)


# -- job files ---------------------------------------------------------------------------------
JOB_TOML = """
[registries."127.0.0.1:5000"]
username = "alice"
password_env = "MIRROR_TEST_PW"
plain_http = true

[defaults]
accept = ["cnai"]
concurrency = { artifacts = 3, blobs = 2 }

[[sync]]
source = "127.0.0.1:5000/models/llama"
target = "oci:mirror"
tags = { semver = ">=1.0.0 <2", latest = 3 }
rate_limit = { requests_per_second = 50 }
referrers = false
"""


def test_job_file_toml_and_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "job.toml").write_text(JOB_TOML)
    job = load_job(tmp_path / "job.toml")
    entry = job.sync[0]
    eff = job.effective(entry)
    assert eff.accept == ("cnai",) and eff.concurrency.artifacts == 3 and eff.referrers is False
    assert eff.rate_limit.requests_per_second == 50 and entry.tags.latest == 3
    assert job.base_dir == tmp_path
    monkeypatch.setenv("MIRROR_TEST_PW", "s3cret")
    opts = job.registry_options("127.0.0.1:5000")
    assert opts == RegistryOptions(plain_http=True, insecure=False, username="alice", password="s3cret")
    assert job.registry_options("elsewhere.io") == RegistryOptions()
    monkeypatch.delenv("MIRROR_TEST_PW")
    with pytest.raises(OcibridgeError, match="MIRROR_TEST_PW is not set"):
        job.registry_options("127.0.0.1:5000")

    import yaml

    doc = {"sync": [{"source": "oci:a", "target": "oci:b", "tags": {"allow": ["v*"]}}]}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    assert load_job(tmp_path / "job.yaml").sync[0].tags.allow == ["v*"]


def test_job_file_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[sync]]\nsource = "oci:a"\ntarget = "oci:b"\nconcurency = 3\n')
    with pytest.raises(OcibridgeError, match=r"sync\.0\.concurency: unknown key \(did you mean 'concurrency'\?\)"):
        load_job(bad)
    bad.write_text("[[sync]\n")
    with pytest.raises(OcibridgeError, match="invalid TOML"):
        load_job(bad)
    with pytest.raises(OcibridgeError, match="sync: Field required"):
        parse_job({})
    with pytest.raises(OcibridgeError, match="needs a username"):
        parse_job({"registries": {"h": {"password": "x"}}, "sync": [{"source": "a", "target": "b"}]})



@pytest.mark.parametrize(("doc", "said"), [
    ({"sync": [{"sorce": "oci:a", "target": "oci:b"}]},
     "sync.0.sorce: unknown key (did you mean 'source'?)"),
    ({"syncs": [{"source": "oci:a", "target": "oci:b"}]}, "syncs: unknown key (did you mean 'sync'?)"),
    ({"sync": [{"source": "oci:a", "target": "oci:b", "tags": {"alow": ["v*"]}}]},
     "sync.0.tags.alow: unknown key (did you mean 'allow'?)"),
    ({"sync": [{"source": "oci:a", "target": "oci:b", "colour": "red"}]},
     "sync.0.colour: unknown key (the keys here: referrers, accept, concurrency, rate_limit, convert, verify, "
     "provenance, attest_key, scan, scan_key, endpoint, token_env, token_file, no_chunks, chunk_threshold, "
     "chunk_hash, xet, source, target, tags, source_format, revisions, "
     "include, exclude)"),
    ({"registries": {"127.0.0.1:5000": {"usrname": "bot"}}, "sync": [{"source": "oci:a", "target": "oci:b"}]},
     "registries.127.0.0.1:5000.usrname: unknown key (did you mean 'username'?)"),
])
def test_a_misspelt_key_is_named_with_the_key_meant(doc: dict[str, object], said: str) -> None:
    """A misspelt required key (``sorce``) was reported as the key it replaced being missing
    ('sync.0.source: Field required'), never naming the typo: the unknown key is now told first,
    with the key it is closest to."""
    with pytest.raises(OcibridgeError) as raised:
        parse_job(doc, where="job.toml")
    assert str(raised.value) == f"job.toml: {said}"


def test_sync_written_as_one_table_says_to_write_two_brackets(tmp_path: Path) -> None:
    """``[sync]`` (one bracket pair: a table, not a list of entries) said 'sync: Input should be a
    valid list'; a value where a table goes named a class ('a valid dictionary or instance of
    TagFilter'). The lines now say what to write."""
    job = tmp_path / "job.toml"
    job.write_text('[sync]\nsource = "oci:a"\ntarget = "oci:b"\n')
    with pytest.raises(OcibridgeError) as raised:
        load_job(job)
    assert str(raised.value) == (f"{job}: sync: expected a list of entries: in TOML each is a [[sync]] table "
                                 "(two brackets), in YAML a '- source: ...' item under sync:")
    with pytest.raises(OcibridgeError) as raised:
        parse_job({"sync": [{"source": "oci:a", "target": "oci:b", "tags": "v1"}]}, where="job.toml")
    assert str(raised.value) == "job.toml: sync.0.tags: expected a table of keys ({ key = value, ... }), not 'v1'"
    with pytest.raises(OcibridgeError) as raised:
        parse_job({"sync": [{"source": "oci:a", "target": "oci:b", "tags": {"allow": "v1"}}]}, where="job.toml")
    assert str(raised.value) == "job.toml: sync.0.tags.allow: expected a list ([...]), not 'v1': write ['v1']"


@pytest.mark.parametrize(("value", "said"), [
    ({"concurrency": {"artifacts": "4"}}, "sync.0.concurrency.artifacts: expected a whole number, not '4': write 4"),
    ({"concurrency": {"blobs": 2.5}}, "sync.0.concurrency.blobs: expected a whole number, not 2.5"),
    ({"referrers": "no"}, "sync.0.referrers: expected true or false, not 'no'"),
    ({"provenance": "true"}, "sync.0.provenance: expected true or false, not 'true': write true"),
    ({"referrers": 0}, "sync.0.referrers: expected true or false, not 0"),
    ({"rate_limit": {"requests_per_second": "50"}},
     "sync.0.rate_limit.requests_per_second: expected a number, not '50': write 50"),
    ({"tags": {"latest": "3"}}, "sync.0.tags.latest: expected a whole number, not '3': write 3"),
    ({"endpoint": 8080}, "sync.0.endpoint: expected a string in quotes, not 8080"),
])
def test_a_value_of_the_wrong_type_is_refused_not_converted(value: dict[str, object], said: str) -> None:
    """A string where a number or a boolean goes was converted (``"4"`` became 4, ``"no"`` became
    false): a job that reads one way and runs another. Each key now takes its own type only, in
    one line saying what it takes."""
    with pytest.raises(OcibridgeError) as raised:
        parse_job({"sync": [{"source": "oci:a", "target": "oci:b", **value}]}, where="job.toml")
    assert str(raised.value) == f"job.toml: {said}"


def test_native_toml_values_still_load(tmp_path: Path) -> None:
    """Strict types refuse strings for numbers, not TOML's own values: an integer where a float
    goes (requests_per_second = 50) is still a number."""
    job = tmp_path / "job.toml"
    job.write_text('version = 1\n[defaults]\nreferrers = false\nrate_limit = { requests_per_second = 50 }\n'
                   '[[sync]]\nsource = "oci:a"\ntarget = "oci:b"\nconcurrency = { artifacts = 3 }\n'
                   'tags = { latest = 2, prereleases = true }\n')
    loaded = load_job(job)
    assert loaded.effective(loaded.sync[0]).rate_limit.requests_per_second == 50.0
    assert loaded.sync[0].concurrency.artifacts == 3 and loaded.sync[0].tags.prereleases is True


@pytest.mark.parametrize(("host", "meant"), [("http://127.0.0.1:5000", "127.0.0.1:5000"),
                                            ("https://registry.internal:5000/", "registry.internal:5000"),
                                            ("registry.internal:5000/mirror", "registry.internal:5000")])
def test_a_registry_written_as_a_url_or_with_a_path_is_refused(host: str, meant: str) -> None:
    """``[registries."http://127.0.0.1:5000"]`` (or with a path) matched no entry's host, so its
    credentials and transport were silently never used; it is refused now with the key to write."""
    doc = {"registries": {host: {"username": "bot", "password": "pw"}}, "sync": [{"source": "a/b", "target": "c/d"}]}
    with pytest.raises(OcibridgeError) as raised:
        parse_job(doc, where="job.toml")
    assert str(raised.value) == (f"job.toml: registries: {host!r}: a registry is written HOST[:PORT], without a "
                                 f"scheme or a path: {meant!r}")

def test_schema_file_is_current() -> None:
    from ocibridge.api.schemas import generate, render

    path = Path(__file__).resolve().parents[2] / "schemas" / "mirror-job.schema.json"
    assert path.read_text() == render(generate()["mirror-job"])


# -- re-labelling ------------------------------------------------------------------------------
def test_relabel_equals_a_build_in_the_other_family(tmp_path: Path) -> None:
    """cnai → cncf by re-labelling gives byte for byte what building as cncf gives."""
    src = LayoutStore(tmp_path / "src", create=True)
    cnai = build(package(1), BuildOptions(family=Family.CNAI))
    cncf = build(package(1), BuildOptions(family=Family.CNCF))
    copy(cnai, "artifact", src, "v1")
    view = RelabelStore(src, Family.CNCF)
    desc = view.resolve("v1")
    assert desc.digest == cncf.descriptor.digest != cnai.descriptor.digest
    assert view.fetch_bytes(desc) == cncf.manifest_bytes
    manifest = parse_manifest_bytes(view.fetch_bytes(desc))
    assert manifest.config.digest == cnai.manifest.config.digest  # blobs unchanged
    assert all("cnai" not in json.dumps(layer.model_dump()) for layer in manifest.layers)
    back = RelabelStore(view, Family.CNAI)
    assert back.resolve(desc.digest).digest == cnai.descriptor.digest
    # a manifest already in the family passes through byte for byte
    same = RelabelStore(src, Family.CNAI)
    assert same.resolve("v1").digest == cnai.descriptor.digest
    # read-only: a view implements the readable protocol only, so no copy can take it as a target
    assert isinstance(view, ReadableStore) and not isinstance(view, WritableStore)


# -- whole jobs between layouts ----------------------------------------------------------------
def layout_job(tmp_path: Path, **entry) -> Path:
    body = {"source": "oci:src", "target": "oci:dst", **entry}
    lines = ["[[sync]]"]
    for k, v in body.items():
        lines.append(f"{k} = {json.dumps(v)}" if not isinstance(v, dict) else
                     f"{k} = {{ {', '.join(f'{a} = {json.dumps(b)}' for a, b in v.items())} }}")
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_layout_mirror_plan_dry_run_copy_rerun(tmp_path: Path) -> None:
    src = LayoutStore(tmp_path / "src", create=True)
    tags = ["1.0.0", "1.1.0", "1.2.0", "2.0.0", "dev"]
    digests = push_models(src, tags)
    job = load_job(layout_job(tmp_path, tags={"semver": ">=1.1 <3"}))

    dry = run_job(job, dry_run=True)
    assert not (tmp_path / "dst").exists(), "the dry run created the target"
    assert sorted(a.source.rsplit(":", 1)[1] for a in dry.with_status("planned")) == ["1.1.0", "1.2.0", "2.0.0"]
    assert dry.entries[0].tags_filtered_out == 2
    # shared blobs count once: 3 models x (base, delta, config.json, README, config) less the
    # second and third copies of base.safetensors and config.json
    t = dry.totals()
    assert t["blobs_planned"] == 3 * 5 - 2 - 2 and t["failed"] == 0

    done = run_job(job)
    assert done.ok and len(done.with_status("copied")) == 3
    dst = LayoutStore(tmp_path / "dst")
    assert dst.tags() == ["1.1.0", "1.2.0", "2.0.0"]
    for tag in dst.tags():
        assert dst.resolve(tag).digest == digests[tag]
    assert blob_set(tmp_path / "dst") <= blob_set(tmp_path / "src")
    assert done.totals()["bytes_copied"] == t["bytes_planned"]

    again = run_job(job)
    assert [a.reason for a in again.artifacts] == ["already mirrored"] * 3
    assert again.totals()["bytes_copied"] == 0


def test_layout_mirror_accept_convert_and_single_reference(tmp_path: Path) -> None:
    src = LayoutStore(tmp_path / "src", create=True)
    push_models(src, ["a"], Family.CNAI)
    push_models(src, ["b"], Family.CNCF)
    # a plain OCI image-like manifest that is not ModelPack
    cfg = b"{}"
    src.push_blob(Descriptor.for_bytes("application/vnd.oci.image.config.v1+json", cfg),
                  __import__("io").BytesIO(cfg))
    from ocibridge.oci.models import Manifest

    m = Manifest(config=Descriptor.for_bytes("application/vnd.oci.image.config.v1+json", cfg))
    body = m.to_json_bytes()
    src.push_manifest(Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", body), body, "image")

    summary = run_job(load_job(layout_job(tmp_path, accept=["cncf"], convert="cncf")))
    reasons = {a.source.rsplit(":", 1)[1]: (a.status, a.reason) for a in summary.artifacts}
    assert reasons["a"][0] == "skipped" and "family cnai not accepted" in reasons["a"][1]
    assert reasons["image"] == ("skipped", "not a ModelPack artifact (accept = cncf)")
    assert reasons["b"][0] == "copied"

    summary = run_job(load_job(layout_job(tmp_path, accept=["any"], convert="cncf")))
    dst = LayoutStore(tmp_path / "dst")
    assert dst.tags() == ["a", "b", "image"]
    a = parse_manifest_bytes(dst.fetch_bytes(dst.resolve("a")))
    assert a.artifactType == Family.CNCF.artifact_type
    assert all(k.startswith("org.cncf.") or k.startswith("org.opencontainers.")
               for layer in a.layers for k in (layer.annotations or {}))
    assert dst.resolve("a").digest == build(package(0), BuildOptions(family=Family.CNCF)).descriptor.digest
    assert dst.resolve("image").digest == src.resolve("image").digest

    one = tmp_path / "one.toml"
    one.write_text('[[sync]]\nsource = "oci:src:b"\ntarget = "oci:single:renamed"\n')
    s = run_job(load_job(one))
    assert s.ok and LayoutStore(tmp_path / "single").tags() == ["renamed"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[sync]]\nsource = "oci:src"\ntarget = "oci:single:renamed"\n')
    s = run_job(load_job(bad))
    assert not s.ok and "source must name one artifact" in s.failed[0].reason
    missing = tmp_path / "missing.toml"
    missing.write_text('[[sync]]\nsource = "oci:nowhere"\ntarget = "oci:x"\n')
    s = run_job(load_job(missing))
    assert s.exit_code == 1 and "not an OCI image layout" in s.failed[0].reason


def test_entry_selecting_no_tag_is_named_and_an_empty_source_fails(tmp_path: Path) -> None:
    push_models(LayoutStore(tmp_path / "src", create=True), ["1.0.0", "dev"])
    summary = run_job(load_job(layout_job(tmp_path, tags={"allow": ["9.*"]})))
    assert summary.ok and summary.artifacts == []
    assert "nothing to do for oci:" in summary.format_text()
    assert "no tag selected (2 listed, 2 filtered out)" in summary.format_text()
    LayoutStore(tmp_path / "empty", create=True)  # a source with no tags at all: likely a typo
    summary = run_job(load_job(layout_job(tmp_path, source="oci:empty")))
    assert summary.exit_code == 1 and "has no tags to mirror" in summary.failed[0].reason


REFERENCE_OLLAMA = data("ollama", "safetensors-store")


def test_local_ollama_source_becomes_modelpack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ollama:NAME`` in a job reads $OLLAMA_MODELS: every tag (or the one named) is converted
    exactly as ``ocibridge push ollama:NAME`` converts it; an Ollama target is refused."""
    import shutil

    from ocibridge.kinds.ollama import OllamaStore, parse_ollama_name, read_ollama

    models = tmp_path / "ollama"
    shutil.copytree(REFERENCE_OLLAMA, models)
    tags = models / "manifests" / "registry.ollama.ai" / "library" / "tiny-safetensors"
    shutil.copy(tags / "latest", tags / "v2")
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    job = tmp_path / "job.toml"
    job.write_text('[[sync]]\nsource = "ollama:tiny-safetensors"\ntarget = "oci:dst"\nconvert = "cncf"\n'
                   '[[sync]]\nsource = "ollama:tiny-safetensors:v2"\ntarget = "oci:one:pinned"\n')
    summary = run_job(load_job(job))
    assert summary.ok and len(summary.with_status("copied")) == 3, summary.format_text()
    dst, one = LayoutStore(tmp_path / "dst"), LayoutStore(tmp_path / "one")
    assert dst.tags() == ["latest", "v2"] and one.tags() == ["pinned"]
    for tag, store, family in (("latest", dst, Family.CNCF), ("v2", dst, Family.CNCF), ("v2", one, Family.CNAI)):
        name = parse_ollama_name(f"tiny-safetensors:{tag}")
        expected = build(read_ollama(OllamaStore(models, name), tag), BuildOptions(family=family))
        assert store.fetch_bytes(store.resolve("pinned" if store is one else tag)) == expected.manifest_bytes
    assert [a.reason for a in run_job(load_job(job)).artifacts] == ["already mirrored"] * 3
    job.write_text('[[sync]]\nsource = "oci:dst"\ntarget = "ollama:tiny-safetensors"\n')
    failed = run_job(load_job(job))
    assert failed.exit_code == 1 and "mirror sources only" in failed.failed[0].reason


def test_every_job_in_the_guide_is_valid() -> None:
    import re

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    import jsonschema
    import yaml

    root = Path(__file__).resolve().parents[2]
    schema = json.loads((root / "schemas" / "mirror-job.schema.json").read_text())
    guide = (root / "docs" / "mirroring.md").read_text()
    docs = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", guide, re.S)]
    docs += [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", guide, re.S)]
    assert len(docs) >= 9
    for doc in docs:
        jsonschema.validate(doc, schema)  # what an editor checks (jsonschema comes with oras)
        job = parse_job(doc)
        for entry in job.sync:
            select_tags(["1.0.0", "v2.1.0", "release-20250101"], entry.tags)
    with pytest.raises(jsonschema.ValidationError, match="'tag' was unexpected"):
        jsonschema.validate({"sync": [{"source": "a", "target": "b", "tag": {}}]}, schema)


def test_concurrent_copies_send_a_shared_blob_once_and_a_failed_send_blocks_nobody(tmp_path: Path) -> None:
    """Copies into one target share BlobLocks: a blob goes up once; a push that raises frees its lock."""
    import hashlib
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ocibridge.transfer.bloblocks import BlobLocks

    src = LayoutStore(tmp_path / "src", create=True)
    push_models(src, [f"v{n}" for n in range(6)])
    shared_digest = "sha256:" + hashlib.sha256(SHARED).hexdigest()

    pushes: list[str] = []
    failures = {"left": 1}
    guard = threading.Lock()

    class FlakyCounting(LayoutStore):
        def push_blob(self, desc, reader, *, reopen=None):
            with guard:
                if desc.digest == shared_digest and failures["left"]:
                    failures["left"] -= 1
                    raise OSError("connection reset while sending")
                pushes.append(desc.digest)
            super().push_blob(desc, reader)

    dst = FlakyCounting(tmp_path / "dst", create=True)
    locks = BlobLocks()

    def one(n: int) -> str:
        try:
            copy(src, f"v{n}", dst, f"v{n}", concurrency=2, blob_locks=locks)
            return "ok"
        except OSError:
            return "failed"

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(one, range(6)))
    assert outcomes.count("failed") == 1 and outcomes.count("ok") == 5
    assert pushes.count(shared_digest) == 1
    assert sorted(dst.tags()) == sorted(f"v{n}" for n in range(6) if outcomes[n] == "ok")
    assert len(locks._locks) == 0  # nothing left held


def test_local_ollama_endpoint_is_named_without_tag_or_digest(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Messages name an Ollama source by its model: a digest in the job must not garble it."""
    from ocibridge.mirror.endpoints import open_endpoint

    (tmp_path / "manifests").mkdir()
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    job = parse_job({"sync": [{"source": "oci:a", "target": "oci:b"}]})
    digest = "sha256:" + "ab" * 32
    for text, reference in (("ollama:tiny", None), ("ollama:tiny:v2", "v2"), (f"ollama:ns/tiny@{digest}", digest)):
        endpoint = open_endpoint(text, job)
        expected = "ollama:ns/tiny" if "ns/" in text else "ollama:tiny"
        assert (endpoint.name, endpoint.reference) == (expected, reference)


def test_a_tag_no_url_can_carry_fails_alone_and_the_job_goes_on(tmp_path: Path) -> None:
    """A source layout lists tags a registry URL cannot carry (a space and an escape, a path):
    each fails with its reason, in the dry run as in the run, and the good tag is copied."""
    src = LayoutStore(tmp_path / "src", create=True)
    push_models(src, ["good"])
    index = json.loads((tmp_path / "src" / "index.json").read_text())
    entry = index["manifests"][0]
    for bad in ("bad tag\x1b[2J", "../up", "v1\n"):  # a trailing newline passed '^...$' once
        index["manifests"].append({**entry, "annotations": {"org.opencontainers.image.ref.name": bad}})
    (tmp_path / "src" / "index.json").write_text(json.dumps(index))
    job = load_job(layout_job(tmp_path))

    for summary in (run_job(job, dry_run=True), run_job(job)):
        failed = {a.source.rsplit(":", 1)[1]: a.reason for a in summary.with_status("failed")}
        assert failed == {"bad tag\x1b[2J": "invalid tag 'bad tag\\x1b[2J'", "../up": "invalid tag '../up'",
                          "v1\n": "invalid tag 'v1\\n'"}
        assert not summary.ok and summary.totals()["failed"] == 3
    assert LayoutStore(tmp_path / "dst").tags() == ["good"]


def test_losses_are_said_for_what_was_converted_not_again_for_each_skip() -> None:
    """A converting job re-run skips what it mirrored; the text does not repeat its lost fields
    (the --json report keeps them, per artifact)."""
    from ocibridge.mirror.summary import ArtifactResult, MirrorSummary

    lost = ["docker.context_size = 2048"]
    summary = MirrorSummary(artifacts=[
        ArtifactResult(0, "src/a:1", "dst/a:1", "copied", lost=lost),
        ArtifactResult(0, "src/a:2", "dst/a:2", "skipped", reason="already mirrored", lost=lost),
        ArtifactResult(0, "src/a:3", "dst/a:3", "planned", lost=lost),
    ])
    lines = summary.format_text().splitlines()
    said = [i for i, line in enumerate(lines) if line.strip() == "lost: docker.context_size = 2048"]
    assert [lines[i - 1].split()[0] for i in said] == ["copied", "would"]
    assert summary.as_dict()["artifacts"][1]["lost"] == lost
