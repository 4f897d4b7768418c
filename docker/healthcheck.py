"""The image's HEALTHCHECK: exit 0 when the sidecar answers GET /health on its port, else 1.

Standard library only; /health needs no token, so no secret is read here.
"""

from __future__ import annotations

import os
import sys
import urllib.request


def main() -> int:
    port = os.environ.get("NEEDLECAST_PORT", "7471")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3) as response:
            return 0 if response.status == 200 else 1
    except OSError as exc:
        print(f"healthcheck: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
