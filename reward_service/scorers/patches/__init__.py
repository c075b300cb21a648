"""Everything we change in the libraries underneath (math-verify, latex2sympy2_extended,
sympy, ANTLR), behind this one entry. The day a library releases a new version, this folder
is what must be proven again; nothing outside it imports its modules (the architecture test).

Each patch replaces a library internal with an equivalent that is faster on a long-lived
worker; verdicts are unchanged, each by its differential test, and the whole set by
``tests/test_parity.py`` (stock math-verify row by row, in a fresh interpreter):

=================== ================================================ ==========================
patch               replaces (what it does)                          differential test
=================== ================================================ ==========================
``sympy_namespace`` sympy ``parse_expr``'s ``from sympy import *``   ``tests/test_parity.py``
                    namespace: built once, a fresh copy per call
``parse_cache``     math-verify's two 20-entry parse memos (8192     ``tests/test_parse_cache.py``
                    entries), plain integers without ANTLR,
                    ``Number(text)`` memoised
``fast_parse``      latex2sympy's ``create_parser``: SLL first, the  ``tests/test_fast_parse.py``
                    library's LL parse only where SLL fails
``fast_regex``      the extraction regexes: a zero-width guard on    ``tests/test_fast_regex.py``
                    the characters a match can start with
``regex_prefilter`` ``get_extraction_regexes``: a pattern is not run ``tests/test_regex_prefilter.py``
                    on a text that lacks a string all matches contain
``tail_scan``       ``extract_target_from_pred``: the same matches   ``tests/test_tail_scan.py``
                    in the same order, found from the text's end
                    (its last 16 characters first); each match's
                    ``groupdict()`` built once for ``extract_match``
=================== ================================================ ==========================

(``regex_tree`` is ``tail_scan``'s reading of a pattern's parse tree; ``warmup`` fills ANTLR's
prediction cache in the zygote, no library code replaced: ``tests/test_warmup.py``.) All were
proven against the versions in :data:`PROVEN`. :func:`install_patches` checks the installed
ones first: on any other version it installs nothing, logs one ERROR line naming the library,
both versions and the setting, and the process runs the libraries as released (slower, never
a verdict we did not prove).

Nothing installs them as a side effect of building a scorer or importing this package: the
zygote calls :func:`install_patches` before it builds the scorers and forks the workers,
unless ``REWARD_LIBRARY_PATCHES=false``: that setting runs stock library code everywhere, so
a user whom a verdict surprises can rule our patches out. The ``math`` profile's own reader
(:func:`extract_with_match`, ``tail_scan``'s exact scan that also returns where the answer was
found) is a rule of that profile, not a patch: it runs either way.
"""

from __future__ import annotations

import logging
from importlib import metadata

from reward_service.scorers.patches.parse_cache import MAX_KEY_CHARS
from reward_service.scorers.patches.regex_prefilter import wrap as prefiltered
from reward_service.scorers.patches.tail_scan import Group, Scan, scans
from reward_service.scorers.patches.tail_scan import extract as extract_with_match
from reward_service.scorers.patches.warmup import dfa_states, warm_parser

__all__ = [
    "MAX_KEY_CHARS",
    "PROVEN",
    "Group",
    "Scan",
    "dfa_states",
    "extract_with_match",
    "install_patches",
    "patches_installed",
    "prefiltered",
    "scans",
    "version_mismatches",
    "warm_parser",
]

log = logging.getLogger(__name__)

#: the library versions every patch above was proven against (their differential tests and
#: the parity suite ran on exactly these)
PROVEN: dict[str, str] = {
    "math-verify": "0.9.0",
    "latex2sympy2_extended": "1.11.0",
    "sympy": "1.14.0",
    "antlr4-python3-runtime": "4.13.2",
}

_installed: list[str] = []


def version_mismatches(proven: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """``{library: (proven, installed)}`` for each library whose installed version is not the
    one the patches were proven against (``"missing"`` when it is not installed)."""
    out: dict[str, tuple[str, str]] = {}
    for dist, want in (PROVEN if proven is None else proven).items():
        try:
            have = metadata.version(dist)
        except metadata.PackageNotFoundError:
            have = "missing"
        if have != want:
            out[dist] = (want, have)
    return out


def install_patches(*, proven: dict[str, str] | None = None) -> list[str]:
    """Install the patches into this process (idempotent) and return their names; none, with
    an ERROR log line, when a library is not at its :data:`PROVEN` version."""
    if _installed:
        return list(_installed)
    mismatched = version_mismatches(proven)
    if mismatched:
        found = ", ".join(f"{d}=={have} (proven on {want})" for d, (want, have) in mismatched.items())
        log.error("library patches not installed: %s; running the libraries as released "
                  "(set REWARD_LIBRARY_PATCHES=false to silence this)", found,
                  extra={"event": "patches_refused", "mismatched": sorted(mismatched)})
        return []
    from reward_service.scorers.patches import (
        parse_cache,
        regex_prefilter,
        sympy_namespace,
        tail_scan,
    )

    sympy_namespace.install()
    parse_cache.install()  # with fast_parse and fast_regex
    regex_prefilter.install()
    tail_scan.install()
    _installed[:] = ["sympy_namespace", "parse_cache", "fast_parse", "fast_regex",
                     "regex_prefilter", "tail_scan"]
    return list(_installed)


def patches_installed() -> bool:
    """Whether :func:`install_patches` installed the patches in this process."""
    return bool(_installed)
