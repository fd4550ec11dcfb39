"""A hostile Hugging Face Hub endpoint, run as its own process (``python -m
tests.support.hostile_hub MODE PORT_FILE LOG_FILE``): it answers what huggingface_hub asks of a
Hub for ``acme/tiny`` at one commit (refs, the recursive tree, HEAD and GET of ``resolve``), and
lies the way MODE says:

- ``honest``: one file, listed as it is;
- ``traversal``, ``absolute``, ``nul``: the tree lists ``../escape.txt``, ``/tmp/escape.txt``,
  ``a\\x00b.txt``;
- ``many``: the tree lists 250,000 files (pages of 50,000, as the Hub pages it);
- ``mismatch``: an LFS file whose bytes do not hash to the sha256 listed;
- ``redirect``: ``resolve`` answers 302 to the same server under another host name
  (``localhost`` for ``127.0.0.1``), where a token must not follow;
- ``metadata``: ``resolve`` answers 302 to the cloud's metadata address (169.254.169.254), where
  no client of ocibridge may connect.

Every request is logged as one JSON line (method, host, path, whether an Authorization header
came) to LOG_FILE, so a test sees what the client sent where.
"""

from __future__ import annotations

import hashlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from .tiny_http import send

REPO = "acme/tiny"
COMMIT = "c0ffee" + "0" * 34
BODY = b'{"hidden_size": 8}\n'
FORGED = b"\x00" * 64  # what mismatch sends in place of WEIGHTS
WEIGHTS = b"\x01" * 64
PAGE = 50_000
MANY = 250_000


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()  # noqa: S324 - git's name


def files(mode: str) -> dict[str, bytes]:
    found = {"config.json": BODY}
    if mode == "mismatch":
        found["model.safetensors"] = WEIGHTS
    return found


def tree(mode: str) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for path, data in files(mode).items():
        entry: dict[str, object] = {"type": "file", "path": path, "size": len(data), "oid": git_blob(data)}
        if path.endswith(".safetensors"):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
        entries.append(entry)
    odd = {"traversal": "../escape.txt", "absolute": "/tmp/escape.txt", "nul": "a\x00b.txt"}.get(mode)
    if odd is not None:
        entries.append({"type": "file", "path": odd, "size": len(BODY), "oid": git_blob(BODY)})
    return entries


class Handler(BaseHTTPRequestHandler):
    mode = "honest"
    log_file = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        return

    def _log(self) -> None:
        with open(self.log_file, "a") as f:
            f.write(json.dumps({"method": self.command, "host": self.headers.get("Host", ""),
                                "path": self.path, "auth": "Authorization" in self.headers}) + "\n")

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        self._log()
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == f"/api/models/{REPO}/refs":
            self._json({"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": COMMIT}],
                        "tags": [], "converts": []})
        elif path.startswith(f"/api/models/{REPO}/tree/"):
            self._tree(url.query)
        elif path.startswith(f"/api/models/{REPO}/revision/"):
            self._json({"id": REPO, "sha": COMMIT, "siblings": [{"rfilename": e["path"]} for e in tree(self.mode)]})
        elif path.startswith(f"/{REPO}/resolve/"):
            self._resolve(path.split("/", 5)[5])
        else:
            send(self, 404, b'{"error": "not found"}', {"X-Error-Code": "EntryNotFound"})

    def _json(self, doc: object, headers: dict[str, str] | None = None) -> None:
        send(self, 200, json.dumps(doc).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _tree(self, query: str) -> None:
        if self.mode != "many":
            self._json(tree(self.mode))
            return
        start = int(query.split("cursor=", 1)[1].split("&", 1)[0]) if "cursor=" in query else 0
        page = [{"type": "file", "path": f"f/{i}.txt", "size": 1, "oid": "0" * 40}
                for i in range(start, min(start + PAGE, MANY))]
        headers = {}
        if start + PAGE < MANY:
            host = self.headers.get("Host", "")
            nxt = f"http://{host}/api/models/{REPO}/tree/{COMMIT}?recursive=true&cursor={start + PAGE}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._json(page, headers)

    def _resolve(self, rel: str) -> None:
        data = files(self.mode).get(rel)
        if data is None:
            send(self, 404, b"", {"X-Error-Code": "EntryNotFound"})
            return
        lfs = rel.endswith(".safetensors")
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob(data)
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"', "X-Linked-Etag": f'"{etag}"',
                   "X-Linked-Size": str(len(data))}
        host = self.headers.get("Host", "")
        if self.mode == "redirect" and host.startswith("127.0.0.1"):
            port = host.rsplit(":", 1)[1]
            send(self, 302, b"", {**headers, "Location": f"http://localhost:{port}/{REPO}/resolve/{COMMIT}/{rel}"})
            return
        if self.mode == "metadata":
            send(self, 302, b"", {**headers, "Location": f"http://169.254.169.254/latest/meta-data/{rel}"})
            return
        if self.mode == "mismatch" and lfs:
            data = FORGED
        send(self, 200, data, {**headers, "Content-Type": "application/octet-stream"})


def main() -> None:
    mode, port_file, log_file = sys.argv[1:4]
    Handler.mode, Handler.log_file = mode, log_file
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
