"""Durations as the command line writes them (``30d``, ``12h``, ``90m``, ``45s``), for
``serve --upstream-keep``."""

from __future__ import annotations

from ocibridge.hubserver.lifetimes.durations import parse_duration as parse_duration
from ocibridge.hubserver.lifetimes.durations import shown as shown
