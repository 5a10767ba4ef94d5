"""The one atomic file writer: trajectories, DH tables and rollout datasets are written through
``atomic_write``, so that an interrupted or failed save never leaves a partial file, and an
existing file is either replaced whole or left as it was. The file gets the mode ``open()`` would
give it: 0o666 less the process's umask."""
import contextlib
import os
import signal
import tempfile
import threading
from typing import IO, Callable

#: the signals whose Python handlers (Ctrl-C's KeyboardInterrupt, a command's SIGTERM handler)
#: wait while the temporary file is created or removed
_HELD = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))


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
    with _Interrupts() as interrupts:
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


class _Interrupts:
    """Inside ``with``: SIGINT and SIGTERM, where Python handles them (in the main thread), are
    noted instead of handled; the first noted is handled when the block ends (Ctrl-C raises
    KeyboardInterrupt there), or as soon as ``let_through()`` lets them through again. A
    signal that Python does not handle (ignored, or SIGTERM's default: the process ends) is
    left alone."""

    def __init__(self):
        self.handlers, self.noted = {}, []

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in _HELD:
                handler = signal.getsignal(signum)
                if callable(handler):
                    self.handlers[signum] = handler
        self._hold()
        return self

    def __exit__(self, *exc):
        self._release()

    def _note(self, signum, frame):
        self.noted.append((signum, frame))

    def _hold(self):
        for signum in self.handlers:
            signal.signal(signum, self._note)

    def _release(self):
        """The handlers back, and the first signal noted handled by its own."""
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)
        if self.noted:
            signum, frame = self.noted[0]
            self.noted.clear()
            self.handlers[signum](signum, frame)

    @contextlib.contextmanager
    def let_through(self):
        """Signals handled as usual for a while (one noted before is handled now)."""
        try:
            self._release()
            yield
        finally:
            self._hold()
