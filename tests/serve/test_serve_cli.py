"""The ``ocibridge serve`` command as people run it: a process that answers until SIGTERM,
logs each request, and names its extra when Starlette or uvicorn is missing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ocibridge.cli import main
from tests.modelgen import make_bert_model

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(*args: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", *args, "--listen", f"127.0.0.1:{port}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.communicate()[1].decode()
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "serve did not start"
        time.sleep(0.1)


def test_serve_answers_logs_and_stops_on_sigterm(tmp_path):
    from ocibridge.stores.layout import LayoutStore

    src = make_bert_model(tmp_path / "tiny")
    LayoutStore(tmp_path / "lay", create=True)
    assert main(["push", str(src), f"oci:{tmp_path}/lay:acme/tiny:latest", "-q"]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "tokens").write_text("# read tokens\nt0ken\n")
    proc, url = start_serve(f"oci:{tmp_path}/lay", "--token-file", str(tmp_path / "tokens"), env=env)
    try:
        assert httpx.get(f"{url}/api/models/acme/tiny").status_code == 401
        auth = {"Authorization": "Bearer t0ken"}
        info = httpx.get(f"{url}/api/models/acme/tiny", headers=auth).json()
        assert info["id"] == "acme/tiny"
        body = httpx.get(f"{url}/acme/tiny/resolve/main/config.json", headers=auth).content
        assert body == (src / "config.json").read_bytes()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    log = out.decode() + err.decode()
    assert '"GET /acme/tiny/resolve/main/config.json HTTP/1.1" 200' in log  # the access log
    assert "Shutting down" in log


def test_serve_names_its_extra_when_uvicorn_is_missing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["serve", "local"]) == 1
    assert "pip install 'ocibridge[serve]'" in capsys.readouterr().err


def test_serve_usage_mistakes(capsys):
    assert main(["serve", "local", "--listen", "nowhere"]) == 2
    assert "--listen" in capsys.readouterr().err
    assert main(["serve", "registry.example/models:v1"]) == 2
    assert "registry prefix" in capsys.readouterr().err


@pytest.mark.parametrize(("listen", "said"), [
    ("http://127.0.0.1:8081", "--listen 'http://127.0.0.1:8081' is HOST:PORT, not a URL: --listen 127.0.0.1:8081"),
    ("http://[::1]:8081/", "--listen 'http://[::1]:8081/' is HOST:PORT, not a URL: --listen [::1]:8081"),
    ("8080", "--listen '8080': expected HOST:PORT: --listen 127.0.0.1:8080 (this machine only) or :8080 "
             "(every address)"),
    ("127.0.0.1:99999", "--listen '127.0.0.1:99999': the port is a number from 0 to 65535"),
])
def test_listen_given_a_url_a_bare_port_or_a_port_out_of_range_says_what_to_write(listen, said, capsys):
    """``--listen http://127.0.0.1:8081`` (the URL serve prints, pasted back) said
    '--listen [http://127.0.0.1]:8081: Name or service not known'; a bare port and a port out of
    range said 'expected HOST:PORT'. Each line now gives the --listen to write."""
    assert main(["serve", "local", "--listen", listen]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"ocibridge: error: {said} (see 'ocibridge serve --help')"], err


@pytest.mark.parametrize("mistake", ["missing", "swapped", "another pair's key", "not a certificate",
                                     "a certificate as the key", "a damaged certificate", "the key as both",
                                     "two keys", "a key and a note"])
def test_tls_files_that_cannot_be_used_are_one_line_before_serve_starts(mistake, tmp_path):
    """A --cert that does not exist printed the https banner, then 'ocibridge: error: No such file
    or directory' (no file named); swapped or mismatched files '[SSL] PEM lib (_ssl.c:3905)'. The
    files are now loaded before anything starts: one line naming them, no banner, exit 2. The
    line says what is wrong in words, not OpenSSL's reason ('KEY_VALUES_MISMATCH', 'PEM lib')
    and a line of _ssl.c. The key given as both files (or two keys) asked whether they were
    swapped, which they were not: that question is only asked when --key holds the certificate."""
    from support.certs import make_tls_files

    tls, other = make_tls_files(tmp_path / "tls"), make_tls_files(tmp_path / "other")
    (tmp_path / "notes.txt").write_text("not a certificate\n")
    damaged = tmp_path / "damaged.pem"
    damaged.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    cert, key = {"missing": (tmp_path / "nope.pem", tls.key_file), "swapped": (tls.key_file, tls.cert_file),
                 "another pair's key": (tls.cert_file, other.key_file),
                 "not a certificate": (tmp_path / "notes.txt", tls.key_file),
                 "a certificate as the key": (tls.cert_file, tls.cert_file),
                 "a damaged certificate": (damaged, tls.key_file), "the key as both": (tls.key_file, tls.key_file),
                 "two keys": (tls.key_file, other.key_file),
                 "a key and a note": (tls.key_file, tmp_path / "notes.txt")}[mistake]
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "local", "--listen", f"127.0.0.1:{free_port()}",
                           "--cert", str(cert), "--key", str(key)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60, check=False)
    said = {"missing": f"--cert {cert}: No such file or directory",
            "swapped": f"--cert {cert}: a private key, not a certificate (are --cert and --key swapped?)",
            "another pair's key": f"--key {key} does not go with --cert {cert}: it is the key of another "
                                  "certificate",
            "not a certificate": f"--cert {cert}: not a PEM certificate (no '-----BEGIN CERTIFICATE-----' line)",
            "a certificate as the key": f"--key {key}: a certificate, not a private key",
            "a damaged certificate": f"--cert {cert} --key {key}: a PEM certificate and a private key, but they "
                                     "cannot be read (a file cut short or edited?)",
            "the key as both": f"--cert {cert}: a private key, not a certificate (--cert and --key name the same key)",
            "two keys": f"--cert {cert}: a private key, not a certificate (--key {key} is a private key too; --cert "
                        "takes the certificate that goes with it)",
            "a key and a note": f"--cert {cert}: a private key, not a certificate"}[mistake]
    assert (done.returncode, done.stderr) == (2, f"ocibridge: error: {said} (see 'ocibridge serve --help')\n")
    assert done.stdout == ""


@pytest.mark.parametrize(("source", "said"), [
    ("", "an empty SOURCE (an unset shell variable?)"),
    ("./tiny", "./tiny is a local path: a SOURCE is a registry prefix (host/path), oci:DIR (a layout) or local; "
               "push the model first (ocibridge push ./tiny oci:DIR:ORG/NAME:latest, or to a registry)"),
    ("/srv/tiny", "/srv/tiny is a local path: a SOURCE is a registry prefix (host/path), oci:DIR (a layout) or "
                  "local; push the model first (ocibridge push /srv/tiny oci:DIR:ORG/NAME:latest, or to a registry)"),
])
def test_a_source_that_is_empty_or_a_path_says_what_a_source_is(source, said, capsys):
    """``serve "$REGISTRY"`` with REGISTRY unset said "/x is a local path" (a name serve made up);
    ``serve ./tiny`` (the model directory) said "invalid registry host '.'". Each line now says
    what a SOURCE is."""
    assert main(["serve", source, "--listen", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"ocibridge: error: {said} (see 'ocibridge serve --help')"], err


def test_a_key_with_a_passphrase_is_not_loaded_before_serve_starts(tmp_path):
    """The TLS files are checked once before serve starts; a key protected by a passphrase is
    only opened there: loading it asked for the passphrase (four times, counting the three calls
    that check the address), and then uvicorn asked again. Run without a terminal, as a check
    that asked would fail."""
    from cryptography.hazmat.primitives import serialization
    from support.certs import make_tls_files

    tls = make_tls_files(tmp_path / "tls")
    key = serialization.load_pem_private_key(tls.key_file.read_bytes(), password=None)
    locked = tmp_path / "locked.pem"
    locked.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"secret")))
    code = ("import sys; from ocibridge.hubserver.tlsfiles import check_tls_files; "
            "check_tls_files(sys.argv[1], sys.argv[2])")
    done = subprocess.run([sys.executable, "-c", code, str(tls.cert_file), str(locked)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_key_whose_passphrase_cannot_be_had_is_one_line_naming_the_key(tmp_path):
    """An encrypted key whose passphrase was wrong (or could not be asked: no terminal) printed
    the banner, then 'ocibridge: error: Invalid argument' when uvicorn loaded it. The key is now
    loaded before the banner, and the line names it and says what went wrong. (OpenSSL's own
    'Enter PEM pass phrase:' prompts come before it.)"""
    from cryptography.hazmat.primitives import serialization
    from support.certs import make_tls_files

    tls = make_tls_files(tmp_path / "tls")
    key = serialization.load_pem_private_key(tls.key_file.read_bytes(), password=None)
    locked = tmp_path / "locked.pem"
    locked.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"secret")))
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "local", "--listen", f"127.0.0.1:{free_port()}",
                           "--cert", str(tls.cert_file), "--key", str(locked)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_STORE": str(tmp_path / "store")})
    assert done.returncode == 1 and "serving the" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == (f"ocibridge: error: --key {locked}: the key is encrypted and could not be "
                                            f"used with --cert {tls.cert_file} (a wrong passphrase, no terminal to "
                                            "ask for it, or the key of another certificate)")


def _locked(key_file: Path, to: Path) -> Path:
    """``key_file``'s key, encrypted with the passphrase 'secret'."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    to.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.BestAvailableEncryption(b"secret")))
    return to


def test_an_encrypted_key_with_a_bad_certificate_is_not_told_as_a_passphrase(tmp_path):
    """With an encrypted key, whatever OpenSSL refused once uvicorn's config was loaded was told
    as a wrong passphrase: a --cert that is no certificate (refused before any passphrase is
    asked) too. The line says what is wrong with the certificate, as for a key in the clear."""
    from support.certs import make_tls_files

    tls = make_tls_files(tmp_path / "tls")
    locked = _locked(tls.key_file, tmp_path / "locked.pem")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a certificate\n")
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "local", "--listen", f"127.0.0.1:{free_port()}",
                           "--cert", str(notes), "--key", str(locked)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_STORE": str(tmp_path / "store")})
    assert (done.returncode, done.stderr) == (2, f"ocibridge: error: --cert {notes}: not a PEM certificate (no "
                                                 "'-----BEGIN CERTIFICATE-----' line) (see 'ocibridge serve --help')\n")


def test_an_encrypted_key_of_another_certificate_is_not_told_as_only_a_wrong_passphrase(tmp_path):
    """The passphrase typed right at OpenSSL's prompt, the key that of another certificate: the
    line said the passphrase was wrong (or not asked). OpenSSL fails the same way for both (an
    OSError, EINVAL, no reason), so the line names the certificate too."""
    import pty
    import select

    from support.certs import make_tls_files

    tls, other = make_tls_files(tmp_path / "tls"), make_tls_files(tmp_path / "other")
    locked = _locked(other.key_file, tmp_path / "locked.pem")
    err = tmp_path / "stderr"
    argv = [sys.executable, "-m", "ocibridge", "serve", "local", "--listen", f"127.0.0.1:{free_port()}",
            "--cert", str(tls.cert_file), "--key", str(locked)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_STORE": str(tmp_path / "store")}
    pid, terminal = pty.fork()  # OpenSSL asks for the passphrase at the controlling terminal
    if pid == 0:  # pragma: no cover - the child
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.execve(sys.executable, argv, env)
    screen, deadline, code = b"", time.monotonic() + 60, None
    waiting = select.poll()  # not select(): a worker may hold descriptors past FD_SETSIZE
    waiting.register(terminal, select.POLLIN)
    try:
        while code is None and time.monotonic() < deadline:
            if waiting.poll(200):
                try:
                    got = os.read(terminal, 1024)
                except OSError:  # the child closed its end
                    got = b""
                if b"pass phrase" not in screen and b"pass phrase" in screen + got:
                    os.write(terminal, b"secret\n")
                screen += got
            finished, status = os.waitpid(pid, os.WNOHANG)
            code = os.waitstatus_to_exitcode(status) if finished else None
    finally:
        if code is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
    assert b"pass phrase" in screen, screen
    assert (code, err.read_text()) == (1, f"ocibridge: error: --key {locked}: the key is encrypted and could not be "
                                          f"used with --cert {tls.cert_file} (a wrong passphrase, no terminal to ask "
                                          "for it, or the key of another certificate)\n")


def test_tls_that_fails_to_load_before_the_banner_closes_what_serve_opened(tmp_path, monkeypatch):
    """uvicorn's config is loaded before the banner now (its TLS): a load that failed closed the
    socket, but not the app serve had made, which uvicorn's own failed load (inside serve's
    try/finally) had closed: its audit log stayed open (and its sources' connections)."""
    from support.certs import make_tls_files

    from ocibridge.api.serve import ListenOptions, ServeOptions, serve
    from ocibridge.errors import UsageError

    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    tls = make_tls_files(tmp_path / "tls")
    notes, audit = tmp_path / "notes.txt", tmp_path / "audit.jsonl"
    notes.write_text("not a certificate\n")

    def audit_files_open() -> int:
        return sum(1 for fd in os.listdir("/proc/self/fd")
                   if os.path.realpath(f"/proc/self/fd/{fd}") == str(audit.resolve()))

    with pytest.raises(UsageError, match="not a PEM certificate"):  # read before the key: no passphrase asked
        serve("local", listen=ListenOptions(f"127.0.0.1:{free_port()}", cert=str(notes),
                                            key=str(_locked(tls.key_file, tmp_path / "locked.pem"))),
              options=ServeOptions(audit_log=str(audit)))
    assert audit.exists() and audit_files_open() == 0
