"""The Python API behind the package's small façade (:mod:`ocibridge`): push, pull, copy,
inspect, validate and the everyday store operations."""
