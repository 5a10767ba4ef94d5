"""The one atomic file writer: trajectories, DH tables and rollout datasets are written through
``atomic_write``, so that an interrupted or failed save never leaves a partial file, and an
existing file is either replaced whole or left as it was."""
import os
import tempfile
from typing import IO, Callable


def atomic_write(path, write: Callable[[IO], object], binary: bool) -> str:
    """Call ``write(file)`` on a temporary file in ``path``'s folder (text files: UTF-8,
    newlines as written), flush it to disk, then rename it to ``path`` (``os.replace``: atomic
    on POSIX and Windows). On any failure, Ctrl-C included, the temporary file is removed and
    the error propagates. Returns ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".screwdyn-", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb" if binary else "w",
                       **({} if binary else {"newline": "", "encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return path
