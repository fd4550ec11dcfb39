"""Xet, the protocol huggingface_hub hands large files to (``hf_xet``): reads (:mod:`.xorbs`,
:mod:`.routes`) and uploads (:mod:`.upload`, :mod:`.shards`, :mod:`.merkle`, :mod:`.dedupe`)."""
