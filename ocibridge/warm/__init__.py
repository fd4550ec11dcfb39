"""Warm starts' machinery: a compile cache's key (:mod:`.cachekey`), the artifact that keeps it
beside the model as a referrer (:mod:`.artifact`), a cache directory packed reproducibly
(:mod:`.pack`) and an archive from a registry unpacked as untrusted input (:mod:`.restore`).
The calls are the API's (ocibridge/api/warm.py: ``warm_save``, ``warm_caches``, ``warm_load``,
``warm_key``); docs/warm.md says how a node starts warm."""
