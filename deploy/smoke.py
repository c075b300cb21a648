"""Smoke test of a running service: POST /v1/score with known verdicts, show the sandbox.

    $ PORT=8000 python3 deploy/smoke.py            # or: python3 deploy/smoke.py URL

Stdlib only (it runs on the host that started the container, e.g. as image-check's SMOKE).
Exits 1 on a wrong verdict or HTTP error. Prints one JSON line: the verdicts, the sandbox
mode and each layer's status as /v1/info reports them.
"""

import json
import os
import sys
import urllib.request

ITEMS = [  # (item, expected status)
    ({"response": "so the answer is $\\boxed{\\frac{1}{2}}$.", "ground_truth": "0.5"}, "correct"),
    ({"response": "16 - 3 - 4 = 9, 9 * 2 = 18\n#### 18", "ground_truth": "18",
      "data_source": "openai/gsm8k"}, "correct"),
    ({"response": "I get \\boxed{17}.", "ground_truth": "18"}, "incorrect"),
    ({"response": "I don't know.", "ground_truth": "42"}, "no_answer"),
    ({"response": "The answer is (C).", "ground_truth": "C", "scorer": "choice"}, "correct"),
]


def _call(opener: urllib.request.OpenerDirector, url: str, body: object = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with opener.open(req, timeout=60) as reply:
        return json.loads(reply.read())


def main() -> int:
    base = sys.argv[1] if len(sys.argv) > 1 else f"http://127.0.0.1:{os.environ.get('PORT', '8000')}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    scored = _call(opener, base + "/v1/score", {"items": [item for item, _ in ITEMS]})
    got = [r["status"] for r in scored["results"]]
    want = [status for _, status in ITEMS]
    info = _call(opener, base + "/v1/info")
    layers = {name: layer["status"] for name, layer in info["sandbox"]["layers"].items()}
    report = {"statuses": got, "sandbox_mode": info["sandbox"]["mode"], "layers": layers}
    print(json.dumps(report))  # noqa: T201 - a CLI script: this line is its output
    if got != want:
        print(f"wrong verdicts: got {got}, want {want}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
