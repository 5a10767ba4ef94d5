"""The execution switches of this process, in one documented object: ``screwdyn.execution.config``.

    import screwdyn as sd

    sd.execution.config.native = False        # numpy calls on numpy instead of machine code
    sd.execution.config.max_programs = 64     # fewer programs kept in memory

Fields:

- ``native`` (True): numpy calls run through machine code compiled from the recursions; False
  runs them on numpy (``use_native``).
- ``custom_calls`` (True): JAX calls on the CPU run the native programs as XLA custom calls;
  False runs them on jax.numpy (``use_custom_calls``). Functions JAX has traced keep their path.
- ``chunk_states`` (None): states per chunk of a numpy batch on the numpy path; None chooses from
  the model's size (``plan.chunk_size``: about 256 MiB of intermediates).
- ``max_programs`` (256): programs kept in this process's memory, and callables bound to them;
  past it the least recently used goes (``store.Store``) and is made again, or loaded from the
  disk cache, when next needed.
- ``cache_size`` (None): the most bytes the disk cache of programs may take; None reads
  ``$SCREWDYN_CACHE_SIZE`` (e.g. ``500M``, ``2G``), else 1 GiB (``cache.size_limit``).
- ``result_pool`` (256 MiB): the most bytes of memory kept from big batch results that are gone,
  for the next results of the same size (``execution.results``: no fresh pages to zero); 0
  keeps none, and setting it lets go of what is kept past it.

Changing ``native`` or ``custom_calls`` drops the callables made for earlier calls, so the next
call takes the new path.
"""
from dataclasses import dataclass, fields
from typing import Callable, List, Optional

import numpy as np


@dataclass
class Config:
    """The execution switches (see the module docstring)."""

    native: bool = True
    custom_calls: bool = True
    chunk_states: Optional[int] = None
    max_programs: int = 256
    cache_size: Optional[int] = None
    result_pool: int = 256 << 20

    def __setattr__(self, name: str, value: object) -> None:
        if name not in {f.name for f in fields(self)}:
            raise AttributeError(f"screwdyn.execution.config has no setting {name!r}; valid: "
                                 + ", ".join(f.name for f in fields(self)))
        try:
            value = _CHECKS[name](value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"screwdyn.execution.config.{name} {error}") from None
        changed = getattr(self, name, value) != value
        object.__setattr__(self, name, value)
        if changed:
            for listener in _LISTENERS:
                listener(name)


def _flag(value: object) -> bool:
    if value not in (True, False):  # (1 and 0, numpy's booleans too)
        raise ValueError(f"must be True or False, got {value!r}")
    return bool(value)


def _positive(value: object) -> int:
    """A positive whole number (an int, or a float with no fraction)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not float(value).is_integer() or value < 1:
        raise ValueError(f"must be a positive whole number, got {value!r}")
    return int(value)


def _bytes(value: object) -> int:
    """A whole number of bytes, 0 or more."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not float(value).is_integer() or value < 0:
        raise ValueError(f"must be a whole number of bytes, 0 or more, got {value!r}")
    return int(value)


def _positive_or_none(value: object) -> Optional[int]:
    """None, or a positive whole number."""
    if value is None:
        return None
    try:
        return _positive(value)
    except ValueError:
        raise ValueError(f"must be a positive whole number or None, got {value!r}") from None


_CHECKS = {"native": _flag, "custom_calls": _flag, "chunk_states": _positive_or_none,
           "max_programs": _positive, "cache_size": _positive_or_none, "result_pool": _bytes}
#: called with a setting's name when it changes (the plan drops its callables)
_LISTENERS: List[Callable[[str], None]] = []

config = Config()
