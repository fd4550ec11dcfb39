"""serve's quarantine book keeps a bounded number of states: a server asked for many manifests
reads the oldest again instead of holding every one it ever saw."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ocibridge.hubserver.repo import quarantined
from ocibridge.hubserver.repo.quarantined import QuarantineBook


class CountingBook(QuarantineBook):
    """The book as serve has it, its registry read replaced by a count (the bookkeeping is tested)."""

    def __init__(self) -> None:
        super().__init__((), kept=3600.0)
        self.read: list[str] = []

    def _why(self, resolved):  # type: ignore[no-untyped-def]
        self.read.append(resolved.model.digest)
        return None


def asked(book: CountingBook, n: int) -> None:
    book.held(SimpleNamespace(repo=SimpleNamespace(shown="acme/m"), model=SimpleNamespace(digest=f"sha256:{n}")))


def test_the_oldest_states_go_past_the_bound_and_are_read_again(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(quarantined, "KNOWN_MAX", 8)
    book = CountingBook()
    for n in range(20):
        asked(book, n)
    assert len(book.read) == 20
    asked(book, 19)  # among the newest: kept, not read again
    asked(book, 12)
    assert len(book.read) == 20
    asked(book, 0)  # the first asked: gone past the bound, read again
    assert book.read[-1] == "sha256:0" and len(book.read) == 21


def test_a_state_asked_again_moves_to_the_end_and_stays(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(quarantined, "KNOWN_MAX", 4)
    book = CountingBook()
    for n in range(4):
        asked(book, n)
    book.kept_for = 0.0  # every state stale: each ask reads again and re-files it
    asked(book, 0)
    book.kept_for = 3600.0
    for n in range(4, 7):  # three new ones push out 1, 2, 3, not 0 (re-read last)
        asked(book, n)
    before = len(book.read)
    asked(book, 0)
    assert len(book.read) == before
    asked(book, 1)
    assert book.read[-1] == "sha256:1"
