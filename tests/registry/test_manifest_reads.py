"""What each reading command asks the registry for its manifests (counted by the fault proxy
in front of it): a manifest is read from the registry once per command, and what one step read
is handed to the next rather than asked again."""

from __future__ import annotations

from collections import Counter

import pytest

from ocibridge.cli import main
from tests.modelgen import make_model
from tests.signing_keys import key_pair


def _manifest_requests(proxy, argv: list[str]) -> Counter:
    before = len(proxy.requests)
    assert main(argv) == 0, argv
    return Counter(r.method for r in proxy.requests[before:] if "/manifests/" in r.path or "/referrers/" in r.path)


@pytest.fixture
def signed(fault_proxy, unique_repo, tmp_path):
    private, public = key_pair(tmp_path / "k")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", "-q", str(make_model(tmp_path / "m")), ref]) == 0
    assert main(["sign", ref, "--key", str(private), "--form", "all"]) == 0
    return ref, public


def test_reading_commands_ask_for_each_manifest_once(signed, fault_proxy, unique_repo, tmp_path):
    ref, public = signed
    counts = {
        "pull": _manifest_requests(fault_proxy, ["pull", ref, str(tmp_path / "out")]),
        "verify": _manifest_requests(fault_proxy, ["verify", ref, "--key", str(public)]),
        "copy": _manifest_requests(fault_proxy, ["copy", ref, f"oci:{tmp_path / 'a'}:v1"]),
        "copy -r": _manifest_requests(fault_proxy, ["copy", "-r", ref, f"oci:{tmp_path / 'b'}:v1"]),
        "inspect": _manifest_requests(fault_proxy, ["inspect", ref]),
        "pull --with-attestations": _manifest_requests(
            fault_proxy, ["pull", ref, str(tmp_path / "att"), "--with-attestations"]),
    }
    # a signed model has two referrers (the bundle and the OMS signature) and a .sig tag; each
    # referrer is read once, by its listing (which leaves out one the registry lost), and handed
    # to its reader; inspect's family is judged on the manifest inspect read
    assert {k: dict(v) for k, v in counts.items()} == {
        "pull": {"GET": 1},  # the tag's manifest, read by the door and handed down
        # the tag, the .sig tag; the .sig manifest, the referrers API, its fallback index, 2 referrers, the root
        "verify": {"HEAD": 2, "GET": 6},
        "copy": {"HEAD": 1, "GET": 1},
        "copy -r": {"HEAD": 10, "GET": 8},
        "inspect": {"HEAD": 1, "GET": 5},  # resolve, read; the referrers API, the fallback index, 2 referrers
        # the referrers listed once for the signed attestations and the unsigned evidence (7 when listed twice)
        "pull --with-attestations": {"HEAD": 1, "GET": 5},
    }


def test_a_mirror_hands_what_its_plan_read_to_its_copy(signed, fault_proxy, unique_repo, tmp_path):
    """A mirror plans (sizing the artifact, its referrers and its ``.sig``), then copies: the
    copy is handed the root's descriptor, the manifests and the referrer listings the plan
    read, so it asks the source for none of them again (41 manifest requests to the source
    when the copy read them all again, 34 while a store's memo answered the repeats)."""
    ref, public = signed
    target = f"{fault_proxy.host}/{unique_repo}-mirror"
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "{ref}"\ntarget = "{target}"\n')
    before = len(fault_proxy.requests)
    assert main(["mirror", str(job)]) == 0
    source = [(r.method, *r.path.rsplit("/", 2)[1:]) for r in fault_proxy.requests[before:]
              if ("/manifests/" in r.path or "/referrers/" in r.path) and f"/{unique_repo}-mirror/" not in r.path]
    # the plan: the tag, the root, the referrers API and the fallback index, 2 referrers read
    # by their listing, the .sig tag (and .att, .sbom), the .sig manifest; then for each of the
    # .sig and the 2 referrers their fallback index and cosign tags. The copy: the cosign tags
    # of the root and of the 2 referrers (the companions are asked where they are copied)
    assert Counter(method for method, _, _ in source) == {"HEAD": 22, "GET": 9}
    digests = [name for method, kind, name in source if (method, kind) == ("GET", "manifests") and ":" in name]
    assert len(digests) == len(set(digests)) == 4  # the root, 2 referrers, the .sig: each read once
    # what the mirror wrote is what the source holds: the signatures verify at the target
    assert main(["verify", f"{target}:v1", "--key", str(public)]) == 0


def test_validate_and_a_modelcar_judge_the_manifest_identify_read(signed, fault_proxy):
    """``validate`` checks the rules on the manifest its family check read; ``k8s modelcar
    --index`` builds from it and its index names it from those bytes: the tag is asked once,
    the manifest read once (without the handing: 2 HEAD and 2 GET; 6 HEAD and 3 GET); and
    validate of that index for containerd reads each entry once."""
    ref, _ = signed
    assert dict(_manifest_requests(fault_proxy, ["validate", ref])) == {"HEAD": 1, "GET": 1}
    # the tag and the root; whether the target holds the model's manifest, each platform's image
    # and the index (5 HEAD in all); the two images and the tagged index written
    assert dict(_manifest_requests(fault_proxy, ["k8s", "modelcar", ref, "--tag", "car", "--index"])) \
        == {"HEAD": 5, "GET": 1, "PUT": 3}
    # the index and its 3 entries, read by the family check, are what containerd's check of an
    # image in the index is judged on (strict: a wrong answer fails); before: 5 GET
    car = ref.rsplit(":", 1)[0] + ":car"
    assert dict(_manifest_requests(fault_proxy, ["validate", car, "--runtime", "containerd", "--strict"])) \
        == {"HEAD": 1, "GET": 4}


def test_a_mirror_carrying_signatures_to_an_artifact_already_there_lists_them_once(
        fault_proxy, unique_repo, tmp_path):
    """An artifact mirrored with its .sig, then given referrer signatures: the plan lists its
    referrers to see the target lacks them, and that listing (with the referrers it read) is
    what its walk and the copy take, not listed and read again."""
    private, _ = key_pair(tmp_path / "k")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", "-q", str(make_model(tmp_path / "m")), ref]) == 0
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "{ref}"\ntarget = "{fault_proxy.host}/{unique_repo}-mirror"\n')
    assert main(["sign", ref, "--key", str(private), "--form", "classic"]) == 0
    assert main(["mirror", str(job)]) == 0
    assert main(["sign", ref, "--key", str(private), "--form", "bundle"]) == 0  # the .sig stays as it is
    assert main(["sign", ref, "--key", str(private), "--form", "oms"]) == 0
    before = len(fault_proxy.requests)
    assert main(["mirror", str(job)]) == 0
    source = [(r.method, *r.path.rsplit("/", 2)[1:]) for r in fault_proxy.requests[before:]
              if ("/manifests/" in r.path or "/referrers/" in r.path) and f"/{unique_repo}-mirror/" not in r.path]
    assert Counter(method for method, _, _ in source) == {"HEAD": 25, "GET": 9}  # 12 GET when listed again
    digests = [name for method, kind, name in source if (method, kind) == ("GET", "manifests") and ":" in name]
    assert len(digests) == len(set(digests)) == 4  # the root, 2 referrers, the .sig: each read once
