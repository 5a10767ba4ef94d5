"""The checks at the public boundary: every array a public function takes passes through here.

Pure functions, no state:

    state_array(name, value, size, meaning, xp)  the user's value as a float array whose trailing
                                                 dimensions are ``size`` (``ValueError`` naming
                                                 the argument and the expected shape otherwise)
    batch_shape({name: (array, core_ndim)})      the broadcast batch shape, from shapes only
    states(batch)                                how many states a batch holds
    check_fits(nbytes, what)                     ``ValueError`` naming the bytes needed when a
                                                 result cannot fit in this machine's memory
    chunks({name: (array, core_ndim)}, batch, size)
                                                 (start, stop, {name: chunk}) over the flattened
                                                 batch, without materialising the broadcast

Policy (documented in docs/reliability.md):

- ``None``, strings, objects and complex values are refused with a ``ValueError`` that names the
  argument and the expected shape or dtype; the dtype policy of ``screwdyn._backend`` applies
  (numpy: every real dtype computes in float64; JAX: float64 with x64 on, float32 with a
  ``Float32Warning`` otherwise).
- Non-finite values are accepted: the dynamics functions propagate NaN and inf per state, as
  IEEE arithmetic does (a bad state gives NaN or inf where it enters, never an exception, and
  never changes the other states of the batch). The simulation, the loaders and the savers
  refuse them.
- An empty batch, e.g. q of shape (0, nq), gives an empty result of the right shape.
"""
from __future__ import annotations

import os
from typing import Dict, Iterator, Tuple, Union

import numpy as np

from . import _backend

#: a result may take at most this fraction of the machine's physical memory
MEMORY_FRACTION = 0.5

Core = Union[int, Tuple[int, ...]]

#: array arguments of the dynamics functions for which None means "none given"
OPTIONAL = ("f_ext", "gravity")


def argument_specs(model) -> Dict[str, Tuple[Core, str]]:
    """{argument: (per-state shape, meaning)} of the dynamics functions' array arguments."""
    return {"q": (model.nq, "configuration, nq"), "qd": (model.nv, "velocity, nv"),
            "qdd": (model.nv, "acceleration, nv"), "tau": (model.nv, "joint forces, nv"),
            "gravity": (3, "gravity vector in the world frame"),
            "f_ext": ((model.nlinks, 6), "one [force; torque] wrench per link, nlinks x 6")}


def given(arrays: Dict[str, object]) -> Dict[str, object]:
    """The arguments to check: all but the optional ones left at None (a required one at None
    stays, for ``state_array`` to refuse with its expected shape)."""
    return {k: v for k, v in arrays.items() if v is not None or k not in OPTIONAL}


def core_shape(size: Core) -> Tuple[int, ...]:
    """The trailing (per-state) shape: ``size`` as a tuple."""
    return tuple(size) if isinstance(size, tuple) else (int(size),)


def _shape_text(size: Core) -> str:
    return "(..., " + ", ".join(map(str, core_shape(size))) + ")"


def state_array(name: str, value, size: Core, meaning: str, xp=np):
    """``value`` as a floating array of the namespace ``xp`` with trailing shape ``size`` (an int
    n: shape (..., n); a tuple: (..., *size)), leading dimensions a batch.

    ``ValueError`` naming ``name``, the expected shape and ``meaning`` (e.g. "configuration,
    nq") for None, strings, objects, complex numbers or a wrong trailing shape. numpy inputs
    become float64 (float32 included: the computation is float64); JAX inputs follow JAX's x64
    setting (``Float32Warning`` when off). A batch of size zero, (0, n), is accepted."""
    if value is None:
        raise ValueError(f"{name} must be an array of shape {_shape_text(size)} ({meaning}), "
                         "got None")
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a real numeric array of shape {_shape_text(size)} "
                         f"({meaning}), got the string {value[:40]!r}")
    try:
        a = _backend.as_float_array(value, xp, name)
    except (TypeError, OverflowError, ValueError) as error:  # e.g. ragged nested lists
        if isinstance(error, ValueError) and str(error).startswith(name + " "):
            raise
        raise ValueError(f"{name} must be a real numeric array of shape {_shape_text(size)} "
                         f"({meaning}): {error}") from None
    shape = core_shape(size)
    if a.ndim < len(shape) or tuple(a.shape[a.ndim - len(shape):]) != shape:
        raise ValueError(f"{name} must have shape {_shape_text(size)} ({meaning}), got shape "
                         f"{tuple(a.shape)}")
    return a


def batch_shape(arrays: Dict[str, Tuple[object, int]]) -> Tuple[int, ...]:
    """The broadcast of the arrays' batch shapes (their shapes less ``core_ndim`` trailing
    dimensions), computed from the shapes alone (nothing is materialised); ``ValueError`` naming
    every argument's batch shape when they do not broadcast."""
    return tuple(_backend.broadcast_batch([(name, a, core) for name, (a, core)
                                           in arrays.items()]))


def states(batch: Tuple[int, ...]) -> int:
    """The number of states in a batch shape (1 for no batch, 0 for an empty one)."""
    return int(np.prod(batch, dtype=np.int64))


def memory_bytes():
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(nbytes: int, what: str) -> None:
    """``ValueError`` at once, naming the bytes needed, when ``nbytes`` exceed
    ``MEMORY_FRACTION`` of the physical memory (before any work: the alternative is an
    allocation that fails at the end, or the kernel killing the process)."""
    available = memory_bytes()
    if available and nbytes > MEMORY_FRACTION * available:
        raise ValueError(f"{what} would take {nbytes:,} bytes ({nbytes / 2 ** 30:,.1f} GiB), "
                         f"more than {MEMORY_FRACTION:.0%} of this machine's "
                         f"{available / 2 ** 30:.3g} GiB: split the batch")


def chunks(arrays: Dict[str, Tuple[np.ndarray, int]], batch: Tuple[int, ...], size: int
           ) -> Iterator[Tuple[int, int, Dict[str, np.ndarray]]]:
    """Walk the flattened broadcast batch in chunks of ``size`` states: yields (start, stop,
    {name: array}) where each array is the argument's states start..stop, shape
    (stop - start, *core), or the argument itself (shape core) when it has no batch (one value
    for every state). Only one chunk of each argument exists at a time: an argument that
    broadcasts (e.g. q (1000, 1, 9) against qd (1000, 9)) is gathered chunk by chunk from a
    zero-copy broadcast view."""
    N = states(batch)
    plans = {}
    for name, (a, core) in arrays.items():
        core_dims = a.shape[a.ndim - core:]
        if a.ndim == core:
            plans[name] = ("whole", a)
        elif tuple(a.shape[:a.ndim - core]) == tuple(batch) and a.flags.c_contiguous:
            plans[name] = ("slice", a.reshape((N,) + core_dims))  # a view
        else:
            plans[name] = ("gather", np.broadcast_to(a, tuple(batch) + core_dims))
    for start in range(0, N, size):
        stop = min(N, start + size)
        index = None
        chunk = {}
        for name, (how, a) in plans.items():
            if how == "whole":
                chunk[name] = a
            elif how == "slice":
                chunk[name] = a[start:stop]
            else:
                if index is None:
                    index = np.unravel_index(np.arange(start, stop), batch)
                chunk[name] = a[index]  # a copy of this chunk only
        yield start, stop, chunk
