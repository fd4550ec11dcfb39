"""Lifetimes of what a proxy fetched (``serve --upstream URL --upstream-keep 30d``): a commit the
upstream gave that no one read for that long loses its tags, so the registry's garbage collection
frees its bytes; the next request for it fetches it again (the same artifact, the same digest).

- :mod:`.durations`: ``30d``, ``12h``, ``90m``, ``45s`` as seconds.
- :mod:`.readsrecord`: when each fetched commit was last read, and which names the proxy tagged
  on it, kept in the registry beside the repository's tags (every serve over it, and a restart,
  read the same record).
- :mod:`.notes`: reads noted in memory as they are answered, written to that record now and then
  (one registry write per repository read, per flush: never one per read).
- :mod:`.sweep`: which fetched commits go and why the others stay; dropping them (their tags moved
  to serve's tombstone), or only saying so (a dry run), with the bytes each frees.
- :mod:`.sweepthread`: serve's thread that flushes the reads and, on the writer, sweeps.
"""
