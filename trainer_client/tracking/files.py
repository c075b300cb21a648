"""Writing a run's text files so that a full disk never leaves half a line or half a file.

- :func:`write_text_atomic`: a whole file through a temporary file and a rename; on any
  error the temporary file is removed and the old file (if any) is left as it was.
- :class:`JsonlAppender`: one line at a time with ``os.write`` on an ``O_APPEND`` descriptor;
  when a write fails part-way (a short write, then ``ENOSPC``), the file is truncated back
  to its size before that line.

A full filesystem (``ENOSPC``, ``EDQUOT``, ``EFBIG``) becomes :class:`DiskFullError`, which
names the file; the trainer stops on it with a message. Other ``OSError`` s propagate as
they are.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["FULL_ERRNOS", "DiskFullError", "JsonlAppender", "disk_full_as_error", "is_full",
           "write_text_atomic"]

#: errnos that mean "no room for more data here"
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class DiskFullError(RuntimeError):
    """A run output could not be written because its filesystem is full."""

    def __init__(self, what: str | Path, cause: OSError) -> None:
        super().__init__(f"disk full writing {what}: {cause.strerror or cause}")
        self.what = str(what)
        self.errno = cause.errno


def is_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in FULL_ERRNOS


@contextmanager
def disk_full_as_error(what: str | Path) -> Iterator[None]:
    """Turn a full-filesystem ``OSError`` raised inside the block into :class:`DiskFullError`."""
    try:
        yield
    except OSError as e:
        if is_full(e):
            raise DiskFullError(what, e) from e
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader sees the
    old file or the new one, never half of one; a failed write leaves no temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with disk_full_as_error(path):
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class JsonlAppender:
    """Appends whole lines to ``path``; a line either is in the file complete or not at all."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                       0o644)

    def append(self, line: str) -> None:
        """Append ``line`` (a newline is added)."""
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        fd = self._fd
        size = os.fstat(fd).st_size
        view = memoryview((line + "\n").encode("utf-8"))
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            with suppress(OSError):  # nothing more can be done if this fails too
                os.ftruncate(fd, size)  # the part of the line that did get written
            if is_full(e):
                raise DiskFullError(self.path, e) from e
            raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
