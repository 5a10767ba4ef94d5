"""Fresh result arrays for batches: big ones made on memory that earlier results gave back.

A new numpy array of many megabytes is a new mapping of memory, whose pages the operating system
zeroes at the first write: 3.9 ms for the 35 MB of 1,000 Talos states' forward dynamics
derivatives, 12% of the time the machine code takes to fill them (and more where the kernel
must first gather free memory). The C heap keeps and reuses smaller blocks, but not these. So a
result of ``MIN_BYTES`` or more (``fresh``) is an ordinary float64 C-contiguous array on a
buffer that is kept when the last reference to the array, or to any view of it, goes, and is
taken again by the next result of the same size: a loop of batch calls that drops each result
before the next touches no new memory, as Pinocchio's loop writes into its ``Data``.

The buffers kept take at most ``config.result_pool`` bytes (256 MiB; 0 keeps none and lets go of
those kept), the most recently given back first. An array made here differs from ``np.empty``'s
only in its ``base`` (the ``Lease`` that holds the buffer) and ``flags.owndata`` (False). Giving
back takes no lock (it runs in a garbage collection, in any thread): the pool is a dict, whose
single operations the interpreter makes atomic.
"""
from typing import Dict, Tuple

import numpy as np

from .config import _LISTENERS, config

#: results smaller than this are ``np.empty``'s (the C heap reuses their blocks)
MIN_BYTES = 4 << 20
#: the buffers given back and not yet taken again, oldest first (id -> 1-D uint8 array)
_KEPT: Dict[int, np.ndarray] = {}
_FLOAT64 = np.dtype(np.float64).str  # "<f8" on this machine's byte order


class Lease:
    """The base of an array made by ``fresh``: holds its buffer while the array or a view of it
    lives, and gives the buffer back to the pool when the last of them goes."""

    __slots__ = ("buffer", "__array_interface__")

    def __init__(self, buffer: np.ndarray, shape: Tuple[int, ...]) -> None:
        self.buffer = buffer
        self.__array_interface__ = {"shape": shape, "typestr": _FLOAT64, "version": 3,
                                    "data": (buffer.ctypes.data, False)}

    def __del__(self) -> None:
        try:
            _give_back(self.buffer)
        except Exception:  # at interpreter exit the module may be gone: the buffer just goes
            pass


def fresh(shape: Tuple[int, ...]) -> np.ndarray:
    """A new float64 C-contiguous array of ``shape``, uninitialised, as ``np.empty(shape)``: for
    ``MIN_BYTES`` or more, on a buffer an earlier result of the same size gave back where one
    is kept (see the module docstring)."""
    nbytes = 8 * int(np.prod(shape, dtype=np.int64))
    if nbytes < MIN_BYTES or config.result_pool < nbytes:
        return np.empty(shape)
    buffer = _take(nbytes)
    if buffer is None:
        buffer = np.empty(nbytes, dtype=np.uint8)
    return np.asarray(Lease(buffer, tuple(int(n) for n in shape)))


def kept_bytes() -> int:
    """The bytes of the buffers kept now."""
    return sum(b.nbytes for b in list(_KEPT.values()))


def _take(nbytes):
    """A kept buffer of ``nbytes``, removed from the pool (None where none is kept)."""
    for key in list(_KEPT):
        buffer = _KEPT.get(key)
        if buffer is not None and buffer.nbytes == nbytes and _KEPT.pop(key, None) is buffer:
            return buffer
    return None


def _give_back(buffer):
    """Keep ``buffer`` for a later result, letting go of the oldest kept ones to stay within
    ``config.result_pool`` (nothing kept where the buffer alone is more)."""
    if buffer.nbytes > config.result_pool:
        return
    _let_go(room=buffer.nbytes)
    _KEPT[id(buffer)] = buffer


def _let_go(room=0):
    """Let go of the oldest kept buffers until ``room`` bytes more fit in ``config.result_pool``."""
    while _KEPT and kept_bytes() + room > config.result_pool:
        _KEPT.pop(next(iter(_KEPT), None), None)


def _trim(name):
    if name == "result_pool":
        _let_go()


_LISTENERS.append(_trim)
