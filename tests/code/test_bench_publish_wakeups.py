"""bench.publish_wakeups: what it counts is read from perf's and strace's output as they print it
(a read that found nothing apart from the bytes read; only the writes to the registry's port)."""

from __future__ import annotations

from pathlib import Path

from bench import publish_wakeups


def test_reads_that_found_nothing_are_counted_apart_from_the_bytes_read() -> None:
    # perf script -F trace of syscalls:sys_exit_read: the return value, a hex number a line
    script = "0x8000\n0x8000\n0xfffffffffffffff5\n0x1f4\n0x0\n0xfffffffffffffff5\n0xfffffffffffffffc\n"
    sizes, parked = publish_wakeups.read_sizes(script)
    assert sizes == [0x8000, 0x8000, 0x1F4]  # EOF (0) and other errors (EINTR) are neither
    assert parked == 2


def test_only_the_writes_to_the_registry_port_are_the_senders(tmp_path: Path) -> None:
    trace = tmp_path / "strace.txt"
    trace.write_text(
        "101 sendto(7<TCP:[127.0.0.1:40000->127.0.0.1:5000]>, \"\"..., 1048576, MSG_NOSIGNAL, NULL, 0) = 1048576\n"
        "101 sendto(7<TCP:[127.0.0.1:40000->127.0.0.1:5000]>, \"\"..., 1048576, MSG_NOSIGNAL, NULL, 0) = 65536\n"
        "102 write(9<TCP:[127.0.0.1:8000->127.0.0.1:50123]>, \"\"..., 120) = 120\n"  # serve's answer to its client
        "102 write(2</dev/pts/0>, \"\"..., 50) = 50\n"
        "103 sendto(8<TCP:[127.0.0.1:40002->127.0.0.1:50001]>, \"\"..., 10, 0, NULL, 0) = 10\n")
    assert publish_wakeups.sender_writes(trace, 5000) == [1048576, 65536]


def test_sizes_are_shown_by_bucket() -> None:
    shown = publish_wakeups.buckets([100, 32 * 1024, 32 * 1024, 2 << 20])
    assert shown.startswith("4 calls, mean ")
    assert "(<4K:1 <64K:2 ≥1M:1)" in shown
    assert publish_wakeups.buckets([]) == "none"
