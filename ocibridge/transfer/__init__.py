"""Moving content between stores: the one graph copy, progress, and resumable pulls into a
directory (the pull cache)."""
