"""Targets of issue 8 checked against one run, and the Markdown report.

The report is generated above a marker line; hand-written analysis below the marker in an
existing ``docs/benchmarks.md`` is kept when the file is rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .proc import Series
from .scenarios import Results

MARKER = "<!-- end of generated results; hand-written notes below are kept on re-runs -->"
RSS_LIMIT_MB = 100.0
FLOOR = ("curl (floor)", "read+hash (floor)", "python + import httpx (floor)")
#: a verified pull's floors (issue 64): receiving to disk, and hashing the file with OpenSSL's own
#: command (hashlib's row, "sha256 (floor)", is kept beside it for the record)
VERIFIED_FLOOR = ("curl (floor)", "openssl sha256 (floor)")


def is_floor(tool: str) -> bool:
    return "(floor" in tool


@dataclass
class Check:
    target: str
    measured: str
    status: str  # PASS / FAIL / N/A


def _ok(series: Series | None) -> bool:
    return series is not None and bool(series.samples) and "error" not in series.extra


def _ratio_check(results: Results, target: str, scenario: str, tool: str, base: str, limit: float,
                 strict_less: bool = False) -> Check:
    a, b = results.get(scenario, tool), results.get(scenario, base)
    if not (_ok(a) and _ok(b)):
        return Check(target, _why_missing(a, b), "N/A")
    ratio = a.median / b.median
    passed = ratio < limit if strict_less else ratio <= limit
    best = a.spread[0] / b.spread[0]
    return Check(target, f"{a.median:.2f} s / {b.median:.2f} s = **{ratio:.2f}×** (fastest runs: {best:.2f}×)",
                 "PASS" if passed else "FAIL")


def _verified_floor_check(results: Results, target: str, scenario: str, limit: float) -> Check:
    """ocibridge against the slower of its two floors: receiving the bytes (curl, unverified)
    and hashing them (``openssl dgst -sha256`` of the same bytes); a verified pull needs both."""
    a = results.get(scenario, "ocibridge")
    floors = [results.get(scenario, f) for f in VERIFIED_FLOOR]
    if not (_ok(a) and all(_ok(f) for f in floors)):
        return Check(target, _why_missing(a, *floors), "N/A")
    assert a is not None
    base = max((f for f in floors if f is not None), key=lambda f: f.median)
    ratio = a.median / base.median
    best = a.spread[0] / max(f.spread[0] for f in floors if f is not None)
    return Check(target, f"{a.median:.2f} s / {base.median:.2f} s ({base.label}) = **{ratio:.2f}×** "
                         f"(fastest runs: {best:.2f}×)", "PASS" if ratio <= limit else "FAIL")


def _why_missing(*series: Series | None) -> str:
    for s in series:
        if s is not None and "error" in s.extra:
            return f"{s.label}: {s.extra['error']}"
    return "not measured"


def check_targets(results: Results, names: dict[str, str]) -> list[Check]:
    one, multi, big = names["one"], names["multi"], names["big"]
    checks = [
        _ratio_check(results, f"push {one} ≤ 1.10× curl floor", f"push {one}", "ocibridge", "curl (floor)", 1.10),
        _verified_floor_check(results, f"pull {one} (verified, to disk) ≤ 1.15× max(curl GET, openssl sha256) "
                                       "(issues 14, 64)",
                              f"pull {one}", 1.15),
    ]
    for op in ("push", "pull"):
        for peer in ("skopeo", "oras-py"):
            peer_label = next((t for t in results.table.get(f"{op} {multi}", {}) if t.startswith(peer)), peer)
            checks.append(_ratio_check(results, f"{op} {multi} faster than {peer_label}", f"{op} {multi}",
                                       "ocibridge", peer_label, 1.0, strict_less=True))
    checks.append(_rss_check(results))
    for op in ("push", "pull", "copy between registries"):
        a, b = results.get(f"{op} {one}", "ocibridge"), results.get(f"{op} {big}", "ocibridge")
        target = f"{op}: {big} uses the same memory as {one} (≤ +10 %)"
        if _ok(a) and _ok(b):
            checks.append(Check(target, f"{a.rss_mb:.0f} MB vs {b.rss_mb:.0f} MB",
                                "PASS" if b.rss_mb <= a.rss_mb * 1.10 else "FAIL"))
        else:
            checks.append(Check(target, _why_missing(a, b), "N/A"))
    checks.append(_zero_bytes(results, f"re-push {one}", "ocibridge",
                              "re-push of an unchanged model uploads 0 blob bytes"))
    checks.append(_zero_bytes(results, f"push of a fresh copy {one}", "ocibridge",
                              "push of a fresh copy (digest cache cold) uploads 0 blob bytes"))
    checks.append(_fresh_copy_time(results, one))
    checks.append(_zero_bytes(results, f"copy within a registry {multi}", "ocibridge",
                              "copy within a registry uploads 0 blob bytes"))
    within = f"copy within a registry {multi}"
    checks.append(_ratio_check(results, f"{within} ≤ 1.5× skopeo (issue 14)", within, "ocibridge", "skopeo", 1.5))
    checks.append(_ratio_check(results, f"{within}: its start-up floor alone (python + import httpx) "
                                        "≤ 1.5× skopeo, i.e. the target is reachable on this machine",
                               within, "python + import httpx (floor)", "skopeo", 1.5))
    checks.append(_ratio_check(results, f"copy between registries {multi} ≤ 0.9× skopeo (issue 14)",
                               f"copy between registries {multi}", "ocibridge", "skopeo", 0.9))
    carton = next((s for s in results.table if s.startswith("carton")), None)
    if carton:
        checks.append(_ratio_check(results, "carton → layout ≤ 1.20× read+hash+write floor (issue 64)", carton,
                                   "ocibridge", "read+hash+write (floor 2)", 1.20))
    checks += _linear_checks(results, names)
    return checks


def _rss_check(results: Results) -> Check:
    worst: tuple[float, str] = (0.0, "")
    for scenario, row in results.table.items():
        for tool, series in row.items():
            if tool.startswith("ocibridge") and _ok(series) and series.rss_mb > worst[0]:
                worst = (series.rss_mb, f"{scenario} / {tool}")
    if not worst[1]:
        return Check(f"peak RSS ≤ {RSS_LIMIT_MB:.0f} MB in every ocibridge run", "not measured", "N/A")
    return Check(f"peak RSS ≤ {RSS_LIMIT_MB:.0f} MB in every ocibridge run",
                 f"worst {worst[0]:.0f} MB ({worst[1]})", "PASS" if worst[0] <= RSS_LIMIT_MB else "FAIL")


def _fresh_copy_time(results: Results, one: str) -> Check:
    """A fresh copy costs a read and hash of its files, never an upload: well under the first
    push (which reads, hashes and sends)."""
    target = f"push of a fresh copy {one} ≤ 0.5× the first push"
    fresh, first = results.get(f"push of a fresh copy {one}", "ocibridge"), results.get(f"push {one}", "ocibridge")
    if not (_ok(fresh) and _ok(first)):
        return Check(target, _why_missing(fresh, first), "N/A")
    ratio = fresh.median / first.median
    return Check(target, f"{fresh.median:.2f} s / {first.median:.2f} s = **{ratio:.2f}×**",
                 "PASS" if ratio <= 0.5 else "FAIL")


def _zero_bytes(results: Results, scenario: str, tool: str, target: str) -> Check:
    series = results.get(scenario, tool)
    if not _ok(series):
        return Check(target, _why_missing(series), "N/A")
    logged = int(series.extra.get("registry blob bytes", -1))
    claimed = series.extra.get("bytesCopied")
    measured = f"registry log: {logged} B uploaded, {series.extra.get('mounts', 0)} mounts; ocibridge says {claimed} B"
    return Check(target, measured, "PASS" if logged == 0 and claimed in (0, None) else "FAIL")


def _linear_checks(results: Results, names: dict[str, str]) -> list[Check]:
    """Per-file cost from few→mid files vs mid→many files: quadratic work shows as growth."""
    out = []
    counts = {k: int(names[k].removesuffix("files")) for k in ("few", "mid", "many")}
    for tool in ("ocibridge pack (to layout)", "ocibridge push"):
        s = {k: results.get(f"files {names[k]}", tool) for k in counts}
        target = f"{tool}: time linear in file count ({counts['mid']} → {counts['many']} files)"
        if not all(_ok(x) for x in s.values()):
            out.append(Check(target, _why_missing(*s.values()), "N/A"))
            continue
        early = (s["mid"].median - s["few"].median) / (counts["mid"] - counts["few"])
        late = (s["many"].median - s["mid"].median) / (counts["many"] - counts["mid"])
        ratio = late / early if early > 0 else float("inf")
        out.append(Check(target, f"{early * 1e6:.0f} µs/file then {late * 1e6:.0f} µs/file ({ratio:.2f}×; "
                                 f"{s['few'].median:.2f} / {s['mid'].median:.2f} / {s['many'].median:.2f} s)",
                         "PASS" if ratio <= 1.3 else "FAIL"))
    return out


def _fmt_series(series: Series, floor: Series | None) -> list[str]:
    if "error" in series.extra and not series.samples:
        return [series.label, "—", "—", "—", "—", f"not run: {series.extra['error']}"]
    lo, hi = series.spread
    ratio = f"{series.median / floor.median:.2f}×" if _ok(floor) and floor is not series else ""
    notes = []
    for key in ("bytesCopied", "registry blob bytes", "mounts"):
        if key in series.extra:
            notes.append(f"{key} {series.extra[key]}")
    if "error" in series.extra:
        notes.append(f"failed: {series.extra['error']}")
    return [series.label, f"{series.median:.2f}", f"{lo:.2f}–{hi:.2f}", ratio, f"{series.rss_mb:.0f}",
            "; ".join(notes)]


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def render(results: Results, checks: list[Check], meta: dict[str, str]) -> str:
    lines = ["# Benchmarks", "",
             "Generated by `bench/run.py` (the peers, the floor and the targets are those of issue 8). "
             "Every time is the median of the repetitions with the spread (min–max); ratios are of "
             "medians; peak RSS is the maximum over the repetitions of the tool's own peak RSS "
             "(GNU `time -f %M`). Every push goes to an empty registry started "
             "for that sample.", "", "## Run", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    passed = sum(c.status == "PASS" for c in checks)
    failed = sum(c.status == "FAIL" for c in checks)
    lines += ["", f"## Targets ({passed} pass, {failed} fail, {len(checks) - passed - failed} not measured)", ""]
    lines += _table(["target", "measured", "result"], ([c.target, c.measured, c.status] for c in checks))
    lines += ["", "## Figures", ""]
    for scenario, row in results.table.items():
        floor = next((row[f] for f in FLOOR if f in row), None)
        lines += [f"### {scenario}", ""]
        lines += _table(["tool", "median s", "min–max s", "× floor", "peak RSS MB", "notes"],
                        (_fmt_series(s, floor) for s in row.values()))
        peers = _peer_ratios(row)
        if peers:
            lines += ["", "ocibridge ÷ peer (median time): " + ", ".join(peers)]
        lines.append("")
    return "\n".join(lines)


def _peer_ratios(row: dict[str, Series]) -> list[str]:
    ours = row.get("ocibridge")
    if not _ok(ours):
        return []
    out = []
    for name, series in row.items():
        if name.startswith("ocibridge") or is_floor(name) or not _ok(series):
            continue
        out.append(f"{name} **{ours.median / series.median:.2f}×**")
    return out


def merge_with_notes(generated: str, existing: str | None) -> str:
    """The generated part, then whatever followed the marker in the existing file."""
    tail = ""
    if existing and MARKER in existing:
        tail = existing.split(MARKER, 1)[1]
    return generated.rstrip() + "\n\n" + MARKER + (tail if tail.strip() else "\n")
