"""A registry in `auth: token` mode together with the token server it trusts."""

from __future__ import annotations

from pathlib import Path

from .certs import make_signing_key
from .registry import RegistryProcess, TokenAuth
from .token_server import TokenServer, User

RW = frozenset({"pull", "push"})
RWD = frozenset({"pull", "push", "delete"})
PULL = frozenset({"pull"})


def default_users() -> dict[str, User]:
    """alice: push/pull/delete on team/*, pull elsewhere; bob: pull only; admin: all + catalog."""
    return {
        "alice": User("alice-secret", [("team/*", RWD), ("*", PULL)]),
        "bob": User("bob-secret", [("*", PULL)]),
        "admin": User("admin-secret", [("*", frozenset({"*"}))], catalog=True),
    }


class TokenRegistry:
    """`.host`/`.url` of the registry; `.username`/`.password` are alice's (push on team/*)."""

    def __init__(self, workdir: Path, *, expires_in: int = 300,
                 users: dict[str, User] | None = None) -> None:
        workdir = Path(workdir)
        self.signing_key = make_signing_key(workdir / "token-keys")
        self.users = users if users is not None else default_users()
        # anonymous callers may pull public/* (so anonymous token flows are testable too)
        self.token_server = TokenServer(
            self.signing_key, self.users, expires_in=expires_in,
            anonymous=User("", [("public/*", PULL)]),
        )
        try:
            self.process = RegistryProcess(
                workdir / "registry",
                token=TokenAuth(
                    realm=self.token_server.realm,
                    service=self.token_server.service,
                    issuer=self.token_server.issuer,
                    rootcertbundle=self.signing_key.cert_file,
                ),
            )
        except BaseException:
            self.token_server.stop()
            raise
        self.username = "alice"
        self.password = self.users["alice"].password

    @property
    def host(self) -> str:
        return self.process.host

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def realm(self) -> str:
        return self.token_server.realm

    @property
    def service(self) -> str:
        return self.token_server.service

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def password_of(self, user: str) -> str:
        return self.users[user].password

    def stop(self) -> None:
        self.process.stop()
        self.token_server.stop()
