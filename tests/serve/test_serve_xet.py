"""serve over Xet (issue 40): huggingface_hub with hf_xet, as it runs by default, downloads the
files serve offers over Xet on parallel connections and gets the model's exact bytes, each
xorb sent only from a verified file."""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from pathlib import Path

import httpx
import httpx2
import pytest
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, snapshot_download
from serving import files_of, hub_retries_at_once, own_settings, point_hub_at, serving, wait_until_healthy
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.hubserver.access import TOKEN_LIFE, Signer
from ocibridge.hubserver.xet import xorbs as xet
from tests.modelgen import make_bert_model

SIZE = 2 * xet.XORB_CHUNKS * xet.XET_CHUNK + 5 * xet.XET_CHUNK + 1000  # 2 xorbs and a short third


def pushed_big(registry, root: Path, chunks: list[str]) -> tuple[Path, str]:
    """acme/big (weights of ~128 MiB: three xorbs, the last chunk short) pushed with ``chunks``
    under a prefix of its own, once for the module (the tests only read it, each through a serve,
    cache and fault proxy of its own): (its files, the prefix)."""
    src = make_bert_model(root / "big", weights=1)
    (src / "model.safetensors").write_bytes(os.urandom(SIZE))
    prefix = f"{registry.host}/{new_repo()}"
    with own_settings(root):
        assert main(["push", str(src), f"{prefix}/acme/big:latest", "-q", *chunks]) == 0
    return src, prefix


@pytest.fixture(scope="module")
def model(registry, tmp_path_factory):
    """acme/big, its manifest binding a chunk table (as a default push does from 64 MiB)."""
    return pushed_big(registry, tmp_path_factory.mktemp("xet-tabled"), ["--chunks", "--chunk-threshold", "1M"])


@pytest.fixture(scope="module")
def untabled(registry, tmp_path_factory):
    return pushed_big(registry, tmp_path_factory.mktemp("xet-untabled"), ["--no-chunks"])


@pytest.fixture
def hub(tmp_path) -> Path:
    return tmp_path / "hf-home" / "hub"


def decode_xorb(data: bytes) -> bytes:
    """The file bytes of a xorb range as sent: 8-byte chunk headers (Xet's format, read here
    independently of hf_xet) each before its stored bytes."""
    out, at = bytearray(), 0
    while at < len(data):
        version, stored, scheme, length = data[at], int.from_bytes(data[at + 1:at + 4], "little"), \
            data[at + 4], int.from_bytes(data[at + 5:at + 8], "little")
        assert (version, scheme) == (0, 0) and stored == length <= 128 * 1024
        out += data[at + 8:at + 8 + length]
        at += 8 + length
    assert at == len(data)
    return bytes(out)


def test_snapshot_download_over_xet_gets_the_exact_bytes_from_a_cold_server(model, hub, monkeypatch):
    src, prefix = model
    weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    with serving([prefix], xet_min=1024 * 1024) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        where = Path(snapshot_download("acme/big"))
        assert files_of(where) == files_of(src)
        assert (hub / "models--acme--big" / "blobs" / weights).is_file()  # named by SHA-256, as before
        xorbs = [p for _, p in served.requests if "/xorbs/" in p]
        assert len({p.rsplit("/", 1)[1] for p in xorbs}) == 3  # all three xorbs, by hf_xet
        assert any("/v2/reconstructions/" in p for _, p in served.requests)
        # the weights went over Xet, not the plain route; the small files did not
        gets = [p for m, p in served.requests if m == "GET" and "/resolve/" in p]
        assert not [p for p in gets if p.endswith("model.safetensors")]
        assert [p for p in gets if p.endswith("config.json")]
        from ocibridge.cache.modelcache import ModelCache

        # kept in the model cache, checked by the table alone: under the table's content key, not the digest
        assert not ModelCache().blobs.blob_path(f"sha256:{weights}").exists()
        kept = [p for p in served.blobs.layer_files.layers.iterdir() if not p.name.startswith(".")]
        assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in kept] == [weights]
        assert served.blobs.fetched >= 1
        served.requests.clear()
        assert Path(snapshot_download("acme/big")) == where
        assert served.requests == [("GET", "/api/models/acme/big/revision/main")]  # the Hub cache answers


def test_hf_hub_download_and_file_system_over_xet_from_a_warm_server(model, hub, monkeypatch, tmp_path):
    src, prefix = model
    weights = (src / "model.safetensors").read_bytes()
    with serving([prefix], xet_min=1024 * 1024) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        assert Path(hf_hub_download("acme/big", "model.safetensors")).read_bytes() == weights
        fetched = served.blobs.fetched
        point_hub_at(monkeypatch, served.url, tmp_path / "hub2", xet=True)
        served.requests.clear()
        assert Path(hf_hub_download("acme/big", "model.safetensors")).read_bytes() == weights
        assert served.blobs.fetched == fetched  # from the model cache: no second fetch
        assert [p for _, p in served.requests if "/xorbs/" in p]
        fs = HfFileSystem(skip_instance_cache=True)
        with fs.open("acme/big/model.safetensors", "rb", block_size=4096) as f:
            f.seek(SIZE - 70_000)
            assert f.read(50_000) == weights[SIZE - 70_000:SIZE - 20_000]
        entries = {e.path: e for e in HfApi().list_repo_tree("acme/big")}
        assert entries["model.safetensors"].xet_hash == xet.file_id(hashlib.sha256(weights).hexdigest(), SIZE)
        assert entries["config.json"].xet_hash is None  # under --xet-min-size: the plain route


def test_a_registry_blob_without_a_table_goes_over_xet_once_serve_holds_it(tmp_path, hub, monkeypatch, untabled):
    """Without a chunk table a xorb could go out only after the whole blob is fetched (hf_xet
    gives up after 300 s without a byte): such a file is offered over Xet once serve holds it."""
    src, prefix = untabled
    with serving([prefix], xet_min=1024 * 1024) as served:
        url = f"{served.url}/acme/big/resolve/main/model.safetensors"
        assert "x-xet-hash" not in httpx.head(url).headers
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        assert files_of(Path(snapshot_download("acme/big"))) == files_of(src)  # the plain route
        assert not [p for _, p in served.requests if "/xorbs/" in p]
        assert "x-xet-hash" in httpx.head(url).headers
        assert [e.xet_hash is not None for e in HfApi().list_repo_tree("acme/big") if e.path == "model.safetensors"] \
            == [True]
        point_hub_at(monkeypatch, served.url, tmp_path / "hub2", xet=True)
        assert files_of(Path(snapshot_download("acme/big"))) == files_of(src)
        assert [p for _, p in served.requests if "/xorbs/" in p]  # now over Xet


def test_reconstruction_ranges_and_xorb_bytes_decode_to_the_file(model, hub, monkeypatch):
    src, prefix = model
    weights = (src / "model.safetensors").read_bytes()
    sha = hashlib.sha256(weights).hexdigest()
    with serving([prefix], xet_min=1024 * 1024) as served:
        head = httpx.head(f"{served.url}/acme/big/resolve/main/model.safetensors")
        name = head.headers["x-xet-hash"]
        assert name == xet.file_id(sha, SIZE)
        grant = httpx.get(head.headers["x-xet-refresh-route"])
        cas, token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
        assert grant.json()["casUrl"] == cas
        rng = random.Random(7)
        cases = [(0, SIZE), (SIZE - 1, SIZE), (xet.XET_CHUNK - 1, xet.XET_CHUNK + 1),
                 (xet.XORB_CHUNKS * xet.XET_CHUNK - 5, xet.XORB_CHUNKS * xet.XET_CHUNK + 5)]
        cases += [tuple(sorted(rng.sample(range(SIZE + 1), 2))) for _ in range(4)]
        for version in (1, 2):
            for start, end in cases:
                r = httpx.get(f"{cas}/v{version}/reconstructions/{name}",
                              headers={"Authorization": f"Bearer {token}", "Range": f"bytes={start}-{end - 1}"})
                assert r.status_code == 200, r.text
                plan = r.json()
                got = bytearray()
                for term in plan["terms"]:
                    places = plan["fetch_info" if version == 1 else "xorbs"][term["hash"]]
                    if version == 1:
                        place = next(p for p in places if p["range"] == term["range"])
                        url, span = place["url"], place["url_range"]
                    else:
                        place = next(p for p in places if p["ranges"][0]["chunks"] == term["range"])
                        url, span = place["url"], place["ranges"][0]["bytes"]
                    body = httpx.get(url, headers={"Range": f"bytes={span['start']}-{span['end']}"})
                    assert body.status_code == 206
                    piece = decode_xorb(body.content)
                    assert len(piece) == term["unpacked_length"]
                    got += piece
                skip = plan["offset_into_first_range"]
                assert bytes(got[skip:skip + end - start]) == weights[start:end], (version, start, end)
        r = httpx.get(f"{cas}/v2/reconstructions/{name}",
                      headers={"Authorization": f"Bearer {token}", "Range": f"bytes={SIZE}-{SIZE + 10}"})
        assert r.status_code == 416  # past the end: how hf_xet learns it has all
        r = httpx.get(f"{cas}/v2/reconstructions/{'0' * 64}", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 404


@pytest.mark.parametrize("table", [True, False], ids=["chunk-table", "no-table"])
def test_a_tampered_blob_sends_no_wrong_byte_and_the_client_commits_nothing(hub, monkeypatch, request, fault_proxy,
                                                                           table):
    """With a chunk table, the xorbs before the wrong chunk go out as the fetch checks them;
    without, no xorb goes out before the whole blob matched its digest."""
    from support.faultproxy import corrupt_at

    src, prefix = request.getfixturevalue("model" if table else "untabled")
    weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    # the blob's byte SIZE - 100 is wrong in every answer that carries it: a fetch in ranged parts
    # (part_governor.py, when one stream is under FAST_STREAM) asks the last part on its own
    wrong = SIZE - 100
    fault_proxy.add("GET", f"/blobs/sha256:{weights}", corrupt_at(wrong), times=1000)
    monkeypatch.setenv("HF_XET_CLIENT_RETRY_MAX_ATTEMPTS", "1")
    hub_retries_at_once(monkeypatch)  # the plain route's cut body is resumed 8 times, cut each time
    with serving([f"{fault_proxy.host}/{prefix.split('/', 1)[1]}"], xet_min=1024 * 1024) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        # with a table: hf_xet's error once the xorb with the wrong chunk fails; without, the file is
        # not offered over Xet while serve lacks it, and the plain route's body is cut
        with pytest.raises(RuntimeError if table else httpx2.HTTPError):
            hf_hub_download("acme/big", "model.safetensors")

        def carried_wrong_byte(answer) -> bool:
            start = int((answer.range or "bytes=0-").removeprefix("bytes=").split("-")[0])
            return answer.action == "corrupt_at" and start <= wrong < start + answer.response_bytes

        assert any(map(carried_wrong_byte, fault_proxy.requests))  # the premise: serve got the wrong byte
        folder = hub / "models--acme--big"
        assert not (folder / "blobs" / weights).exists()
        assert not any(p.name == "model.safetensors" for p in folder.rglob("*"))
        from ocibridge.cache.modelcache import ModelCache

        assert not ModelCache().blobs.blob_path(f"sha256:{weights}").exists()
        assert Path(hf_hub_download("acme/big", "config.json")).read_bytes() == (src / "config.json").read_bytes()
        # the xorb that holds the wrong chunk is refused before its first byte (asked directly
        # when the client never got to the Xet routes)
        grant = httpx.get(f"{served.url}/api/models/acme/big/xet-read-token/main")
        plan = httpx.get(f"{grant.headers['x-xet-cas-url']}/v2/reconstructions/{xet.file_id(weights, SIZE)}",
                         headers={"Authorization": f"Bearer {grant.headers['x-xet-access-token']}"}).json()
        urls = {k: places[0]["url"].removeprefix(served.url)
                for k, places in enumerate(plan["xorbs"][t["hash"]] for t in plan["terms"])}
        last = httpx.get(f"{served.url}{urls[2]}")
        assert last.status_code == 502 and "digest" in last.headers["x-error-message"]
        first = httpx.get(f"{served.url}{urls[0]}", headers={"Range": "bytes=0-999"})
        if not table:  # nothing before the whole blob is verified
            assert first.status_code == 502 and "digest" in first.headers["x-error-message"]
            return
        assert first.status_code == 206, first.headers.get("x-error-message")  # chunks the table checked
        assert first.content[:8] == bytes([0, 0, 0, 1, 0, 0, 0, 1])  # a 64 KiB chunk stored as is
        assert first.content[8:] == (src / "model.safetensors").read_bytes()[:992]
        assert not ModelCache().blobs.blob_path(f"sha256:{weights}").exists()


def test_read_tokens_grant_xet_access_and_unsigned_urls_are_refused(model, hub, monkeypatch):
    src, prefix = model
    with serving([prefix], tokens=("s3cret",), xet_min=1024 * 1024) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        monkeypatch.setenv("HF_TOKEN", "s3cret")
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hub / "no-token"))
        where = Path(snapshot_download("acme/big", token="s3cret"))
        assert files_of(where) == files_of(src)
        signed = next(p for _, p in served.requests if "/xorbs/" in p)
        base = f"{served.url}/acme/big/resolve/main/model.safetensors"
        assert httpx.head(base).status_code == 401
        head = httpx.head(base, headers={"Authorization": "Bearer s3cret"})
        route = head.headers["x-xet-refresh-route"]
        assert httpx.get(route).status_code == 401  # the grant needs the read token
        grant = httpx.get(route, headers={"Authorization": "Bearer s3cret"})
        cas, token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
        name = head.headers["x-xet-hash"]
        assert httpx.get(f"{cas}/v2/reconstructions/{name}").status_code == 401
        read_token = {"Authorization": "Bearer s3cret"}  # a read token is no Xet token
        assert httpx.get(f"{cas}/v2/reconstructions/{name}", headers=read_token).status_code == 401
        plan = httpx.get(f"{cas}/v2/reconstructions/{name}", headers={"Authorization": f"Bearer {token}"}).json()
        url = next(iter(plan["xorbs"].values()))[0]["url"]
        assert httpx.get(url, headers={"Range": "bytes=0-99"}).status_code == 206
        assert httpx.get(url.split("?")[0], headers={"Range": "bytes=0-99"}).status_code == 403
        assert httpx.get(url.replace("signature=", "signature=0"), headers={"Range": "bytes=0-99"}).status_code == 403
        other = cas.replace("/acme/big", "/acme/other")
        assert httpx.get(f"{other}/v2/reconstructions/{name}",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 401  # another repo's scope
        assert signed.startswith("/xet/")
        # odd text where numbers and signatures go: a refusal, never a server error
        path = url.split("?")[0]
        odd = [(f"{path}?expires=%C2%B2&signature=x", 403), (f"{path}?expires=9&signature=%C3%A9", 403),
               (path.rsplit("/", 1)[0] + "/%C2%B2", 404), (path.rsplit("/", 1)[0] + "/" + "9" * 4000, 404)]
        for bad, status in odd:
            assert httpx.get(bad, headers={"Range": "bytes=0-9"}).status_code == status, bad
        weird = {"Authorization": "Bearer \u00b2.\u00e9".encode()}
        assert httpx.get(f"{cas}/v2/reconstructions/{name}", headers=weird).status_code == 401


def test_grants_expire():
    now = [1000.0]
    grants = Signer([b"a", b"b"], clock=lambda: now[0])
    token, expires = grants.grant("acme/big@abc")
    assert grants.allows(token, "acme/big@abc") and not grants.allows(token, "acme/big@abd")
    url = grants.signed("/xet/abc/acme/big/xorbs/00/1/0", expires)
    path, query = url.split("?")
    fields = dict(kv.split("=") for kv in query.split("&"))
    assert grants.url_allowed(path, fields["expires"], fields["signature"])
    assert not grants.url_allowed(path + "1", fields["expires"], fields["signature"])
    assert not grants.url_allowed(path, str(int(fields["expires"]) + 1), fields["signature"])
    now[0] += TOKEN_LIFE + 1
    assert not grants.allows(token, "acme/big@abc")
    assert not grants.url_allowed(path, fields["expires"], fields["signature"])
    same = Signer([b"b", b"a"], clock=lambda: 1000.0)  # another replica, the same token file
    assert same.allows(token, "acme/big@abc")
    assert Signer([], clock=lambda: 0).allows("anything", "x")  # no read tokens: an open server


def test_xet_min_size_and_public_url_flags_refuse_nonsense_in_one_line(capsys):
    for flag, value in (("--xet-min-size", "lots"), ("--public-url", "ftp://x"), ("--public-url", "hub.example")):
        assert main(["serve", "oci:/nonexistent", flag, value]) == 2
        err = capsys.readouterr().err
        assert flag in err and len(err.strip().splitlines()) == 1, err


def test_public_url_names_where_clients_reach_serve(model):
    """Behind a proxy that terminates TLS, the URLs serve hands out name the proxy."""
    _, prefix = model
    with serving([prefix], xet_min=1024 * 1024, public_url="https://hub.example/models/") as served:
        head = httpx.head(f"{served.url}/acme/big/resolve/main/model.safetensors")
        route = head.headers["x-xet-refresh-route"]
        assert route.startswith("https://hub.example/models/api/models/acme/big/xet-read-token/")
        grant = httpx.get(served.url + route.removeprefix("https://hub.example/models"))
        cas = grant.headers["x-xet-cas-url"]
        assert cas.startswith("https://hub.example/models/xet/")
        plan = httpx.get(served.url + cas.removeprefix("https://hub.example/models")
                         + f"/v2/reconstructions/{head.headers['x-xet-hash']}").json()
        url = next(iter(plan["xorbs"].values()))[0]["url"]
        assert url.startswith("https://hub.example/models/xet/")
        assert httpx.get(served.url + url.removeprefix("https://hub.example/models"),
                         headers={"Range": "bytes=0-7"}).content == bytes([0, 0, 0, 1, 0, 0, 0, 1])


def test_every_file_over_xet_from_a_layout_with_tar_layers(tmp_path, hub, monkeypatch, capsys):
    """Files inside tar layers are served from the verified snapshot, over Xet like the others."""
    from ocibridge.hubserver.repo.files import FileLists
    from ocibridge.stores.layout import LayoutStore

    src = make_bert_model(tmp_path / "tiny")
    LayoutStore(tmp_path / "lay", create=True)
    assert main(["push", str(src), f"oci:{tmp_path}/lay:acme/tiny:latest", "-q", "--group", "doc"]) == 0
    capsys.readouterr()
    with serving([f"oci:{tmp_path}/lay"], xet_min=1) as served:
        point_hub_at(monkeypatch, served.url, hub, xet=True)
        assert files_of(Path(snapshot_download("acme/tiny"))) == files_of(src)
        resolved = served.catalog.resolve("acme/tiny", None)
        held = FileLists(served.app.state.serve.lists.cache).of(resolved).files
        assert any(f.local is not None for f in held.values())  # a file of a tar layer was among them
        assert not [p for m, p in served.requests if m == "GET" and "/resolve/" in p]  # all over Xet
        assert len({p.split("/xorbs/")[1].split("/")[0] for _, p in served.requests if "/xorbs/" in p}) == len(held)


def test_a_client_that_leaves_mid_xorb_frees_its_turn(model, monkeypatch):
    """Xorb answers are sent a bounded number at once (serve's memory); one cut short by its
    client gives its turn back, so the next answers are not stuck behind it."""
    _, prefix = model
    monkeypatch.setattr(xet, "SENDING_AT_ONCE", 1)
    with serving([prefix], xet_min=1024 * 1024) as served:
        head = httpx.head(f"{served.url}/acme/big/resolve/main/model.safetensors")
        grant = httpx.get(head.headers["x-xet-refresh-route"])
        cas, token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
        plan = httpx.get(f"{cas}/v2/reconstructions/{head.headers['x-xet-hash']}",
                         headers={"Authorization": f"Bearer {token}"}).json()
        url = plan["xorbs"][plan["terms"][0]["hash"]][0]["url"]
        for _ in range(3):
            with httpx.stream("GET", url, timeout=10) as r:  # 64 MiB, left after its first bytes
                assert r.status_code == 200
                next(r.iter_bytes())
        whole = httpx.get(url, timeout=10)
        assert whole.status_code == 200 and len(whole.content) == xet.xorb_size(SIZE, xet.ISSUED, 0)


def test_a_xorb_that_waits_too_long_for_the_registry_is_a_503_to_ask_again(model, fault_proxy, monkeypatch):
    """hf_xet gives up on an answer silent for 300 s; serve answers 503 (which it retries)
    once a xorb's first bytes have waited FIRST_BYTE_WAIT, then serves it when they are in."""
    from support import delay

    from ocibridge.hubserver.xet import routes as xetroutes

    src, prefix = model
    weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    answered = threading.Event()  # the registry is silent until the first 503 was seen (30 s at most)
    fault_proxy.add("GET", f"/blobs/sha256:{weights}", delay(30, answered), times=1000)
    monkeypatch.setattr(xetroutes, "FIRST_BYTE_WAIT", 0.3)
    with serving([f"{fault_proxy.host}/{prefix.split('/', 1)[1]}"], xet_min=1024 * 1024) as served:
        grant = httpx.get(f"{served.url}/api/models/acme/big/xet-read-token/main")
        plan = httpx.get(f"{grant.headers['x-xet-cas-url']}/v2/reconstructions/{xet.file_id(weights, SIZE)}",
                         headers={"Authorization": f"Bearer {grant.headers['x-xet-access-token']}"}).json()
        url = plan["xorbs"][plan["terms"][2]["hash"]][0]["url"]
        try:
            first = httpx.get(url, timeout=30)
        finally:
            answered.set()
        assert first.status_code == 503 and first.headers["retry-after"] == "5"
        deadline = time.monotonic() + 30
        while (again := httpx.get(url, timeout=30)).status_code == 503:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert again.status_code == 200
        third = 2 * xet.XORB_CHUNKS * xet.XET_CHUNK
        assert decode_xorb(again.content) == (src / "model.safetensors").read_bytes()[third:]


def test_xet_over_https_with_a_private_ca(model, tmp_path):
    """serve --cert/--key: hf_xet (rustls, the system's trust) and huggingface_hub both trust a
    private CA named by SSL_CERT_FILE, and the weights go over Xet."""
    import ssl
    import subprocess
    import sys

    from support.certs import make_tls_files
    from support.registry import free_port

    src, prefix = model
    tls = make_tls_files(tmp_path / "tls")
    port = free_port()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", prefix, "--listen", f"127.0.0.1:{port}",
                             "--cert", str(tls.cert_file), "--key", str(tls.key_file), "--xet-min-size", "1M"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    url = f"https://127.0.0.1:{port}"
    trust = ssl.create_default_context(cafile=tls.ca_file)
    try:
        wait_until_healthy(proc, url, verify=trust)
        client = {**env, "HF_ENDPOINT": url, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HOME": str(tmp_path / "home"),
                  "SSL_CERT_FILE": str(tls.ca_file), "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "0"}
        done = subprocess.run([sys.executable, "-c", "from huggingface_hub import snapshot_download as s; "
                               "print(s('acme/big'))"], env=client, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert files_of(Path(done.stdout.strip().splitlines()[-1])) == files_of(src)
    finally:
        proc.terminate()
        log = proc.communicate(timeout=60)[0].decode()
    assert "/xorbs/" in log and "/v2/reconstructions/" in log  # the weights went over Xet, over TLS


def test_one_token_holds_at_most_its_share_of_the_send_permits(model, monkeypatch):
    """A client (a read token) whose connections keep their send permits (readers just fast
    enough not to stall, here: the stall give-back off) holds at most its share: another
    token's xorb is sent at once, not after the first client's answers (issue 52, item 1)."""
    import functools
    import socket

    from ocibridge.hubserver import guard

    _, prefix = model
    monkeypatch.setattr(xet, "SENDING_AT_ONCE", 4)
    monkeypatch.setattr(xet, "SHARE", 2)
    # a greedy answer is never cut as stalled while the test runs: the honest one cannot get
    # its permit that way, only by the share
    monkeypatch.setattr(guard, "Limits", functools.partial(guard.Limits, stall=600.0))
    with serving([prefix], tokens=("greedy", "honest"), xet_min=1024 * 1024) as served:

        def xorb_urls(token: str) -> list[str]:
            auth = {"Authorization": f"Bearer {token}"}
            head = httpx.head(f"{served.url}/acme/big/resolve/main/model.safetensors", headers=auth)
            grant = httpx.get(head.headers["x-xet-refresh-route"], headers=auth)
            cas, xet_token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
            plan = httpx.get(f"{cas}/v2/reconstructions/{head.headers['x-xet-hash']}",
                             headers={"Authorization": f"Bearer {xet_token}"}).json()
            return [plan["xorbs"][term["hash"]][0]["url"] for term in plan["terms"]]

        greedy, honest = xorb_urls("greedy"), xorb_urls("honest")
        assert "client=" in greedy[0] and greedy[0].split("client=")[1] != honest[0].split("client=")[1]
        assert httpx.get(honest[0], timeout=30).status_code == 200  # the blob is in the model cache
        held = []
        for i in range(2 * xet.SHARE):  # each asks a 64 MiB xorb and reads nothing
            s = socket.create_connection(("127.0.0.1", int(served.url.rsplit(":", 1)[1])))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET " + greedy[i % 2].removeprefix(served.url).encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            held.append(s)
        try:
            time.sleep(1)  # the greedy answers have their permits (and wait for more)
            try:  # the greedy ones keep their permits throughout: only the share lets this through
                answer = httpx.get(honest[1], timeout=60)
            except httpx.TimeoutException:
                pytest.fail("the honest client waited behind the greedy ones' permits")
            assert answer.status_code == 200 and len(answer.content) == xet.xorb_size(SIZE, xet.ISSUED, 1)
            # a URL signed for one client is not another's
            forged = honest[1].replace(honest[1].split("client=")[1].split("&")[0],
                                       greedy[1].split("client=")[1].split("&")[0])
            assert httpx.get(forged).status_code == 403
        finally:
            for s in held:
                s.close()
