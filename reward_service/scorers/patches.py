"""The process-wide speed patches of sympy and math-verify, installed once per process.

Each replaces a library internal with an equivalent that is faster on a long-lived worker
(verdicts unchanged: ``tests/test_parity.py`` compares with stock math-verify row by row):

* ``sympy_namespace``: sympy's ``parse_expr`` namespace built once, not per number;
* ``parse_cache``: math-verify's two 20-entry parse memos made 8192 entries, plain integers
  built without ANTLR, ``Number(text)`` memoised;
* ``regex_prefilter``: an extraction regex is not run on a text that lacks a string all its
  matches contain;
* ``tail_scan``: ``extract_target_from_pred`` finds the same matches, in the same order,
  from the end of the text (a long response is not scanned whole when its answer is at the
  end).

Nothing installs them as a side effect of building a scorer: call :func:`install_patches`
where a process that scores starts (the zygote, before it builds the scorers and forks
workers; ``bench.correctness``; the in-process tests). A process that wants the library as
released (``tests/stock.py``, a user's parity check) simply never calls it.
"""

from __future__ import annotations

__all__ = ["install_patches", "patches_installed"]

_installed = False


def install_patches() -> None:
    """Install the four patches into this process (idempotent)."""
    global _installed
    from reward_service.scorers import parse_cache, regex_prefilter, sympy_namespace, tail_scan

    sympy_namespace.install()
    parse_cache.install()
    regex_prefilter.install()
    tail_scan.install()
    _installed = True


def patches_installed() -> bool:
    """Whether :func:`install_patches` ran in this process."""
    return _installed
