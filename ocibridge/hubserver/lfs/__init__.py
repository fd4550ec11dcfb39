"""Uploads over Git LFS (the Hub's batch API, what ``HF_HUB_DISABLE_XET=1`` clients send)."""
