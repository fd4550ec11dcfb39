"""``ocibridge mount`` (issue 65) against the real registry, the mount a process of its own: the
tree and every byte are pull's, transformers loads from it, a second mount and a ``path`` after
it send no blob byte, a tampered blob is EIO and a line naming the file (never its bytes), and
signals, ``umount`` and a missing binding end cleanly, in one line where they fail."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mounting import (
    OCIBRIDGE,
    Mount,
    blob_bytes,
    default_timeout_read,  # noqa: F401 - autouse: the 30 s read runs beside the module's tests
    digest_of,
    digests,
    listing,
    mount_env,
    run,
)
from support.faultproxy import FaultProxy, RecordedRequest, corrupt, delay, hold, ignore_range, throttle
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.core.stale import MOUNT_SCRATCH_PREFIX, locked_directory
from ocibridge.hubserver.repo.initial import GITATTRIBUTES
from ocibridge.lazymount.mounttable import is_mounted
from tests.modelgen import make_bert_model
from tests.signing_keys import key_pair

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def model(registry, tmp_path_factory) -> tuple[str, Path]:
    """A tiny BERT (config, tokenizer), a 3 MiB weight file with a chunk table, a small one
    without, an executable script, and docs in a tar layer with a link: (repository, pull's tree)."""
    base = tmp_path_factory.mktemp("mount-model")
    src = make_bert_model(base / "src")
    (src / "weights.bin").write_bytes(os.urandom(3 * MiB + 12345))
    (src / "extra.bin").write_bytes(os.urandom(200_000))
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(src / "run.sh", 0o755)
    (src / "docs").mkdir()
    (src / "docs" / "guide.md").write_text("# guide\n")
    os.symlink("guide.md", src / "docs" / "latest.md")
    repo = new_repo()
    ref = f"{registry.host}/{repo}:v1"
    assert main(["push", str(src), ref, "-q", "--chunk-threshold", "1M", "--layer", "doc=tar"]) == 0
    assert main(["pull", ref, str(base / "pulled"), "-q"]) == 0
    return repo, base / "pulled"


@pytest.fixture(scope="module")
def proxy(registry):
    with FaultProxy(registry) as counting:
        yield counting


@pytest.fixture(scope="module")
def mounted(model, proxy, tmp_path_factory):
    """The model mounted through the counting proxy, with a cache of its own."""
    repo, _ = model
    base = tmp_path_factory.mktemp("mounted")
    with Mount(f"{proxy.host}/{repo}:v1", base / "mnt", mount_env(base), base / "mount.log") as m:
        yield m


def test_ls_lR_of_the_mount_is_pulls(mounted, model):
    _, pulled = model
    assert listing(mounted.where) == listing(pulled)
    assert listing(mounted.where)["run.sh"] == ("file", 19, True)  # the executable bit, as pull writes it
    assert listing(mounted.where)["docs/latest.md"] == ("link", "guide.md")  # from the tar layer

    def columns(root: Path) -> list[str]:  # ls -lR without owners, dates, block counts, directory sizes
        out = subprocess.run(["ls", "-lR", "--time-style=+", "."], cwd=root, capture_output=True, text=True,
                             check=True).stdout
        rows = []
        for line in out.splitlines():
            words = line.split()
            if line.startswith("total"):
                continue
            if len(words) < 6:
                rows.append(line)
                continue
            size = "-" if words[0].startswith("d") else words[4]
            rows.append(" ".join([words[0], size, *words[5:]]))
        return rows

    assert columns(mounted.where) == columns(pulled)


def test_every_file_hashes_as_pulled(mounted, model):
    _, pulled = model
    assert digests(mounted.where) == digests(pulled)
    assert len(digests(pulled)) == 9  # every regular file (the link is compared by listing)


def test_cp_r_out_of_the_mount_equals_pull(mounted, model, tmp_path):
    _, pulled = model
    subprocess.run(["cp", "-r", str(mounted.where), str(tmp_path / "copy")], check=True)
    assert listing(tmp_path / "copy") == listing(pulled)
    assert digests(tmp_path / "copy") == digests(pulled)


def test_transformers_loads_config_and_tokenizer_from_the_mount(mounted, tmp_path):
    """transformers, as a program of its own (the counting proxy serves the mount from this
    process, and the tokenizers library holds the GIL while its read of vocab.txt waits on it)."""
    script = (
        "import sys\n"
        "from transformers import AutoConfig, AutoTokenizer\n"
        "config = AutoConfig.from_pretrained(sys.argv[1])\n"
        "assert config.model_type == 'bert' and config.hidden_size == 32, config\n"
        "tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "print(tokenizer.tokenize('Hello world'))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", script, str(mounted.where)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['hello', 'world']"


def test_the_mount_is_read_only(mounted):
    with pytest.raises(OSError) as caught:
        open(mounted.where / "config.json", "r+b")  # noqa: SIM115
    assert caught.value.errno == errno.EROFS
    with pytest.raises(OSError):
        (mounted.where / "new.txt").write_text("x")


def test_a_second_mount_and_a_path_after_it_send_no_blob_byte(model, proxy, tmp_path):
    repo, pulled = model
    ref = f"{proxy.host}/{repo}:v1"
    env = mount_env(tmp_path)
    before = blob_bytes(proxy)
    with Mount(ref, tmp_path / "first", env, tmp_path / "first.log") as first:
        assert digests(first.where) == digests(pulled)
    fetched = blob_bytes(proxy) - before
    assert fetched >= 3 * MiB  # the first mount fetched the files (the chunked one in chunks)
    again = blob_bytes(proxy)
    with Mount(ref, tmp_path / "second", env, tmp_path / "second.log") as second:
        assert digests(second.where) == digests(pulled)
    assert blob_bytes(proxy) - again == 0
    snapshot = Path(run(["path", ref], env).stdout.strip())  # pull's way to the same cache: nothing moves
    assert digests(snapshot) == digests(pulled)
    assert blob_bytes(proxy) - again == 0


def test_a_registry_that_ignores_ranges_sends_the_file_once(model, fault_proxy, tmp_path):
    """Answered 200 and the whole blob to every Range, a read of the file took it from byte 0
    again for each of its chunks' requests (lazyread/rangeless.py)."""
    repo, pulled = model
    ref = f"{fault_proxy.host}/{repo}:v1"
    env = mount_env(tmp_path)
    digest = digest_of(ref, "weights.bin", env)
    fault_proxy.add("GET", f"/blobs/{digest}", ignore_range(), times=None)
    with Mount(ref, tmp_path / "mnt", env, tmp_path / "mount.log") as m:
        assert (m.where / "weights.bin").read_bytes() == (pulled / "weights.bin").read_bytes()
    size = (pulled / "weights.bin").stat().st_size
    assert blob_bytes(fault_proxy, digest) <= 1.1 * size, (blob_bytes(fault_proxy, digest), size)


@pytest.mark.parametrize("path", ["weights.bin", "extra.bin"])  # read by chunks (a table), read whole
def test_a_tampered_blob_is_eio_and_a_line_naming_the_file(model, fault_proxy, tmp_path, path):
    repo, pulled = model
    ref = f"{fault_proxy.host}/{repo}:v1"
    env = mount_env(tmp_path)
    digest = digest_of(ref, path, env)
    fault_proxy.add("GET", f"/blobs/{digest}", corrupt(offset=100), times=None)  # other bytes, every time
    log = tmp_path / "mount.log"
    with Mount(ref, tmp_path / "mnt", env, log) as m:
        assert (m.where / "config.json").read_bytes() == (pulled / "config.json").read_bytes()
        with pytest.raises(OSError) as caught, open(m.where / path, "rb") as f:
            f.read()
        assert caught.value.errno == errno.EIO
        assert digests(m.where / "docs") == digests(pulled / "docs")  # the rest still reads
    said = [line for line in log.read_text().splitlines() if "(EIO)" in line]
    assert said and all(line.startswith(f"ocibridge: mount: {path}: ") for line in said), log.read_text()
    assert "digest" in said[0]
    assert fault_proxy.requests_matching("GET", f"/blobs/{digest}")


@pytest.mark.parametrize("path", ["weights.bin", "extra.bin"])  # read by chunks (a table), read whole
def test_a_blob_the_registry_never_answers_is_eio_within_the_read_timeout(model, fault_proxy, tmp_path, path):
    """A blob request the registry never answers kept ``cat`` of the file blocked for minutes
    (60 s an attempt, 5 retries). With ``--read-timeout 2`` the read is EIO after 2 s (the
    kernel's second try of it fails at once), one line names the file and the registry, other
    files of the mount read meanwhile, and once the registry answers again the file reads."""
    repo, pulled = model
    ref = f"{fault_proxy.host}/{repo}:v1"
    env = mount_env(tmp_path)
    digest = digest_of(ref, path, env)
    never = threading.Event()
    fault_proxy.add("GET", f"/blobs/{digest}", hold(never), times=None)  # every request, never answered
    log = tmp_path / "mount.log"
    try:
        with Mount(ref, tmp_path / "mnt", env, log, "--read-timeout", "2") as m:
            started = time.monotonic()
            with pytest.raises(OSError) as caught, open(m.where / path, "rb") as f:
                f.read()
            took = time.monotonic() - started
            assert caught.value.errno == errno.EIO
            assert took >= 2, took  # not before the read timeout (the registry never answers: only it ends the read)
            other = "extra.bin" if path == "weights.bin" else "weights.bin"
            for name in (other, "config.json", "vocab.txt"):  # not read before: fetched now, while it hangs
                assert (m.where / name).read_bytes() == (pulled / name).read_bytes()
            fault_proxy.clear()
            never.set()  # the registry answers again: the held requests are cut, their retries answered
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert (m.where / path).read_bytes() == (pulled / path).read_bytes()
                    break
                except OSError as e:  # EIO until the stalled fetch has ended (its attempt: 2 s)
                    assert e.errno == errno.EIO, e
                    assert time.monotonic() < deadline, "the file never read once the registry answered again"
                    time.sleep(0.2)
    finally:
        never.set()
    said = [line for line in log.read_text().splitlines() if "(EIO)" in line]
    assert said == [f"ocibridge: mount: {path}: {fault_proxy.host}/{repo}: no answer for 2 s: the read gives up "
                    "(EIO)"], log.read_text()  # one line, however often the read was tried again


@pytest.mark.parametrize("path, rate", [("weights.bin", 400_000), ("extra.bin", 100_000)])  # bytes/s of a 1 MiB chunk
def test_a_slow_registry_that_keeps_sending_is_waited_for(model, fault_proxy, tmp_path, path, rate):
    """The bound is the registry's silence, not the read's length: a fetch paced to arrive in
    two to three times ``--read-timeout`` (a 64 KiB piece every sixth or two thirds of it) reads.
    Unbuffered: Python's buffer is the mount's block size (1 MiB), whose read-ahead reaches into
    weights.bin's next chunks, a paced fetch each more than the first one shows."""
    repo, pulled = model
    ref = f"{fault_proxy.host}/{repo}:v1"
    env = mount_env(tmp_path)
    fault_proxy.add("GET", f"/blobs/{digest_of(ref, path, env)}", throttle(rate), times=None)
    log = tmp_path / "mount.log"
    with Mount(ref, tmp_path / "mnt", env, log, "--read-timeout", "1") as m, \
            open(m.where / path, "rb", buffering=0) as f:
        started = time.monotonic()
        assert f.read(4096) == (pulled / path).read_bytes()[:4096]
        assert time.monotonic() - started > 1.5
    assert "(EIO)" not in log.read_text()


def test_a_buffered_first_read_waits_for_its_own_chunk_alone(model, fault_proxy, tmp_path):
    """Python's ``open()`` reads the mount's block size (1 MiB, chunk 0 whole) for a read of
    4 KiB; the kernel asks it, and its read-ahead, in FUSE reads of the mount's largest read.
    Reads that end on a chunk's end leave chunk 1 to the read-ahead, which the program does
    not wait for: here every fetch of weights.bin after the first is held until the read is
    done (or 20 s, should it wait for one), and the first one is chunk 0's alone."""
    repo, pulled = model
    ref = f"{fault_proxy.host}/{repo}:v1"
    env = mount_env(tmp_path)
    blob = f"/blobs/{digest_of(ref, 'weights.bin', env)}"
    released = threading.Event()
    fault_proxy.add("GET", blob, delay(20, released), skip=1, times=None)
    with Mount(ref, tmp_path / "mnt", env, tmp_path / "mount.log") as m:
        try:
            with open(m.where / "weights.bin", "rb") as f:
                assert f.read(4096) == (pulled / "weights.bin").read_bytes()[:4096]
            answered = [r.range for r in fault_proxy.requests_matching("GET", blob) if r.answered is not None]
        finally:
            released.set()
    assert answered == ["bytes=0-1048575"]


def test_checking_a_large_file_read_whole_is_no_stall(registry, tmp_path):
    """A file with no chunk table is read whole: fetched into the model cache, hashed, copied.
    Only silence from the registry counts against ``--read-timeout``, not that local work: a
    384 MiB file the cache holds (hashed in longer than 0.2 s) reads with a bound of 0.2 s."""
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "big.bin", "wb") as f:
        for _ in range(384):
            f.write(bytes(MiB))
    ref = f"{registry.host}/{new_repo()}:v1"
    assert main(["push", str(src), ref, "-q", "--no-chunks"]) == 0
    env = mount_env(tmp_path / "env")
    log = tmp_path / "mount.log"
    with Mount(ref, tmp_path / "first", env, log) as m, open(m.where / "big.bin", "rb") as f:  # into the cache
        assert f.read(4096) == bytes(4096)
    with Mount(ref, tmp_path / "again", env, log, "--read-timeout", "0.2") as m, open(m.where / "big.bin", "rb") as f:
        assert f.read(4096) == bytes(4096)  # (a file closed before the umount, even when the read fails)
    assert "(EIO)" not in log.read_text()


@pytest.mark.parametrize("given", ["0", "-1", "nan", "inf"])
def test_a_read_timeout_that_is_no_bound_is_one_line(model, registry, tmp_path, given):
    repo, _ = model
    done = run(["mount", f"{registry.host}/{repo}:v1", str(tmp_path / "mnt"), "--read-timeout", given],
               mount_env(tmp_path / "env"), check=False)
    assert (done.returncode, done.stderr) == (
        2, f"ocibridge: error: --read-timeout {float(given):g}: a number of seconds above 0 "
           "(see 'ocibridge mount --help')\n")
    assert not (tmp_path / "mnt").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_unmount_cleanly(model, registry, tmp_path, sig):
    repo, pulled = model
    where = tmp_path / "mnt"
    where.mkdir()
    child = subprocess.Popen([*OCIBRIDGE, "mount", f"{registry.host}/{repo}:v1", str(where), "--foreground"],
                             env=mount_env(tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(where) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert is_mounted(where)
        assert (where / "config.json").read_bytes() == (pulled / "config.json").read_bytes()
        child.send_signal(sig)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert not is_mounted(where) and os.listdir(where) == []
    assert "Traceback" not in err


def test_a_detached_mount_holds_no_pipe_of_its_caller(model, registry, tmp_path):
    """``out=$(ocibridge mount … 2>&1)`` returns once mounted: the mount process does not keep
    the caller's stderr when it is a pipe (it would hold it open until the unmount)."""
    repo, _ = model
    where = tmp_path / "mnt"
    done = run(["mount", f"{registry.host}/{repo}:v1", str(where)], mount_env(tmp_path))  # stderr: a pipe
    try:
        assert done.stderr == "" and is_mounted(where)
    finally:
        run(["umount", str(where)], mount_env(tmp_path))


def test_umount_of_a_directory_not_mounted_is_one_line(tmp_path):
    done = run(["umount", str(tmp_path)], mount_env(tmp_path / "env"), check=False)
    assert done.returncode != 0
    assert done.stderr.strip() == f"ocibridge: error: {tmp_path} is not mounted"



def test_umount_leaves_a_mount_that_is_not_ocibridges(tmp_path):
    """``fusermount3 -u`` run as root unmounts any file system: ``ocibridge umount`` of a tmpfs
    (a typo, a tab completion) unmounted it and its files were gone. It now refuses in one line
    and the tmpfs keeps its files. The tmpfs is in a mount namespace of the test's own."""
    where = tmp_path / "data"
    where.mkdir()
    script = (f'mount -t tmpfs tmpfs "{where}" && echo kept > "{where}/f" && "$0" -m ocibridge umount "{where}"; '
              f'echo "exit $?"; cat "{where}/f"')
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, OCIBRIDGE[0]],
                          env=mount_env(tmp_path / "env"), capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.splitlines() == ["exit 1", "kept"], (done.stdout, done.stderr)
    assert done.stderr == (f"ocibridge: error: {where} is a tmpfs mount, not one of 'ocibridge mount': "
                           "left mounted (umount(8) unmounts it)\n")


def test_a_mount_on_another_file_systems_mount_point_does_not_say_umount_it(model, registry, tmp_path):
    """A mount on a tmpfs's mount point was refused with 'ocibridge umount DIR' as the way out,
    which would unmount the tmpfs itself; the line now says what is mounted there and to mount
    on a directory inside it (detached and --foreground alike)."""
    repo, _ = model
    where = tmp_path / "data"
    where.mkdir()
    ref = f"{registry.host}/{repo}:v1"
    script = (f'mount -t tmpfs tmpfs "{where}" && "$0" -m ocibridge mount {ref} "{where}"; echo "exit $?"; '
              f'"$0" -m ocibridge mount {ref} "{where}" --foreground; echo "exit $?"')
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, OCIBRIDGE[0]],
                          env=mount_env(tmp_path / "env"), capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.splitlines() == ["exit 1", "exit 1"], (done.stdout, done.stderr)
    line = (f"ocibridge: error: {where} is the mount point of a tmpfs: mount the model on a directory inside it "
            f"(ocibridge mount REF {where}/NAME)\n")
    assert done.stderr == line * 2


@pytest.mark.parametrize("foreground", [False, True], ids=["detached", "foreground"])
def test_a_directory_that_is_not_empty_is_refused(model, registry, tmp_path, foreground):
    """``mount REF DIR`` on a directory holding files (help: "an empty directory") mounted over
    them: they vanished until the unmount. It is refused in one line now, the files as they were."""
    repo, _ = model
    where = tmp_path / "work"
    where.mkdir()
    (where / "notes.txt").write_text("mine\n")
    argv = ["mount", f"{registry.host}/{repo}:v1", str(where), *(["--foreground"] if foreground else [])]
    done = subprocess.run([*OCIBRIDGE, *argv], env=mount_env(tmp_path / "env"), capture_output=True, text=True,
                          timeout=60, check=False)  # (a --foreground that mounted would serve until unmounted)
    assert done.returncode == 1 and not is_mounted(where)
    assert done.stderr == (f"ocibridge: error: {where} is not empty: its files would be hidden while the model is "
                           "mounted there; mount on an empty or a new directory\n")
    assert os.listdir(where) == ["notes.txt"]


def test_umount_of_a_mount_in_use_says_what_holds_it(model, registry, tmp_path):
    """``umount`` while a program had a file open there said only 'Device or resource busy': the
    line now says what keeps a mount busy and the ways out; the mount is left as it was."""
    repo, _ = model
    where = tmp_path / "mnt"
    env = mount_env(tmp_path)
    with Mount(f"{registry.host}/{repo}:v1", where, env, tmp_path / "mount.log"), open(where / "config.json", "rb"):
        done = run(["umount", str(where)], env, check=False)
        assert done.returncode == 1 and is_mounted(where)
        assert done.stderr == (f"ocibridge: error: could not unmount {where}: failed to unmount {where}: Device or "
                               "resource busy (a program has a file open there or works inside it: end it, then "
                               f"run this again; fusermount3 -uz {where} detaches it now)\n")


def test_an_empty_dir_is_refused_not_read_as_the_current_directory(model, registry, tmp_path):
    """``ocibridge mount REF "$DIR"`` with DIR unset mounted the model on the current directory
    (when empty; else its files were the reason given); ``umount ""`` said '. is not mounted'.
    Both are one line naming the empty DIR now, and nothing is mounted."""
    repo, _ = model
    work = tmp_path / "work"
    work.mkdir()
    env = {**mount_env(tmp_path / "env"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # (cwd: work)
    try:
        for argv in (["mount", f"{registry.host}/{repo}:v1", ""], ["umount", ""]):
            done = subprocess.run([*OCIBRIDGE, *argv], env=env, cwd=work, capture_output=True, text=True,
                                  timeout=60, check=False)
            assert done.returncode == 2 and not is_mounted(work), (argv, done.stderr)
            assert done.stderr == (f"ocibridge: error: an empty DIR (an unset shell variable?) "
                                   f"(see 'ocibridge {argv[0]} --help')\n")
    finally:
        if is_mounted(work):
            run(["umount", str(work)], env)

def test_a_missing_binding_names_the_extra(model, registry, tmp_path):
    repo, _ = model
    code = ("import sys; sys.modules['mfusepy'] = None; from ocibridge.cli import main; "
            f"sys.exit(main(['mount', '{registry.host}/{repo}:v1', '{tmp_path}', '--foreground']))")
    done = subprocess.run([OCIBRIDGE[0], "-c", code], env=mount_env(tmp_path / "env"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip() == ("ocibridge: error: ocibridge mount needs a FUSE binding: "
                                   "pip install 'ocibridge[mount]'")
    assert not is_mounted(tmp_path)


def test_verify_key_refuses_an_unsigned_model_and_mounts_a_signed_one(model, registry, tmp_path):
    repo, pulled = model
    private, public = key_pair(tmp_path / "keys")
    where = tmp_path / "mnt"
    where.mkdir()
    env = mount_env(tmp_path / "env")
    src = f"{registry.host}/{repo}:v1"
    ref = f"{registry.host}/{new_repo()}:v1"  # a copy of its own: the model's other tests stay unsigned
    assert main(["copy", src, ref, "-q"]) == 0
    done = run(["mount", ref, str(where), "--verify-key", str(public)], env, check=False)
    assert done.returncode != 0
    assert not is_mounted(where)
    assert len(done.stderr.splitlines()) == 1 and "is not signed" in done.stderr
    assert main(["sign", ref, "--key", str(private)]) == 0
    with Mount(ref, where, env, tmp_path / "mount.log", "--verify-key", str(public)) as m:
        assert digests(m.where) == digests(pulled)


def _killed_mount(registry, repo: str, tmp_path: Path) -> tuple[Path, Path, str, dict[str, str]]:
    """A mount of the docs' model (a tar layer: a scratch directory) whose process was killed
    outright: (its directory, the scratch directories' parent, the dead one's name, the env)."""
    env = mount_env(tmp_path)
    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    env["TMPDIR"] = str(scratch_parent)
    where = tmp_path / "mnt"  # made by the mount
    run(["mount", f"{registry.host}/{repo}:v1", str(where)], env, log=tmp_path / "first.log")
    dead_scratch = [p.name for p in scratch_parent.iterdir()]
    assert len(dead_scratch) == 1 and dead_scratch[0].startswith("ocibridge-mount-")  # the docs' tar layer
    with open("/proc/self/mountinfo") as table:
        pid = next(int(line.split(" - ")[1].split()[1].split(":")[1]) for line in table
                   if f" {where} " in line)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.stat(where)
        except OSError as e:
            assert e.errno in (errno.ENOTCONN, errno.ECONNABORTED)
            break
        time.sleep(0.05)
    else:
        pytest.fail("the mount still answered after its process was killed")
    assert [p.name for p in scratch_parent.iterdir()] == dead_scratch
    past = time.time() - 60  # (a directory made in the last second is left alone: it may be about to be locked)
    os.utime(scratch_parent / dead_scratch[0], (past, past))
    return where, scratch_parent, dead_scratch[0], env


@contextlib.contextmanager
def _live_scratch(parent: Path) -> Iterator[Path]:
    """A live mount's scratch directory in ``parent``, held locked and dated a minute back (as
    old as the dead one's): what a sweep must leave."""
    held, lock = locked_directory(parent, MOUNT_SCRATCH_PREFIX)
    past = time.time() - 60
    os.utime(held, (past, past))
    try:
        yield held
    finally:
        os.close(lock)


def test_a_mount_whose_process_died_is_replaced_by_the_next(model, registry, tmp_path):
    """A killed mount process leaves a dead mount ("Transport endpoint is not connected"), as a
    DaemonSet's restarted container finds it: the next mount there unmounts it first, and removes
    the scratch directory the dead one unpacked its tar layer into."""
    repo, pulled = model
    where, scratch_parent, dead, env = _killed_mount(registry, repo, tmp_path)
    with _live_scratch(scratch_parent) as held:
        with Mount(f"{registry.host}/{repo}:v1", where, env, tmp_path / "again.log") as m:
            assert digests(m.where) == digests(pulled)
            while_mounted = sorted(p.name for p in scratch_parent.iterdir())
        assert len(while_mounted) == 2 and held.name in while_mounted and dead not in while_mounted
        assert [p.name for p in scratch_parent.iterdir()] == [held.name]  # its own went at the unmount


def test_umount_of_a_dead_mount_removes_its_scratch_directory(model, registry, tmp_path):
    """``ocibridge umount`` of the dead mount a killed process left detaches it and removes the
    scratch directory that process can no longer remove; a live mount's stays."""
    repo, _ = model
    where, scratch_parent, dead, env = _killed_mount(registry, repo, tmp_path)
    with _live_scratch(scratch_parent) as held:
        run(["umount", str(where)], env, log=tmp_path / "umount.log")
        assert [p.name for p in scratch_parent.iterdir()] == [held.name]
        assert not is_mounted(where)


#: the sha256 of the .gitattributes of a repository's first commit
GITATTRIBUTES_SHA = hashlib.sha256(GITATTRIBUTES).hexdigest()


def test_a_commit_published_through_serve_mounts_as_pull_writes_it(registry, tmp_path, monkeypatch):
    """A model published with huggingface_hub's upload_folder through ``ocibridge serve`` (a
    ModelPack commit under the branch's tag): its commit, by the digest whose first 40 hex
    digits serve hands out as the commit id, mounts with pull's tree and bytes."""
    from huggingface_hub import HfApi
    from serving import point_hub_at
    from support.publishing import model_dir, serve_process

    prefix = f"{registry.host}/{new_repo()}"
    src = model_dir(tmp_path / "model")
    with serve_process(tmp_path, prefix) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/tiny")
        commit = api.upload_folder(repo_id="acme/tiny", folder_path=src, commit_message="first").oid
    env = mount_env(tmp_path / "env")
    digest = run(["resolve", f"{prefix}/acme/tiny:latest"], env).stdout.split()[-1]
    assert digest.startswith("sha256:" + commit)  # the commit id is the manifest digest's first 40 hex digits
    ref = f"{prefix}/acme/tiny@{digest}"
    run(["pull", ref, str(tmp_path / "pulled"), "-q"], env)
    with Mount(ref, tmp_path / "mnt", env, tmp_path / "mount.log") as m:
        assert listing(m.where) == listing(tmp_path / "pulled")
        # and the .gitattributes of the repository's first commit (serve's create_repo)
        assert digests(m.where) == digests(tmp_path / "pulled") == {**digests(src), ".gitattributes": GITATTRIBUTES_SHA}


def test_offline_a_mount_reads_what_the_model_cache_holds(model, registry, tmp_path):
    """Online, a mount keeps what the tag resolved to and every blob and chunk it read; with the
    registry gone, ``--offline`` mounts the same name from the cache: the tree whole, the files
    read before byte for byte, and a file never read is EIO (never a hang, never other bytes)."""
    repo, pulled = model
    env = mount_env(tmp_path)
    with FaultProxy(registry) as going:
        ref = f"{going.host}/{repo}:v1"
        with Mount(ref, tmp_path / "online", env, tmp_path / "online.log") as m:
            for name in ("config.json", "weights.bin", "vocab.txt"):
                (m.where / name).read_bytes()
    with Mount(ref, tmp_path / "offline", env, tmp_path / "offline.log", "--offline") as m:  # nobody answers there
        assert listing(m.where) == listing(pulled)
        for name in ("config.json", "weights.bin", "vocab.txt"):
            assert (m.where / name).read_bytes() == (pulled / name).read_bytes()
        assert digests(m.where / "docs") == digests(pulled / "docs")  # the tar layer: unpacked from the cache
        with pytest.raises(OSError) as caught:
            (m.where / "extra.bin").read_bytes()
        assert caught.value.errno == errno.EIO
    assert "extra.bin: offline: blob sha256:" in (tmp_path / "offline.log").read_text()


def test_offline_a_model_never_fetched_says_to_mount_it_online_first(tmp_path):
    """``--offline`` of a model the cache never held said only that it was never fetched, not
    what to do; the line now says to mount it once online first. Nothing is asked of the
    registry (there is none here) and no directory is left."""
    env = mount_env(tmp_path / "env")
    ref = "registry.invalid:5000/acme/tiny:v1"
    done = run(["mount", ref, str(tmp_path / "mnt"), "--offline"], env, check=False)
    cache = tmp_path / "env" / "cache" / "models"
    assert (done.returncode, done.stderr) == (
        1, f"ocibridge: error: offline: {ref} was never fetched into the model cache ({cache}): mount it once "
           "online first (or run 'ocibridge path' on it online)\n")
    assert not (tmp_path / "mnt").exists()


def test_a_failed_mount_is_one_line_and_leaves_no_directory_it_made(registry, tmp_path):
    env = mount_env(tmp_path / "env")
    where = tmp_path / "a"
    done = run(["mount", f"{registry.host}/{new_repo()}:v1", str(where)], env, check=False)  # no such model
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "no such repository" in done.stderr
    assert not where.exists()
    done = run(["mount", "bad::ref", str(where)], env, check=False)  # refused before any process starts
    assert done.returncode == 2 and done.stderr.startswith("ocibridge: error: invalid repository")


#: a FUSE file system of another program (mfusepy, an empty directory), mounted in the foreground
OTHER_FS = """
import sys, errno, mfusepy
class Empty(mfusepy.Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": 0o40755, "st_nlink": 2}
        raise mfusepy.FuseOSError(errno.ENOENT)
    def readdir(self, path, fh):
        return [".", ".."]
mfusepy.FUSE(Empty(), sys.argv[1], foreground=True, fsname="otherfs", subtype="otherfs")
"""


def test_a_mount_leaves_another_programs_dead_mount_to_its_owner(model, registry, tmp_path):
    """``mount`` clears a dead ocibridge mount first (its process killed). Another program's dead
    FUSE mount was cleared the same way, silently, while ``umount`` refuses to touch it; now the
    mount refuses the directory, and the other mount is left as it was."""
    repo, _ = model
    where = tmp_path / "other"
    where.mkdir()
    other = subprocess.Popen([OCIBRIDGE[0], "-c", OTHER_FS, str(where)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not is_mounted(where):
            assert other.poll() is None and time.monotonic() < deadline, "the other file system did not mount"
            time.sleep(0.05)
        other.kill()
        other.wait()
        with pytest.raises(OSError) as dead:
            os.stat(where)
        assert dead.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
        done = run(["mount", f"{registry.host}/{repo}:v1", str(where)], mount_env(tmp_path / "env"), check=False)
        assert done.returncode == 1, done.stderr
        assert "is the mount point of a fuse.otherfs" in done.stderr, done.stderr
        assert is_mounted(where)  # left for its owner
    finally:
        other.kill()
        for _ in range(3):  # the other mount, and one of ours had it been stacked on it
            if not is_mounted(where):
                break
            subprocess.run(["fusermount3", "-uz", str(where)], capture_output=True, check=False)


def test_the_default_read_timeout_is_30_seconds(default_timeout_read, model):  # noqa: F811
    """Without ``--read-timeout``, a read the registry never answers is EIO after 30 s (the
    read began with the module: :func:`default_timeout_read`; the module's last test, so that
    every other one runs while it waits)."""
    _, pulled = model
    seen = default_timeout_read
    seen["thread"].join(timeout=120)
    assert "failure" not in seen, seen["failure"]
    error, took = seen.get("error"), seen["took"]
    assert isinstance(error, OSError) and error.errno == errno.EIO and took >= 30, (error, took)  # not before it
    assert seen["config.json"] == (pulled / "config.json").read_bytes()
    assert "weights.bin: " in seen["log"] and ": no answer for 30 s: the read gives up (EIO)" in seen["log"]


def test_the_chunk_table_is_found_once_mounted_not_at_the_first_read(registry, fault_proxy, tmp_path):
    """A program's first read of a file waited for what the mount had left to it: finding the
    model's chunk table (from the registry), making the file's reader. Once mounted, the mount
    does that on its own, while the program starts: here no file is read, and the table's
    requests come all the same."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "weights.bin").write_bytes(os.urandom(2 * MiB))
    ref = f"{fault_proxy.host}/{new_repo()}:v1"
    assert main(["push", str(src), ref, "-q", "--chunk-threshold", "1M"]) == 0
    pushed = len(fault_proxy.requests)

    def blobs_asked() -> list[RecordedRequest]:
        return [r for r in fault_proxy.requests[pushed:] if r.method == "GET" and "/blobs/" in r.path]

    with Mount(ref, tmp_path / "mnt", mount_env(tmp_path / "env"), tmp_path / "mount.log"):
        deadline = time.monotonic() + 20
        while not blobs_asked() and time.monotonic() < deadline:
            time.sleep(0.05)
        asked = blobs_asked()
    assert asked, "no blob was asked of the registry once mounted, until a file was read"
    assert all("range" not in r.headers for r in asked)  # (no byte of the file: the table alone)
