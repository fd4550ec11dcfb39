"""The shared model cache: verified blobs stored once by digest, snapshots of hard links.

``ocibridge path REF`` answers with a directory of the artifact's files that any number of
consumers share; two versions sharing most files share those files' bytes on disk.
"""
