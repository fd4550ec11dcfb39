"""Layer bytes: the one layer reader (verified, bounded, decompressed), reproducible packing,
the tar applier with whiteouts, and uncompressed digests."""
