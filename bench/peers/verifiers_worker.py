"""Run by verifiers' own interpreter (its venv), not imported by the bench: one racing process
of the ``verifiers`` 0.4.0 math scorer, ``verifiers.v1.verify_boxed_math_answer``, called in
this process's main thread (its math-verify timeouts are ``signal.alarm``: from any other
thread the function returns 0.0 even for a correct answer). verifiers' async scoring calls a
task's reward hook on the event loop's own thread (``verifiers/v1/utils/decorators.py``:
``invoke`` is ``fn(**kwargs)``), so a direct call in the main thread is the same work.

Protocol (stdin/stdout, one JSON object a line): reads the job file named in argv (``items``:
``[response, gold]`` pairs to score, ``warm``: pairs scored first and not reported), prints
``{"ready": true}``, waits for a line on stdin, then prints ``{"start": t}`` and one
``{"i", "score", "s", "extracted"}`` per item as soon as it is scored (``s``: its seconds;
``t`` on the system-wide monotonic clock), and ``{"end": t}``.

usage: python verifiers_worker.py JOB.json
"""

import json
import logging
import sys
import threading
import time

from verifiers.v1 import verify_boxed_math_answer
from verifiers.v1.utils.score import extract_boxed_answer


def main() -> None:
    assert threading.current_thread() is threading.main_thread()
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it logs whole inputs
    with open(sys.argv[1]) as fh:
        job = json.load(fh)
    for response, gold in job["warm"]:
        verify_boxed_math_answer(response, gold)
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()
    print(json.dumps({"start": time.monotonic()}), flush=True)
    for i, (response, gold) in enumerate(job["items"]):
        t0 = time.monotonic()
        score = verify_boxed_math_answer(response, gold)
        s = time.monotonic() - t0
        tail = response.rsplit("</think>", 1)[-1]
        print(json.dumps({"i": i, "score": score, "s": s,
                          "extracted": extract_boxed_answer(tail, strict=True)[:200]}),
              flush=True)
    print(json.dumps({"end": time.monotonic()}), flush=True)


if __name__ == "__main__":
    main()
