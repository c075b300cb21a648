"""Structured logging: one line per record, ``key=value`` fields. Configured only by the CLI."""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging"]

_STD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "color_message",
}


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STD}
        if not extras:
            return base
        fields = " ".join(f"{k}={str(v)[:200]!r}" if " " in str(v) else f"{k}={str(v)[:200]}"
                          for k, v in extras.items())
        return f"{base} {fields}"


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        KeyValueFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
