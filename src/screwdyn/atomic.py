"""The one atomic file writer: trajectories, DH tables and rollout datasets are written through
``atomic_write``, so that an interrupted or failed save never leaves a partial file, and an
existing file is either replaced whole or left as it was. The file gets the mode ``open()`` would
give it: 0o666 less the process's umask."""
import contextlib
import os
import tempfile
from typing import IO, Callable

from . import interrupts


def atomic_write(path, write: Callable[[IO], object], binary: bool) -> str:
    """Call ``write(file)`` on a temporary file in ``path``'s folder (text files: UTF-8,
    newlines as written), flush it to disk, then rename it to ``path`` (``os.replace``: atomic
    on POSIX and Windows). On any failure, Ctrl-C included, the temporary file is removed and
    the error propagates. Ctrl-C interrupts the writing, but waits while the temporary file is
    created or removed: however timed, it leaves no temporary file behind. The file's mode is
    0o666 less the umask, as ``open()`` makes it (the temporary file is made 0o600, then opened
    up). Returns ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    with interrupts.held(whole=True):  # signals wait while the temporary file is made or removed
        fd, temporary = tempfile.mkstemp(prefix=".screwdyn-", suffix=".part", dir=folder)
        try:
            _open_up(fd)
            with _open(fd, binary) as f, interrupts.let_through():
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    return path


def _open_up(fd):
    """Give the file ``fd`` the mode ``open()`` gives a new file: 0o666 less the umask. Where
    the file system keeps no modes (``fchmod`` fails, or Windows) the file stays as made."""
    if hasattr(os, "fchmod"):
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666 & ~current_umask())


def current_umask():
    """The process's umask, read without changing it where the system says it (Linux: the
    ``Umask:`` line of /proc/self/status); elsewhere the one read when this module was
    imported (setting it to read it back would race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK_AT_IMPORT


def _umask_at_import():
    """The umask, read (set and put back) once, when this module is imported."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _umask_at_import()


def _open(fd, binary):
    return os.fdopen(fd, "wb" if binary else "w",
                     **({} if binary else {"newline": "", "encoding": "utf-8"}))
