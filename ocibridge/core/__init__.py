"""The private core every layer uses: filesystem helpers that confine untrusted trees, streams,
interrupts, terminal text and the small HTTP helpers. Nothing here knows stores or models."""
