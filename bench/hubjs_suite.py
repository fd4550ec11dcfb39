"""@huggingface/hub's own tests (huggingface.js, packages/hub), run against ``ocibridge serve`` on a
fresh local registry: the Hub's contract as its JavaScript client knows it (issue 88).

    .venv/bin/python -m bench.hubjs_suite --hubjs /tmp/hubjs [--mirror DIR] [--only SPEC ...] [--out DIR]
    .venv/bin/python -m bench.hubjs_suite --resummarize OUT      # summary.md again from OUT/vitest.json

``--hubjs`` is a working folder outside this repository: when it has no ``packages/hub`` yet, the
package is exported there from the huggingface.js mirror (``--mirror``, a bare git dir: fetch it
with ``github:huggingface/huggingface.js``), its workspace dependencies swapped for the npm
registry's releases, and installed with npm (vitest 0.34, as the monorepo pins). Nothing of
huggingface.js is committed here.

Each run: a fresh ``docker-registry`` and ``ocibridge serve`` (bench/hub_suite.py's, with TOKEN_FILE
below: the suite's user ``hub.js`` and token ``hf_hub.js``, writing everywhere), the copy's
src/test/consts.ts pointed at serve, the files the tests take from huggingface.co as input served
from serve's fixture repositories (their fetches redirected by a vitest setup file), vitest run
on the in-scope spec files with its JSON reporter, and ``summary.md``: in scope / passing /
failing (first error line) / out of scope (the rule that put it there). Tests in other spec
files read huggingface.co itself (model-info, list-models, ...: no route from here) or test no
Hub at all (src/utils): not run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from bench.hub_suite import ROOT, start_serve
from tests.support.registry import RegistryProcess

MIRROR = Path("/work/.mirror/huggingface+huggingface.js/repo")
TEST_USER, TEST_TOKEN = "hub.js", "hf_hub.js"  # packages/hub/src/test/consts.ts
TOKEN_FILE = f"{TEST_TOKEN} user={TEST_USER} write=* fullname=Hub%20JS orgs=huggingface-js\nanonymous read=*\n"

#: the spec files whose tests talk to TEST_HUB_URL (the Hub's CI endpoint): serve stands in for it
IN_SCOPE_FILES = [
    "src/lib/check-repo-access.spec.ts", "src/lib/commit.spec.ts", "src/lib/create-branch.spec.ts",
    "src/lib/create-repo.spec.ts", "src/lib/delete-branch.spec.ts", "src/lib/delete-file.spec.ts",
    "src/lib/delete-files.spec.ts", "src/lib/download-file.spec.ts", "src/lib/upload-file.spec.ts",
    "src/lib/upload-files-with-progress.spec.ts", "src/lib/upload-files.fs.spec.ts",
    "src/lib/upload-files.spec.ts", "src/lib/who-am-i.spec.ts", "src/lib/copy-files.spec.ts",
]

#: huggingface.co repositories the tests read their INPUT from -> serve's fixture repositories
#: (:func:`seed`); a test that asserts huggingface.co's own content is out of scope instead
REDIRECTS = {"https://huggingface.co/gpt2/": "/fixtures/gpt2/",
             "https://huggingface.co/openai-community/gpt2/": "/fixtures/gpt2/",
             "https://huggingface.co/api/models/openai-community/gpt2": "/api/models/fixtures/gpt2",
             "https://huggingface.co/spaces/aschen/push-model-from-web/": "/fixtures/push-model-from-web/",
             "https://huggingface.co/spaces/huggingfacejs/push-model-from-web/": "/fixtures/push-model-from-web/",
             "https://huggingface.co/": "/"}

SETUP = """// written by ocibridge's bench/hubjs_suite.py: huggingface.co's fetches go to serve
const redirects: Record<string, string> = REDIRECTS;
const original = globalThis.fetch;
globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  for (const [from, to] of Object.entries(redirects)) {
    if (url.startsWith(from)) {
      const moved = "SERVE" + to + url.slice(from.length);
      return original(typeof input === "string" || input instanceof URL ? moved : new Request(moved, input), init);
    }
  }
  return original(input, init);
}) as typeof fetch;
"""

#: the harness's own spec (written into the copy, never committed there): a file uploaded with
#: ``useXet: true``, its bytes kept for :func:`read_back` to compare through huggingface_hub
READBACK_SPEC = """// written by ocibridge's bench/hubjs_suite.py
import { it } from "vitest";
import { writeFileSync } from "node:fs";
import { createRepo } from "./create-repo";
import { uploadFile } from "./upload-file";
import { TEST_ACCESS_TOKEN, TEST_HUB_URL, TEST_USER } from "../test/consts";

it("uploads over Xet for ocibridge's read-back", async () => {
  const bytes = new Uint8Array(3_000_000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = ((i * 2654435761) >>> 13) & 255;
  const repo = { type: "model" as const, name: `${TEST_USER}/READBACK_REPO` };
  await createRepo({ accessToken: TEST_ACCESS_TOKEN, hubUrl: TEST_HUB_URL, repo });
  await uploadFile({ accessToken: TEST_ACCESS_TOKEN, hubUrl: TEST_HUB_URL, repo, useXet: true,
                     file: { path: "weights.bin", content: new Blob([bytes]) } });
  writeFileSync("READBACK_FILE", Buffer.from(bytes));
});
"""
READBACK_REPO = "xet-readback"

#: (group, reason, regex over "file > describe > test"): first match wins, counted apart
OUT_OF_SCOPE = [
    ("buckets", "Hub storage buckets: not repositories serve keeps", r"bucket"),
    ("spaces", "Spaces: not OCI models", r"space"),
    ("pull requests", "pull requests (refs/pr/N): serve makes none", r"\bPR\b|pull request"),
    ("huggingface.co", "asserts the content of huggingface.co's own repositories (gpt2's README, "
     "celinah/xet-experiments; the size and SHA-256 of push-model-from-web's shard): no route from here",
     r"download regular file|downoad xet file|from HF with web urls"),
    ("offline", "a unit test of the client (mocked fetch, no Hub)", r"\(mocked\)|relativeUnderFolder"),
]


def prepare(hubjs: Path, mirror: Path) -> Path:
    """``hubjs/packages/hub``, exported and installed when it is not there yet."""
    package = hubjs / "packages" / "hub"
    if (package / "node_modules" / "vitest").is_dir():
        return package
    hubjs.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(mirror), "archive", "HEAD", "packages/hub"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(hubjs)], input=archive, check=True)
    manifest = json.loads((package / "package.json").read_text())
    manifest["dependencies"] = {"@huggingface/tasks": "^0.21.0", "@huggingface/xetchunk-wasm": "^0.1.0"}
    manifest["devDependencies"] = {"@types/cli-progress": "^3.11.6", "vitest": "^0.34.6", "vite": "^5.0.2",
                                   "@types/node": "^22.14.1", "typescript": "^5.8.3"}
    manifest.pop("scripts", None)
    (package / "package.json").write_text(json.dumps(manifest, indent=1))
    subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=package, check=True)
    return package


def point_at(package: Path, url: str) -> None:
    """The copy's TEST_HUB_URL at serve, and a vitest setup file (in a config of its own) that
    sends the tests' fetches of huggingface.co to serve's fixture repositories (REDIRECTS)."""
    consts = package / "src" / "test" / "consts.ts"
    text = re.sub(r'TEST_HUB_URL = "[^"]*"', f'TEST_HUB_URL = "{url}"', consts.read_text())
    consts.write_text(text)
    (package / "hubjs-redirect.setup.ts").write_text(SETUP.replace("SERVE", url).replace(
        "REDIRECTS", json.dumps(REDIRECTS)))
    (package / "vitest.serve.config.mts").write_text(
        'import { defineConfig } from "vitest/config";\n'
        'export default defineConfig({ test: { testTimeout: 60_000, setupFiles: ["./hubjs-redirect.setup.ts"] } });\n')


def seed(package: Path, url: str) -> None:
    """serve's fixture repositories (FIXTURES): the files the tests take from huggingface.co as
    input, each read back and compared with what the test itself fetched (so their text is the
    test's input, not its answer), except gpt2's config.json, quoted in upload-file.spec.ts."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=url, token=TEST_TOKEN)
    quoted = re.search(r"\(await content\?\.text\(\)\)\?\.trim\(\),\s*`([^`]*)`",
                       (package / "src" / "lib" / "upload-file.spec.ts").read_text())
    files = {"fixtures/gpt2": {"config.json": (quoted.group(1).strip() + "\n") if quoted else "{}\n"},
             "fixtures/push-model-from-web": {
                 "mobilenet/model.json": json.dumps({"format": "layers-model", "weightsManifest": []}),
                 "mobilenet/group1-shard1of2": "shard one " * 400, "mobilenet/group1-shard2of2": "shard two " * 300,
                 "mobilenet/coffee.jpg": "not a jpeg, a fixture", "mobilenet/README.md": "# mobilenet fixture\n"}}
    for repo_id, contents in files.items():
        api.create_repo(repo_id, exist_ok=True)
        api.create_commit(repo_id, [CommitOperationAdd(p, c.encode()) for p, c in contents.items()],
                          commit_message="fixtures of the @huggingface/hub suite")


def out_of_scope(name: str) -> tuple[str, str] | None:
    for group, reason, pattern in OUT_OF_SCOPE:
        if re.search(pattern, name, re.IGNORECASE):
            return group, reason
    return None


def read_back(url: str, out: Path) -> str:
    """The harness's own check: the file @huggingface/hub uploaded with ``useXet: true`` read back
    through huggingface_hub byte for byte, and the xorbs it POSTed to serve's CAS routes."""
    from huggingface_hub import hf_hub_download

    sent = out / "readback.bin"
    if not sent.exists():
        return "- Xet read-back: the upload did not run (see vitest.log)"
    repo = f"{TEST_USER}/{READBACK_REPO}"
    got = Path(hf_hub_download(repo, "weights.bin", endpoint=url, token=TEST_TOKEN, cache_dir=out / "hf-cache"))
    log = (out / "serve-access.log").read_text(errors="replace")
    xorbs = len(re.findall(rf"POST /xet-write/{re.escape(repo)}/v1/xorbs/", log))
    puts = len(re.findall(rf"PUT /ocibridge/lfs/[0-9a-f]+/\d+/{re.escape(repo)}", log))
    same = got.read_bytes() == sent.read_bytes()
    return (f"- Xet read-back: {sent.stat().st_size} bytes uploaded by @huggingface/hub (useXet: true), "
            f"{'identical' if same else 'DIFFERENT'} through huggingface_hub; {xorbs} xorb POST(s), {puts} LFS PUT(s)")


def summarize(out: Path) -> str:
    report = json.loads((out / "vitest.json").read_text())
    meta = json.loads((out / "meta.json").read_text()) if (out / "meta.json").exists() else {}
    rows: list[tuple[str, str, str]] = []  # (name, outcome, first error line)
    for suite in report.get("testResults", []):
        rel = Path(suite["name"]).name
        for test in suite.get("assertionResults", []):
            name = f"{rel} > {' > '.join(test.get('ancestorTitles', []))} > {test['title']}"
            first = (test.get("failureMessages") or [""])[0].splitlines()
            rows.append((name, test["status"], first[0] if first else ""))
    excluded: Counter[str] = Counter()
    passing, failing = [], []
    for name, outcome, error in rows:
        scope = out_of_scope(name)
        if "read-back" in name:
            continue  # the harness's own check (read_back), not one of the suite's tests
        if scope is not None:
            excluded[f"{scope[0]}: {scope[1]}"] += 1
        elif outcome == "passed":
            passing.append(name)
        else:
            failing.append((name, outcome, error))
    lines = [f"# @huggingface/hub's tests against serve ({meta.get('when', '')})", "",
             f"huggingface.js {meta.get('commit', '?')}, @huggingface/hub {meta.get('version', '?')}", "",
             f"- in scope: {len(passing) + len(failing)}", f"- passing: {len(passing)}",
             f"- failing: {len(failing)}", f"- out of scope: {sum(excluded.values())}",
             meta.get("readback", ""), ""]
    lines += ["## Out of scope", ""] + [f"- {n}: {why}" for why, n in excluded.most_common()] + [""]
    lines += ["## Failing", ""] + [f"- {n} ({o}): {e}" for n, o, e in failing] + [""]
    lines += ["## Passing", ""] + [f"- {n}" for n in passing] + [""]
    text = "\n".join(lines)
    (out / "summary.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hubjs", type=Path, default=Path("/tmp/hubjs"))
    parser.add_argument("--mirror", type=Path, default=MIRROR)
    parser.add_argument("--only", nargs="*", help="spec files (relative to packages/hub) instead of IN_SCOPE_FILES")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--resummarize", type=Path)
    args = parser.parse_args()
    if args.resummarize:
        print(summarize(args.resummarize))
        return 0
    package = prepare(args.hubjs, args.mirror)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path(tempfile.gettempdir()) / "hubjs-runs" / stamp
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(args.mirror), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    version = json.loads((package / "package.json").read_text()).get("version", "?")
    (out / "meta.json").write_text(json.dumps({"when": stamp, "commit": commit, "version": version}))
    work = Path(tempfile.mkdtemp(prefix="hubjs-suite-"))
    registry = RegistryProcess(work / "registry", log_level="warn")
    serve = None
    try:
        token_file = work / "tokens.txt"
        token_file.write_text(TOKEN_FILE)
        serve = start_serve(registry.host, work, out, token_file,
                            [sys.executable, "-m", "ocibridge", "serve"], [], ROOT)
        point_at(package, serve.url)
        seed(package, serve.url)
        readback = package / "src" / "lib" / "zz-ocibridge-readback.spec.ts"
        readback.write_text(READBACK_SPEC.replace("READBACK_REPO", READBACK_REPO).replace(
            "READBACK_FILE", str(out / "readback.bin")))
        t0 = time.monotonic()
        with (out / "vitest.log").open("wb") as log:
            subprocess.run(["npx", "vitest", "run", "--config", "vitest.serve.config.mts", "--reporter=json",
                            f"--outputFile={out / 'vitest.json'}", *(args.only or IN_SCOPE_FILES),
                            str(readback.relative_to(package))],
                           cwd=package, stdout=log, stderr=subprocess.STDOUT, timeout=1800)
        print(f"vitest ran {time.monotonic() - t0:.0f} s; results in {out}")
        meta = json.loads((out / "meta.json").read_text())
        meta["readback"] = read_back(serve.url, out)
        (out / "meta.json").write_text(json.dumps(meta))
    finally:
        if serve is not None:
            serve.stop()
        registry.stop()
    print(summarize(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
