"""A mirror's ``hf://`` entry and hf_xet: the fetch URLs hf_xet reads from a Xet CAS go over its
own connections, outside the address rule (kinds/hf/checkedhub.py), so an entry downloads with
hf_xet off unless it says ``xet = true``. The endpoint is ``ocibridge serve`` offering its larger
files over Xet (hf_xet is a test dependency: these never skip); its access log tells which way
each file came. An entry's report says, once, when hf_xet ran or the user overrode its opt-in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from huggingface_hub import constants
from serving import Served, own_settings, point_hub_at, serving
from support.fixtures import new_repo
from support.mirror_jobs import mirror_job

from ocibridge.api.mirror import mirror_merge
from ocibridge.cli import main
from ocibridge.errors import OcibridgeError
from ocibridge.kinds.hf.checkedhub import XET_OUTSIDE, XET_OVERRIDDEN
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.job import parse_job
from ocibridge.mirror.report import MirrorReport
from ocibridge.mirror.shard import Shard
from ocibridge.mirror.summary import EntrySummary, MirrorSummary
from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_bert_model

REPO = "acme/xetsrc"
WEIGHTS = "model.safetensors"  # 256 KiB: offered over Xet; the other files are plain downloads
XET_MIN = 128 * 1024


@dataclass
class XetHub:
    served: Served
    weights: bytes

    def xet_requests(self) -> list[str]:
        """The paths of the Xet protocol's requests serve answered: a read grant, a reconstruction,
        a xorb."""
        return [p for _, p in self.served.requests
                if "/xet-read-token/" in p or "/reconstructions/" in p or "/xorbs/" in p]

    def resolved(self) -> list[str]:
        return [p for m, p in self.served.requests if m == "GET" and "/resolve/" in p]


@pytest.fixture(scope="module")
def xet_hub(registry, tmp_path_factory) -> Iterator[XetHub]:
    """acme/xetsrc pushed once, under a prefix of its own, and a serve offering files from 128 KiB
    over Xet (the weights bind a chunk table, so they are offered from the first request); each
    test reads it into a Hub cache of its own."""
    root = tmp_path_factory.mktemp("mirror-xet")
    src = make_bert_model(root / "model", weights=1024)
    prefix = f"{registry.host}/{new_repo('mirror-xet')}"
    with own_settings(root):
        assert main(["push", str(src), f"{prefix}/{REPO}:latest", "-q", "--chunk-threshold", "128K"]) == 0
    with serving([prefix], xet_min=XET_MIN) as served:
        yield XetHub(served, (src / WEIGHTS).read_bytes())


def mirrored_weights(target: Path) -> bytes:
    """The bytes of the weights' layer of the target's ``main``."""
    store = LayoutStore(target)
    desc = store.resolve("main")
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    (layer,) = [x for x in manifest.layers if (x.annotations or {}).get(Family.CNAI.filepath_key) == WEIGHTS]
    return store.fetch_bytes(layer)


def mirror(tmp_path: Path, hub: XetHub, name: str, **entry: object) -> tuple[Path, MirrorReport]:
    """Mirror acme/xetsrc's main into the layout ``tmp_path/name``, the entry's keys ``entry``;
    the layout and the run's report."""
    target = tmp_path / name
    job = mirror_job(tmp_path / f"{name}.toml", {"source": f"hf://{REPO}", "target": f"oci:{target}", **entry},
                     defaults={"endpoint": hub.served.url})
    hub.served.requests.clear()
    report = MirrorReport.of(run_job(load_job(job)))
    assert report.exit_code == 0, report.format_text()
    return target, report


def said_of_xet(report: MirrorReport) -> list[str]:
    """The report's notes on hf_xet, checked to be the same in its text (one line each) and its
    JSON; [] when it says nothing of it."""
    (entry,) = report.entries
    text = report.format_text()
    assert not [line for line in text.splitlines() if "hf_xet" in line and not line.startswith("note: ")], text
    for note in (XET_OUTSIDE, XET_OVERRIDDEN):
        assert text.count(note) == list(entry.notes).count(note), text
        assert text.count(f"note: hf://{REPO}: {note}\n") == text.count(note), text
    assert report.as_dict()["entries"][0]["notes"] == list(entry.notes)
    return [n for n in entry.notes if "hf_xet" in n]


def test_by_default_files_kept_in_xet_come_through_resolve_not_hf_xet(tmp_path, xet_hub, monkeypatch):
    point_hub_at(monkeypatch, xet_hub.served.url, tmp_path / "hub", xet=True)  # hf_xet on, as users run it
    target, report = mirror(tmp_path, xet_hub, "target")
    assert xet_hub.xet_requests() == [], xet_hub.served.requests
    assert said_of_xet(report) == []  # nothing outside the rule, nothing overridden: nothing to say
    assert any(p.endswith(f"/{WEIGHTS}") for p in xet_hub.resolved()), xet_hub.served.requests
    assert mirrored_weights(target) == xet_hub.weights
    assert constants.HF_HUB_DISABLE_XET is False  # put back as it was


def test_an_entry_that_opts_in_downloads_with_hf_xet_unless_the_user_turned_it_off(tmp_path, xet_hub, monkeypatch):
    point_hub_at(monkeypatch, xet_hub.served.url, tmp_path / "hub", xet=True)
    target, report = mirror(tmp_path, xet_hub, "target", xet=True)
    asked = xet_hub.xet_requests()
    assert any("/reconstructions/" in p for p in asked) and any("/xorbs/" in p for p in asked), asked
    assert mirrored_weights(target) == xet_hub.weights
    assert said_of_xet(report) == [XET_OUTSIDE]  # once for the entry, not once a file

    # HF_HUB_DISABLE_XET=1 of the user's: hf_xet stays off whatever the job says (a fresh cache)
    point_hub_at(monkeypatch, xet_hub.served.url, tmp_path / "hub-off", xet=False)
    target, report = mirror(tmp_path, xet_hub, "target-off", xet=True)
    assert xet_hub.xet_requests() == [], xet_hub.served.requests
    assert mirrored_weights(target) == xet_hub.weights
    assert constants.HF_HUB_DISABLE_XET is True
    assert said_of_xet(report) == [XET_OVERRIDDEN]  # the opt-in not silently dropped


@pytest.mark.parametrize("where, doc", [
    ("sync.0.xet", {"sync": [{"source": f"hf://{REPO}", "target": "oci:t", "xet": "yes"}]}),
    ("defaults.xet", {"defaults": {"xet": 1}, "sync": [{"source": f"hf://{REPO}", "target": "oci:t"}]}),
])
def test_the_job_takes_xet_as_a_boolean_only(where, doc):
    import json

    import jsonschema

    good = {"defaults": {"xet": True}, "sync": [{"source": f"hf://{REPO}", "target": "oci:a"},
                                                {"source": f"hf://{REPO}", "target": "oci:b", "xet": False}]}
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "mirror-job.schema.json").read_text())
    jsonschema.validate(good, schema)  # what an editor checks a job file by
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
    ok = parse_job(good)
    assert [ok.hub_xet(entry) for entry in ok.sync] == [True, False]
    with pytest.raises(OcibridgeError) as raised:
        parse_job(doc, where="job.toml")
    said = str(raised.value)
    assert said.startswith(f"job.toml: {where}: expected true or false, not ") and "\n" not in said, said
    with pytest.raises(OcibridgeError, match=r"^job.toml: sync.0: xet: only for hf:// sources$"):
        parse_job({"sync": [{"source": "reg.example/a", "target": "oci:t", "xet": True}]}, where="job.toml")


def test_shards_that_each_say_an_entry_note_merge_into_one():
    def shard(index: int) -> MirrorReport:
        entry = EntrySummary(0, f"hf://{REPO}", "oci:t", notes=[XET_OUTSIDE])
        return MirrorReport.of(MirrorSummary(entries=[entry], shard=Shard(index, 2), job_digest="sha256:" + "0" * 64,
                                             finished_at="2026-01-01T00:00:00.000+00:00"))

    merged = mirror_merge([shard(0), shard(1)])
    assert [e.notes for e in merged.entries] == [(XET_OUTSIDE,)]
    assert merged.format_text().count(XET_OUTSIDE) == 1, merged.format_text()
