"""The local Ollama models directory (``ollama:NAME``) as a store, and the guard that keeps
Ollama destinations to Ollama models. Reading an Ollama model into a model package and
exporting an artifact as one is the format's job (:mod:`ocibridge.formats.ollama`)."""
