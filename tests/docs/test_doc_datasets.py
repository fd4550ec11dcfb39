"""docs/datasets.md, "A dataset's day", run as printed against a real registry, as a reader runs
it (tests/docrun.py: the programs come from a virtualenv holding what the page says to install):
publish through serve, load and stream, the proxy fetching from an upstream serve, pull into the
Hugging Face cache and an offline load, and a mount read with pyarrow and ``datasets``. Each
``print(...)  # WHAT`` line of a block prints WHAT (a trailing ``...`` a prefix of it); the
listen ports are replaced by free ones, so runs on one machine do not meet."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from ocibridge.lazymount.mounttable import is_mounted
from tests.docrun import doc_env, reader_venvs, run_block, runnable_blocks  # noqa: F401  (fixtures)

#: a line of a block's Python that prints, and the comment saying what it prints
CLAIM = re.compile(r"^\s*(?:for .*:\s*)?print\(.*\)\s+#\s+(.+?)\s*$", re.M)
MOUNTED = "greetings"


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def claims(code: str) -> list[str]:
    return CLAIM.findall(code)


def printed(claim: str, lines: list[str]) -> bool:
    if claim.endswith("..."):
        return any(line.startswith(claim[:-3]) for line in lines)
    return claim in lines


def test_claims_reads_the_print_lines_and_their_comments():
    code = "print(x[0])   # {'a': 1}\nprint(y)\nfor r in rows:\n    print('s', r)   # s {'a': ...\n"
    assert claims(code) == ["{'a': 1}", "s {'a': ..."]
    assert printed("s {'a': ...", ["s {'a': 1, 'b': 2}"]) and not printed("{'a': 1}", ["{'a': 2}"])


@pytest.mark.timeout(600)  # every block of the page: two serves, a proxy's fetch, a pull, a mount
def test_a_datasets_day_runs_as_printed(doc_env):  # noqa: F811
    work, env = doc_env("datasets.md")
    env["OCIBRIDGE_CACHE"] = str(work.parent / "cache")
    port, second = free_ports(2)
    blocks = runnable_blocks("datasets.md")
    assert [lang for lang, _, _ in blocks] == ["sh"] * 5
    said: list[list[str]] = []
    try:
        for lang, code, line in blocks:
            code = code.replace(":8080", f":{port}").replace(":8081", f":{second}")
            proc = run_block(lang, code, work, env)
            assert proc.returncode == 0, f"docs/datasets.md:{line} exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            lines = proc.stdout.splitlines()
            for claim in claims(code):
                assert printed(claim, lines), f"docs/datasets.md:{line}: {claim!r} not printed\n{proc.stdout}"
            said.append(lines)
    finally:
        if is_mounted(work / MOUNTED):
            subprocess.run([str(Path(env["VIRTUAL_ENV"]) / "bin" / "ocibridge"), "umount", str(work / MOUNTED)],
                           env=env, timeout=120, check=False)
    publish, load, proxy, pull, mount = said
    commit, *layers = publish[-4:]
    assert re.fullmatch(r"[0-9a-f]{40}", commit), publish  # upload_folder's commit id
    # train, test and the numbers config: each parquet file push_to_hub wrote a layer of the dataset type
    assert sorted(line.split()[-2].split("/")[0] for line in layers) == ["data", "data", "numbers"], layers
    assert all(line.endswith("  application/vnd.cnai.model.dataset.v1.raw") for line in layers), layers
    assert len([x for x in load if x.startswith("streamed ")]) == 3
    assert re.fullmatch(r"ocibridge-upstream-[0-9a-f]{40}", proxy[-1]), proxy  # the upstream's commit id kept
    assert not is_mounted(work / MOUNTED)
    assert mount[:2] == ["test-00000-of-00001.parquet", "train-00000-of-00001.parquet"], mount
    assert pull[-2:] == ["{'text': 'hello', 'label': 1}", "[1, 2, 3]"], pull
