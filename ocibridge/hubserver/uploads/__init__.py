"""Where uploaded bytes land, whichever protocol (LFS, Xet) brought them: staging, the relay of a
large upload on to the registry, blobs mounted from another repository."""
