"""A containers-policy ``docker`` scope as the image patterns of Kyverno and policy-controller.

A scope names a repository and everything below it (``host/ns``), one tag or digest
(``host/repo:tag``), a host, ``*.domain`` hosts, or everything (``""``). The controllers match
patterns against the reference string instead, which carries a tag or digest: Kyverno's ``*``
crosses ``/`` (pkg/utils/wildcard), policy-controller's ``*`` stops at ``/`` and ``**`` does not
(pkg/apis/glob/glob.go), and each normalises Docker Hub its own way (Kyverno keeps
``docker.io/busybox`` as written, go-containerregistry makes ``index.docker.io/library/busybox``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.errors import UsageError

_GLOB_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:/.@*")


@dataclass(frozen=True)
class ImageScope:
    """One scope, classified: ``kind`` is all, wildcard, host, name (repository or namespace)
    or exact (with a tag or digest)."""

    text: str
    kind: str

    @classmethod
    def parse(cls, text: str) -> ImageScope:
        """A scope as containers-policy.json(5) writes it; anything else is a one-line error."""
        if text == "":
            return cls(text, "all")
        if not set(text) <= _GLOB_CHARS or "//" in text or text.endswith("/"):
            raise UsageError(f"{text!r} is not a registry scope (host, host/namespace, host/repo:tag, *.domain)")
        if text.startswith("*."):
            if "*" in text[1:] or "/" in text:
                raise UsageError(f"{text!r}: a wildcard scope is *.domain, with no path")
            return cls(text, "wildcard")
        if "*" in text:
            raise UsageError(f"{text!r}: '*' is only allowed as the *.domain of a host scope")
        if "/" not in text:
            return cls(text, "host")
        last = text.rsplit("/", 1)[1]
        return cls(text, "exact" if "@" in text or ":" in last else "name")

    @property
    def name(self) -> str:
        """The repository or namespace (a tag or digest taken off)."""
        if self.kind != "exact":
            return self.text
        if "@" in self.text:
            return self.text.split("@", 1)[0]
        head, last = self.text.rsplit("/", 1)
        return f"{head}/{last.split(':', 1)[0]}"

    def chain(self) -> list[str]:
        """The scopes containers/image would look at after this one, most specific first."""
        if self.kind == "all":
            return []
        if self.kind == "wildcard":
            return [*_wildcards(self.text[2:]), ""]
        found = [self.name] if self.kind == "exact" else []
        rest = self.name
        while "/" in rest:
            rest = rest.rsplit("/", 1)[0]
            found.append(rest)
        return [*found, *_wildcards(rest.split(":", 1)[0]), ""]

    def narrower_than(self, other: ImageScope) -> bool:
        """Whether this scope, where it applies, hides ``other`` (containers/image takes the most specific)."""
        return other.text != self.text and other.text in self.chain()

    def kyverno(self) -> list[str]:
        """Kyverno ``imageReferences`` (``*`` crosses ``/``; Docker Hub as written and normalised)."""
        return [p for name in _hub_forms(self) for p in _patterns(self, name, "*")]

    def policy_controller(self) -> list[str]:
        """policy-controller ``images[].glob`` (``**`` crosses ``/``; Docker Hub as index.docker.io)."""
        name = self.text
        if name.startswith("docker.io/"):
            name = "index." + name
        return _patterns(self, name, "**")


def _wildcards(host: str) -> list[str]:
    found = []
    while "." in host:
        host = host.split(".", 1)[1]
        found.append(f"*.{host}")
    return found


def _hub_forms(scope: ImageScope) -> list[str]:
    """Kyverno compares the reference as the Pod writes it: ``docker.io/library/x`` or ``docker.io/x``."""
    if scope.text.startswith("docker.io/library/"):
        return [scope.text, "docker.io/" + scope.text[len("docker.io/library/"):]]
    return [scope.text]


def _patterns(scope: ImageScope, name: str, deep: str) -> list[str]:
    if scope.kind == "all":
        return [deep]
    if scope.kind == "exact":
        return [name]
    if scope.kind in ("host", "wildcard"):
        return [f"{name}/{deep}", f"{name}:*/{deep}"] if scope.kind == "wildcard" else [f"{name}/{deep}"]
    return [f"{name}:*", f"{name}@*", f"{name}/{deep}"]
