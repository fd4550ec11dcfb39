"""Which files of a commit are regular files, and their git blob ids: the Hub keeps a small text
file in git itself, not in git-lfs, and names it by that id (tree ``oid``, a sibling's
``blobId``, the resolve ``ETag``, the Hub cache's ``blobs/<id>``).

serve records them when it commits them (:mod:`.writeroutes.commit`: a file sent inline is regular),
in one annotation of the commit's manifest, :data:`REGULAR`: compact JSON ``{path: git blob id}``.
Never in the layers, which stay byte for byte ``push``'s of the same files; no read hashes a file
again for it. A manifest that records none (pushed outside serve) has every file in git-lfs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from ocibridge.core import boundedjson

#: the manifest annotation that names a commit's regular files
REGULAR = "io.ocibridge.commit.regular"
_BLOB_ID = re.compile(r"[0-9a-f]{40}")


def git_blob_id(data: bytes) -> str:
    """git's name of a blob of ``data`` (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's name, not security


def annotation(regular: Mapping[str, str]) -> str:
    """The value of :data:`REGULAR` for ``regular`` (path -> git blob id): compact, sorted."""
    return json.dumps(dict(sorted(regular.items())), separators=(",", ":"))


def recorded(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """path -> git blob id of the regular files a manifest's ``annotations`` record; {} when they
    record none. An entry not as serve writes it (no string path, no 40-hex id) is left out:
    that file is listed as one in git-lfs, as every file of a manifest without the record is."""
    text = (annotations or {}).get(REGULAR)
    if not isinstance(text, str):
        return {}
    try:
        found = boundedjson.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {path: blob for path, blob in found.items()
            if isinstance(path, str) and isinstance(blob, str) and _BLOB_ID.fullmatch(blob)}
