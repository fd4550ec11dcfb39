"""Transcribe the reference-match tables of containers/image's
signature/policy_reference_match_test.go into reference-match-tables.json (run once by hand:
python extract_tables.py policy_reference_match_test.go > reference-match-tables.json)."""

import json
import re
import sys

CONSTS = {
    "fullRHELRef": "registry.access.redhat.com/rhel7/rhel:7.2.3",
    "untaggedRHELRef": "registry.access.redhat.com/rhel7/rhel",
    "digestSuffix": "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "digestSuffixOther": "@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
}
TERM = r'(?:"[^"]*"|[A-Za-z]+)(?:\s*\+\s*(?:"[^"]*"|[A-Za-z]+))*'
ROW = re.compile(rf"^\s*\{{({TERM}),\s*({TERM}),\s*(true|false)\}},")


def value(expr: str) -> str:
    return "".join(json.loads(p) if p.startswith('"') else CONSTS[p] for p in re.split(r"\s*\+\s*", expr.strip()))


def table(source: str, start: str) -> list[list[object]]:
    body = source[source.index(start):]
    body = body[:body.index("\n}\n")]
    rows = []
    for line in body.splitlines():
        m = ROW.match(line)
        if m:
            rows.append([value(m.group(1)), value(m.group(2)), m.group(3) == "true"])
    return rows


def prefix_table(source: str) -> list[list[object]]:
    body = source[source.index("func TestPRMRemapIdentityRefMatchesPrefix"):]
    body = body[:body.index("\n}\n")]
    return [[value(m.group(1)), value(m.group(2)), m.group(3) == "true"]
            for m in map(ROW.match, body.splitlines()) if m]


src = open(sys.argv[1]).read()
print(json.dumps({
    "exact": table(src, "var prmExactMatchTestTable"),
    "repository": table(src, "var prmRepositoryMatchTestTable"),
    "repoDigestOrExact": table(src, "var matchRepoDigestOrExactTestTable"),
    "remapPrefix": prefix_table(src),
}, indent=1))
