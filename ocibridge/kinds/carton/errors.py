"""Carton-specific errors: each says which archive and which entry, in one line."""

from __future__ import annotations

from ocibridge.errors import DigestMismatch, SourceError


class CartonError(SourceError):
    """A ``.carton`` that cannot be read as a Carton v1 model."""


class CartonMismatch(CartonError, DigestMismatch):
    """A file whose content does not match its ``MANIFEST`` sha256."""


class CartonLinkError(CartonError):
    """A file listed in ``LINKS`` that could not be fetched, or fetched with the wrong hash."""


class NotACarton(CartonError):
    """An artifact that does not hold a carton (no ``MANIFEST`` / ``carton.toml`` layers)."""
