"""``python -m ocibridge.lazymount``: the process ``ocibridge.mount`` starts (and ``ocibridge
mount`` without ``--foreground``): it reads its request on stdin (``lazymount.process``) and
serves the mount until it is unmounted. Its failure is one line on stderr, as the CLI's."""

from __future__ import annotations

import sys

from ocibridge.api.mount import MountRequest, serve_mount
from ocibridge.errors import OcibridgeError
from ocibridge.lazymount.process import read_request


def main() -> int:
    try:
        request = read_request()
        if not isinstance(request, MountRequest):
            raise OcibridgeError("python -m ocibridge.lazymount is started by ocibridge.mount, not by hand")
        serve_mount(request.ref, request.directory, transfer=request.transfer, verify=request.verify,
                    allow_other=request.allow_other)
    except OcibridgeError as e:
        print(f"ocibridge: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ocibridge: error: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
