"""The Hugging Face Hub cache (``$HF_HUB_CACHE``) as a source of pushes and a destination of pulls."""
