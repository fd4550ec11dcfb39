"""serve as a proxy of an upstream Hub (``ocibridge serve REG/PREFIX --upstream URL``):
a repository or revision the registry lacks is resolved at the upstream, fetched once as the
artifact ``push hf:ORG/NAME@COMMIT`` makes with the commit's ``.gitattributes`` and what the
upstream says of the commit, written to the registry and answered from it.

- :mod:`.settings`: the flags, as one value; the upstream's token (a file or the environment).
- :mod:`.session`: the one session with the upstream every request goes through, each built from
  checked parts (never a client's path), the token to the upstream's origin only, JSON bounded.
- :mod:`.client`: what the upstream says a revision is (its commit, its files).
- :mod:`.memo`: what it said of a revision, asked once per freshness window; :mod:`.ratewindow`: its
  429's window, obeyed by every request.
- :mod:`.entryrules`: which repositories and files may enter on model_info's metadata (license, file
  globs, pickle formats; the repo id globs are :mod:`.settings`').
- :mod:`.commitfetch`: one fetch per (repository, commit), written to the registry with its tags and
  the chunk table push binds (its chunks hashed by :mod:`.tee` as each file streams in).
- :mod:`.commitfacts`: what the upstream says of a commit beyond its bytes (git blob ids, dates,
  title, author), kept as the fetched manifest's annotations so serve answers as the upstream did.
- :mod:`.keptaccess`: a repository gated or private at the upstream, let in, kept so here (its refs
  record), its reader asked about first.
- :mod:`ocibridge.hubserver.repo.upstreamids`: the upstream's commit ids as the ids of what was fetched (a
  bookkeeping tag the repository keeps).
- :mod:`.proxy`: the upstream as the catalog holds it (:class:`.repo.arriving.Upstream`): asked on a
  miss, a branch's head re-checked.
- :mod:`.inflight`: a commit whose fetch is under way, as the read routes read it while it arrives.
- :mod:`.staleness`: the ``Warning`` of an answer given stale because the upstream did not answer.
- :mod:`.revocation`: a repository the upstream took back since it was fetched, refused here too.
- :mod:`.refguard`: upstream ref names that would land on serve's own tags (``latest``), never tagged.
- :mod:`.pickles`: pickle-bearing files by content, and the file rules on the listing the fetch writes.
- :mod:`.fetchbounds`: at most so many fetches under way, over all and by one client.
- :mod:`.tokenless`: an upstream that wants a token serve was not given: unavailable, and said so.

No HTTP routing here: the routes resolve through the catalog's one ``resolve`` as they always do
(the read routes with ``arriving``: a commit in flight handed out as it arrives)."""
