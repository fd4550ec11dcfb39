"""serve on an open port against greedy and slow clients, as an attacker runs them (issue 52,
items 1, 2 and 6): serve as a process on loopback, raw sockets for bodies, heads and readers
that stop reading, huggingface_hub for the honest client. serve's peak RSS is read from
/proc (VmHWM)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serving import stop, wait_until_healthy

from ocibridge.cli import main
from tests.modelgen import make_bert_model

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    def __init__(self, proc: subprocess.Popen[bytes], port: int):
        self.proc, self.port = proc, port
        self.url = f"http://127.0.0.1:{port}"

    def peak_rss(self) -> int:
        """serve's peak resident memory so far, in bytes."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


@contextlib.contextmanager
def serve_process(tmp_path: Path, *args: str) -> Iterator[tuple[ServeProcess, list[str]]]:
    """``ocibridge serve ARGS`` as a process; yields it and, once it stopped, its log lines."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path / "serve-cache")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", *args, "--no-access-log",
                                 "--listen", f"127.0.0.1:{port}"], env=env, stdout=out, stderr=subprocess.STDOUT)
    served = ServeProcess(proc, port)
    lines: list[str] = []
    try:
        wait_until_healthy(proc, served.url, log)
        yield served, lines
    finally:
        stop(proc)
        lines += log.read_text(errors="replace").splitlines()


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A layout holding acme/tiny and acme/big (a 64 MiB weights file)."""
    root = tmp_path_factory.mktemp("hostile-serve")
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(root / "lay", create=True)
    tiny = make_bert_model(root / "tiny")
    assert main(["push", str(tiny), f"oci:{root}/lay:acme/tiny:latest", "-q"]) == 0
    big = make_bert_model(root / "big", weights=1)
    (big / "model.safetensors").write_bytes(os.urandom(64 * MIB))
    assert main(["push", str(big), f"oci:{root}/lay:acme/big:latest", "-q"]) == 0
    return root


def raw(port: int, head: bytes, body: bytes = b"", timeout: float = 10) -> bytes:
    """What serve answers a request written as given, until it closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head + body)
        got = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := s.recv(65536):
                got += chunk
                if b"\r\n\r\n" in got and b"connection: close" not in got.lower():
                    end = got.index(b"\r\n\r\n") + 4
                    length = next((int(line.split(b":")[1]) for line in got[:end].split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), None)
                    if length is not None and len(got) >= end + length:
                        break
        return got


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def send_until_refused(port: int, head: bytes, chunk: bytes, most: int) -> tuple[int, bytes]:
    """Write ``head`` then ``chunk`` over and over (at most ``most`` bytes) until serve stops
    taking them; the bytes written, and its answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    sent = 0
    try:
        s.sendall(head)
        s.settimeout(5)
        with contextlib.suppress(OSError):
            while sent < most:
                s.sendall(chunk)
                sent += len(chunk)
        s.settimeout(5)
        got = b""
        with contextlib.suppress(OSError):
            while data := s.recv(65536):
                got += data
        return sent, got
    finally:
        s.close()


AUTH = b"Authorization: Bearer t0ken\r\n"


def test_bodies_and_heads_are_bounded_before_they_are_read(layout, tmp_path):
    """A 1 GB body is refused once the limit is read, declared or chunked; the token and the
    repository are checked before a body is read; long lists, deep nesting and large heads are
    refused; serve's RSS stays under 200 MiB."""
    from ocibridge.hubserver.guard import BODY_MAX, HEAD_MAX, PATHS_MAX

    (tmp_path / "tokens").write_text("t0ken\n")
    with serve_process(tmp_path, f"oci:{layout}/lay", "--token-file", str(tmp_path / "tokens")) as (served, log):
        route = b"POST /api/models/acme/tiny/paths-info/main HTTP/1.1\r\nHost: x\r\n"
        # declared: 413 at once, the connection closed, not a byte of the body read
        answer = raw(served.port, route + AUTH + b"Content-Length: 1000000000\r\n\r\n")
        assert status_of(answer) == 413 and b"connection: close" in answer.lower()
        assert b'"error"' in answer and b"x-error-message" in answer.lower()
        # chunked, 1 GB: refused after the limit (and the socket buffers) is read
        chunk = b"%x\r\n%s\r\n" % (MIB, b"p" * MIB)
        sent, answer = send_until_refused(
            served.port, route + AUTH + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunk, 1024 * MIB)
        assert status_of(answer) == 413
        assert sent < BODY_MAX + 64 * MIB  # what the kernel's buffers hold besides
        # no token, no such repository: answered before the body is read (the connection closed after)
        no_token = raw(served.port, b"GET /api/models/acme/tiny HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(no_token) == 401 and b"no token was sent" in no_token
        for head, code in ((route, 401), (route.replace(b"acme/tiny", b"acme/none") + AUTH, 404)):
            sent, answer = send_until_refused(
                served.port, head + b"Transfer-Encoding: chunked\r\n\r\n", chunk, 1024 * MIB)
            assert status_of(answer) == code and sent < 64 * MIB, (code, sent)
        # a list longer than the limit, a body nested deeper than Python parses: 400, no traceback
        many = b'{"paths": [' + b",".join([b'"a"'] * (PATHS_MAX + 1)) + b"]}"
        deep = b'{"paths": ' + b"[" * 500_000 + b"]" * 500_000 + b"}"
        for body in (many, deep, b'{"paths": [["a"]]}', b"\xff\xfe"):
            assert len(body) <= BODY_MAX
            answer = raw(served.port, route + AUTH + b"Content-Type: application/json\r\n"
                         + b"Content-Length: %d\r\n\r\n" % len(body), body)
            assert status_of(answer) == 400, answer[:200]
        form = b"&".join([b"paths=a"] * (PATHS_MAX + 1))
        answer = raw(served.port, route + AUTH + b"Content-Type: application/x-www-form-urlencoded\r\n"
                     + b"Content-Length: %d\r\n\r\n" % len(form), form)
        assert status_of(answer) == 400
        # heads: too many headers, or too many bytes of them: 431
        many_headers = b"".join(b"X-H%d: v\r\n" % i for i in range(200))
        assert status_of(raw(served.port, b"GET /healthz HTTP/1.1\r\n" + many_headers + b"\r\n")) == 431
        big_header = b"X-Big: " + b"v" * (HEAD_MAX + 1) + b"\r\n"
        assert status_of(raw(served.port, b"GET /healthz HTTP/1.1\r\n" + big_header + b"\r\n")) == 431
        # an honest request still works
        ok = httpx.post(f"{served.url}/api/models/acme/tiny/paths-info/main", data={"paths": ["config.json"]},
                        headers={"Authorization": "Bearer t0ken"})
        assert ok.status_code == 200 and ok.json()[0]["path"] == "config.json"
        peak = served.peak_rss()
        print(f"serve's peak RSS with 1 GB bodies: {peak / MIB:.0f} MiB")
        assert peak < 200 * MIB
    assert not [line for line in log if "Traceback" in line]


def test_odd_text_in_names_is_a_4xx_in_the_hubs_shape_never_a_header_of_its_own(layout, tmp_path, registry):
    """A NUL, CR or LF in a revision or path reaches no header; a 300-character repo id is not
    found before a registry is asked (never a 502); serve logs no traceback."""
    with serve_process(tmp_path, f"oci:{layout}/lay", f"{registry.host}/hostile") as (served, log):
        for path in (b"/api/models/acme/tiny/revision/%00", b"/api/models/acme/tiny/revision/a%0d%0aX-Evil:%201",
                     b"/acme/tiny/resolve/%00/config.json", b"/acme/tiny/resolve/main/%00%0a",
                     b"/api/models/acme/tiny/tree/%0a%00", b"/api/models/acme%00/tiny",
                     b"/api/models/" + b"a" * 300, b"/api/models/acme/" + b"b" * 300,
                     b"/" + b"a" * 300 + b"/resolve/main/config.json"):
            answer = raw(served.port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer, path
            head = answer.split(b"\r\n\r\n", 1)[0]
            assert 400 <= status_of(answer) < 500, (path, answer[:300])
            assert b"\x00" not in head, head
            assert not [line for line in head.lower().split(b"\r\n") if line.startswith(b"x-evil")], head
            assert b"x-error-message" in head.lower()
        # a repository the registry is asked about: no request log without --debug
        assert httpx.get(f"{served.url}/api/models/acme/none").status_code == 404
    assert not [line for line in log if "HTTP Request" in line], log
    assert not [line for line in log if "Traceback" in line or "Invalid HTTP" in line], log


def stalled_xorb_clients(served: ServeProcess, count: int) -> list[socket.socket]:
    """``count`` connections that ask for a xorb of acme/big and read nothing."""
    head = httpx.head(f"{served.url}/acme/big/resolve/main/model.safetensors")
    grant = httpx.get(head.headers["x-xet-refresh-route"])
    cas, token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
    plan = httpx.get(f"{cas}/v2/reconstructions/{head.headers['x-xet-hash']}",
                     headers={"Authorization": f"Bearer {token}"}).json()
    urls = [fetch["url"] for fetches in plan["xorbs"].values() for fetch in fetches]
    clients = []
    for i in range(count):
        target = urls[i % len(urls)].removeprefix(served.url).encode()
        s = socket.create_connection(("127.0.0.1", served.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        clients.append(s)
    return clients


DOWNLOAD = """
import os, sys, time
from huggingface_hub import hf_hub_download
start = time.monotonic()
got = hf_hub_download("acme/big", "model.safetensors")
took = time.monotonic() - start
assert os.path.getsize(got) == 64 * 1024 * 1024
print(took)
"""


def honest_download(served: ServeProcess, home: Path) -> float:
    """hf_hub_download of acme/big's 64 MiB weights over Xet, in a process of its own with caches
    of its own (hf_xet keeps the chunks it fetched: a second download in one cache asks serve
    for none); the seconds it took."""
    env = {**os.environ, "HF_ENDPOINT": served.url, "HF_HUB_CACHE": str(home / "hub"),
           "HF_XET_CACHE": str(home / "xet"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    for name in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_XET", "HF_TOKEN"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", DOWNLOAD], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


def cut_logged(log: Path, count: int, seconds: float = 60) -> None:
    """Until serve's log says it closed ``count`` connections that read nothing (fails after
    ``seconds``: a bound for a cut never seen, not a speed)."""
    deadline = time.monotonic() + seconds
    while log.read_text(errors="replace").count("read nothing") < count:
        assert time.monotonic() < deadline, f"fewer than {count} stalled connections cut"
        time.sleep(0.2)


def test_clients_that_stop_reading_hold_no_capacity_and_are_cut(layout, tmp_path):
    """64 clients that ask for xorbs and read nothing: an honest hf_hub_download of a 64 MiB file
    over Xet takes at most twice its time on an idle serve; the stalled connections are closed
    after the send timeout; serve's RSS stays under 300 MiB."""
    with serve_process(tmp_path, f"oci:{layout}/lay", "--send-timeout", "6") as (served, log):
        honest_download(served, tmp_path / "warm")  # serve's model cache filled
        idle = honest_download(served, tmp_path / "idle")
        clients = stalled_xorb_clients(served, 64)
        try:
            time.sleep(2)  # every stalled answer has written what the socket takes, and waits
            busy = honest_download(served, tmp_path / "busy")
            peak = served.peak_rss()
            print(f"hf_hub_download of 64 MiB over Xet: idle {idle:.2f} s, beside 64 stalled clients "
                  f"{busy:.2f} s; serve's peak RSS {peak / MIB:.0f} MiB")
            assert busy <= 2 * idle + 1.0  # 1 s for a shared machine's noise
            assert peak < 300 * MIB
            cut_logged(tmp_path / "serve.log", len(clients))  # past the send timeout: every stalled one is cut
            for s in clients:
                s.settimeout(5)
                got = 0
                with contextlib.suppress(ConnectionResetError):
                    while data := s.recv(1 << 20):
                        got += len(data)
                assert got < 16 * MIB  # cut short, not the whole xorb
        finally:
            for s in clients:
                s.close()
    assert not [line for line in log if "Traceback" in line], log


def test_a_plain_download_that_stops_reading_is_cut_after_the_send_timeout(layout, tmp_path):
    """The plain route (and the model-cache fill behind it) gets the same bound: a reader that
    stops is disconnected, and the blob it was streaming is served to others meanwhile."""
    with serve_process(tmp_path, f"oci:{layout}/lay", "--send-timeout", "2", "--xet-min-size", "off") as (served, log):
        s = socket.create_connection(("127.0.0.1", served.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /acme/big/resolve/main/model.safetensors HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(1)
        other = httpx.get(f"{served.url}/acme/big/resolve/main/model.safetensors", timeout=30)
        assert other.status_code == 200 and len(other.content) == 64 * MIB
        cut_logged(tmp_path / "serve.log", 1)  # past the send timeout: the stalled reader is cut
        s.settimeout(5)
        got = 0
        with contextlib.suppress(ConnectionResetError):
            while data := s.recv(1 << 20):
                got += len(data)
        s.close()
        assert got < 64 * MIB
    assert any("read nothing for 2 s" in line for line in log), log


def test_main_of_a_repository_without_the_default_tag_names_its_tags(tmp_path):
    """from_pretrained("a") of a repository with only :v1: the error says which tags exist and
    how to name one (issue 53, item 5)."""
    from starlette.testclient import TestClient

    import ocibridge
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(tmp_path / "lay", create=True)
    assert main(["push", str(make_bert_model(tmp_path / "a")), f"oci:{tmp_path}/lay:a:v1", "-q"]) == 0
    with TestClient(ocibridge.create_app(f"oci:{tmp_path}/lay")) as client:
        r = client.get("/api/models/a")
    assert r.status_code == 404 and r.headers["x-error-code"] == "RevisionNotFound"
    assert "its tags: v1" in r.json()["error"] and "--default-tag" in r.json()["error"]
    assert "revision=" in r.headers["x-error-message"]


def stalled_plain_clients(served: ServeProcess, count: int, path: str) -> list[socket.socket]:
    """``count`` connections that ask for ``path`` on the plain route and read nothing."""
    clients = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", served.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        clients.append(s)
    return clients


def test_plain_readers_that_stop_hold_nothing_others_need_from_a_layout(layout, tmp_path):
    """16 clients that ask a layout source's 64 MiB file on the plain route (a cold model cache:
    the first of them starts its fetch) and read nothing; an honest hf_hub_download of the same
    file beside them takes at most twice its time on an idle serve with a cold cache, not the
    send timeout (issue 52, item 1: the plain route and the layout source)."""
    args = (f"oci:{layout}/lay", "--xet-min-size", "off", "--send-timeout", "10")
    (tmp_path / "idle").mkdir()
    (tmp_path / "busy").mkdir()
    with serve_process(tmp_path / "idle", *args) as (served, log):
        idle = honest_download(served, tmp_path / "idle")
    with serve_process(tmp_path / "busy", *args) as (served, log):
        clients = stalled_plain_clients(served, 16, "/acme/big/resolve/main/model.safetensors")
        try:
            time.sleep(1)  # each stalled answer has started and filled what its socket takes
            busy = honest_download(served, tmp_path / "busy")
            peak = served.peak_rss()
        finally:
            for s in clients:
                s.close()
    print(f"hf_hub_download of 64 MiB on the plain route from a layout, cold cache: idle {idle:.2f} s, "
          f"beside 16 stalled clients {busy:.2f} s; serve's peak RSS {peak / MIB:.0f} MiB")
    assert busy <= 2 * idle + 1.0  # 1 s for a shared machine's noise
    assert not [line for line in log if "Traceback" in line], log


#: (method, path, token sent, status, X-Error-Code) for every route: a layout source must answer
#: each as a registry source does
ROUTES = [
    ("GET", "/api/models/acme/good", "t0ken", 200, None),
    ("GET", "/api/models/acme/good/revision/main", "t0ken", 200, None),
    ("GET", "/api/models/acme/good/tree/main?recursive=true", "t0ken", 200, None),
    ("POST", "/api/models/acme/good/paths-info/main", "t0ken", 200, None),
    ("GET", "/api/models/acme/good/refs", "t0ken", 200, None),
    ("GET", "/api/models/acme/good/xet-read-token/main", "t0ken", 200, None),
    ("HEAD", "/acme/good/resolve/main/config.json", "t0ken", 200, None),
    ("GET", "/acme/good/resolve/main/model.safetensors", "t0ken", 206, None),  # Range: bytes=0-99
    ("GET", "/api/models?search=acme", "t0ken", 200, None),
    ("GET", "/api/models/acme/good", None, 401, None),
    ("GET", "/acme/good/resolve/main/config.json", None, 401, None),
    ("GET", "/api/models/acme/good", "wrong", 401, None),
    ("GET", "/api/models/acme/bad", "t0ken", 403, "GatedRepo"),
    ("GET", "/api/models/acme/bad/tree/main", "t0ken", 403, "GatedRepo"),
    ("HEAD", "/acme/bad/resolve/main/config.json", "t0ken", 403, "GatedRepo"),
    ("GET", "/acme/bad/resolve/main/model.safetensors", "t0ken", 403, "GatedRepo"),
    ("GET", "/api/models/acme/bad/xet-read-token/main", "t0ken", 403, "GatedRepo"),
    ("GET", "/api/models/acme/none", "t0ken", 404, "RepoNotFound"),
    ("GET", "/api/models/acme/good/revision/v9", "t0ken", 404, "RevisionNotFound"),
    ("GET", "/acme/good/resolve/main/none.bin", "t0ken", 404, "EntryNotFound"),
]


@pytest.mark.parametrize("kind", ["registry", "layout"])
def test_a_layout_source_answers_routes_tokens_and_policy_as_a_registry_source(kind, tmp_path, registry,
                                                                               unique_repo, capsys):
    """serve as a process over two sources, the second rejected by --policy (a docker scope for
    the registry's, an oci scope for the layout's directory), behind a token: every route, the
    token and the policy give the same answers from oci:DIR as from a registry prefix (issue 52,
    "serve with an oci:DIR layout source")."""
    import json

    src = make_bert_model(tmp_path / "model", weights=64)
    if kind == "registry":
        good, bad = (f"{registry.host}/{unique_repo}/{side}" for side in ("good", "bad"))
        scopes = {"docker": {bad: [{"type": "reject"}]}}
    else:
        from ocibridge.stores.layout import LayoutStore

        for side in ("good", "bad"):
            LayoutStore(tmp_path / side, create=True)
        good, bad = f"oci:{tmp_path}/good", f"oci:{tmp_path}/bad"
        scopes = {"oci": {str(tmp_path / "bad"): [{"type": "reject"}]}}
    sep = ":" if kind == "layout" else "/"
    for source, name in ((good, "good"), (bad, "bad")):
        assert main(["push", str(src), f"{source}{sep}acme/{name}:latest", "-q"]) == 0
    capsys.readouterr()
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": scopes}))
    (tmp_path / "tokens").write_text("t0ken\n")
    with serve_process(tmp_path, good, bad, "--policy", str(policy), "--token-file", str(tmp_path / "tokens"),
                       "--xet-min-size", "1") as (served, log):
        for method, path, token, status, code in ROUTES:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            if path.endswith("model.safetensors"):
                headers["Range"] = "bytes=0-99"
            body = {"data": {"paths": ["config.json"]}} if method == "POST" else {}
            answer = httpx.request(method, f"{served.url}{path}", headers=headers, timeout=30, **body)
            assert (answer.status_code, answer.headers.get("x-error-code")) == (status, code), (kind, method, path)
            if status == 206:
                assert answer.content == (src / "model.safetensors").read_bytes()[:100]
        assert "no token was sent" in httpx.get(f"{served.url}/api/models/acme/good").headers["x-error-message"]
        listed = httpx.get(f"{served.url}/api/models", headers={"Authorization": "Bearer t0ken"}).json()
        assert {m["id"] for m in listed} == {"acme/good", "acme/bad"}
        # the honest client, with its token: the good model whole over Xet, the bad one refused
        env = {**os.environ, "HF_ENDPOINT": served.url, "HF_HUB_CACHE": str(tmp_path / "hub"),
               "HF_XET_CACHE": str(tmp_path / "xet"), "HF_TOKEN": "t0ken", "HF_HUB_DISABLE_TELEMETRY": "1"}
        env.pop("HF_HUB_OFFLINE", None)
        script = ("from huggingface_hub import snapshot_download, hf_hub_download\n"
                  "from huggingface_hub.errors import GatedRepoError\n"
                  "print(snapshot_download('acme/good'))\n"
                  "try:\n    hf_hub_download('acme/bad', 'config.json')\n"
                  "except GatedRepoError:\n    print('refused')\n")
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        where, said = done.stdout.split()[-2:]
        assert said == "refused"
        assert (Path(where) / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert not [line for line in log if "Traceback" in line], log
