"""OCI core: media types, digests, wire models and references."""
