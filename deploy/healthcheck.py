"""Container HEALTHCHECK: exit 0 when GET /readyz on this container's port answers 200.

The port is $PORT, else $REWARD_PORT, else 8000 (the same order as the image's CMD). Proxies
are ignored: the probe must reach this container's own loopback, never a proxy.
"""

import os
import sys
import urllib.request

port = os.environ.get("PORT") or os.environ.get("REWARD_PORT") or "8000"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(f"http://127.0.0.1:{port}/readyz", timeout=3) as reply:
        sys.exit(0 if reply.status == 200 else 1)
except OSError as exc:  # connection refused, 503 while starting or draining, timeout
    print(f"not ready: {exc}", file=sys.stderr)  # noqa: T201 - shown by docker inspect
    sys.exit(1)
