"""What serve grants and later takes back without a header: Xet access tokens, xorb URLs, LFS
upload URLs, each an HMAC under a key made from the token file's tokens (:class:`Signer`).
Who may be granted what is :mod:`.access`'s; this module only signs and checks signatures."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Sequence

from ocibridge.hubserver.answers import number

#: seconds what serve grants (a Xet token, a signed URL) is good for
TOKEN_LIFE = 3600
#: a signer's key, its clients' name key, the earlier (key, name key, good until), the clients served
_State = tuple[bytes | None, bytes | None, tuple[tuple[bytes, bytes, float], ...], frozenset[str]]


class Signer:
    """Access tokens and URLs, signed with a key made from ``tokens``.

    Every replica reading the same token file makes the same key, so a token one replica grants
    is good at another. With no tokens the server is open, and so is this. A grant names the
    client it was made for (:meth:`client_of` its bearer token), and so do the xorb URLs made
    from it: that name is the client's share of the send permits (:class:`.guard.Shares`).

    When the token file changes (:meth:`rekey`), the key is made anew from its tokens; what the
    old key signed stays good until it expires, so an upload in flight is not cut by a token
    added for someone else, but only when the client it names is still one of the tokens: a
    removed token's grants stop with it. ``fresh`` is called before each check (the
    :class:`Gate`'s look at the token file: these routes see no bearer token)."""

    def __init__(self, tokens: Sequence[bytes], clock: Callable[[], float] = time.time,
                 purpose: bytes = b"ocibridge-xet-grant", served: Sequence[bytes] | None = None):
        self.clock = clock
        self.purpose = purpose
        self.fresh: Callable[[], object] = lambda: None
        # the key, the name key, the earlier keys (each good until then) and the clients still
        # served: one value, replaced whole, so a check never sees a new key with the old clients
        self._state: _State = (None, None, (), frozenset())
        self.rekey(tokens, served)

    @property
    def key(self) -> bytes | None:
        return self._state[0]

    def rekey(self, tokens: Sequence[bytes], served: Sequence[bytes] | None = None) -> None:
        """The key of a new set of ``tokens`` (none: the old keys stay, no client is good); the
        clients of ``served`` (default: every token) are those whose grants stay good. A client's
        name depends on the token file alone, not on the purpose, so every signer of one file
        names a token alike (an LFS upload and a Xet shard of one writer are one writer's)."""
        now = self.clock()
        key, names, earlier, _ = self._state
        material = b"\0".join(sorted(tokens))
        new = hashlib.sha256(self.purpose + b"\0" + material).digest() if tokens else key
        new_names = hashlib.sha256(b"ocibridge-client\0" + material).digest() if tokens else names
        old = [(k, n, until) for k, n, until in earlier if until > now and k != new]
        if key is not None and names is not None and key != new:
            old.append((key, names, now + TOKEN_LIFE))
        name_keys = [n for n in (new_names, *(n for _, n, _ in old)) if n is not None]
        clients = frozenset(_mac(n, f"client {t.decode()}")[:16] for n in name_keys
                            for t in (tokens if served is None else served))
        self._state = (new, new_names, tuple(old), clients)

    def _sign(self, text: str) -> str:
        assert self.key is not None
        return _mac(self.key, text)

    def _signed_by_one(self, signature: str, text: str, client: str) -> bool:
        """``signature`` is one of a live key's over ``text``, for a client that is still served
        ("": none named, as an upload URL)."""
        self.fresh()
        key, _, old, clients = self._state
        now = self.clock()
        keys = [k for k in (key, *(k for k, _, until in old if until > now)) if k is not None]
        good = any(hmac.compare_digest(signature.encode(), _mac(k, text).encode()) for k in keys)
        return good and (not client or client in clients)

    def client_of(self, token: str) -> str:
        """A short name of a bearer token (what a grant and its URLs carry; the token itself never
        appears in a URL); "" on an open server, where every client is anonymous."""
        names = self._state[1]
        if self.key is None or names is None:
            return ""
        return _mac(names, f"client {token}")[:16]

    def names_of(self, token: str) -> frozenset[str]:
        """Every name ``token`` is given in what a live key signed (:meth:`client_of`'s under the
        current name key and each earlier one still good): whose grant a client name is."""
        _, names, old, _ = self._state
        now = self.clock()
        keys = [n for n in (names, *(n for _, n, until in old if until > now)) if n is not None]
        return frozenset(_mac(n, f"client {token}")[:16] for n in keys)

    def expiry(self) -> int:
        """When what is granted now expires (Unix seconds)."""
        return int(self.clock()) + TOKEN_LIFE

    def grant(self, scope: str, client: str = "") -> tuple[str, int]:
        """A token for ``scope`` (a repo's commit) and ``client``, and when it expires."""
        expires = self.expiry()
        if self.key is None:
            return "open", expires
        return f"{expires}.{client}.{self._sign(f'token {scope} {expires} {client}')}", expires

    def granted(self, token: str, scope: str) -> str | None:
        """The client a valid token for ``scope`` was granted to; None when it is not valid."""
        if self.key is None:
            return ""
        expires, _, rest = token.partition(".")
        client, _, sig = rest.partition(".")
        if (number(expires) or 0) <= self.clock():
            return None
        return client if self._signed_by_one(sig, f"token {scope} {expires} {client}", client) else None

    def allows(self, token: str, scope: str) -> bool:
        return self.granted(token, scope) is not None

    def signed(self, path: str, expires: int, client: str = "") -> str:
        """``path`` with the query that lets ``client`` fetch it without a header until ``expires``
        (a query ``path`` has is signed with it: what :meth:`url_allowed` is then asked about)."""
        if self.key is None:
            return path
        sep = "&" if "?" in path else "?"
        return f"{path}{sep}expires={expires}&client={client}&signature={self._sign(f'url {path} {expires} {client}')}"

    def url_allowed(self, path: str, expires: str | None, signature: str | None, client: str | None = "") -> bool:
        if self.key is None:
            return True
        if expires is None or signature is None or client is None or (number(expires) or 0) <= self.clock():
            return False
        return self._signed_by_one(signature, f"url {path} {expires} {client}", client)


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
