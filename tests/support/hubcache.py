"""A Hugging Face cache of the test's own, offline: what every test of ``hf:`` sources sets up.

huggingface_hub reads ``HF_HUB_CACHE``/``HF_HUB_OFFLINE`` once, at import, into
``huggingface_hub.constants``: the environment alone would not reach an imported library, and the
constants alone would not reach a subprocess, so both are set.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def offline_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hub cache directory under ``tmp_path`` (created by whoever writes to it); nothing may
    reach the Hub."""
    import huggingface_hub.constants

    root = tmp_path / "hf-home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return root
