"""Checks of user numbers shared by the simulation's settings objects (one message style)."""
import math

import numpy as np


def positive(x, name, allow_zero=False):
    """``x`` as a float; ``ValueError`` naming ``name`` unless finite and > 0 (>= 0 when
    ``allow_zero``). A JAX tracer (a value being differentiated) passes unchecked."""
    if is_traced(x):
        return x
    if isinstance(x, (complex, np.complexfloating)):
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {x!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else 'positive'} and finite, "
                         f"got {x!r}")
    return value


def boolean(x, name):
    """``x``, checked: True or False (not a number or a string); ``ValueError`` naming
    ``name`` otherwise."""
    if not isinstance(x, bool):
        raise ValueError(f"{name} must be True or False, got {x!r}")
    return x


def sweeps(x, name):
    """``x``, checked: an int in [1, 1000] (a solver's sweeps); ``ValueError`` naming
    ``name`` otherwise."""
    if not (isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 1000):
        raise ValueError(f"{name} must be an int in [1, 1000], got {x!r}")
    return x


def gravity(x, name):
    """``x`` as a tuple of 3 floats (m/s^2, world frame); ``ValueError`` naming ``name``
    unless it is 3 finite numbers."""
    try:
        g = np.asarray(x)
    except (TypeError, ValueError):
        g = np.empty(0)
    if g.dtype.kind not in "biuf" or g.size != 3 or not np.all(np.isfinite(g)):
        raise ValueError(f"{name} must be 3 finite numbers (m/s^2, world frame), got {x!r}")
    return tuple(float(v) for v in g.ravel())


def is_traced(x):
    """Whether ``x`` is a JAX tracer (abstract: no value to check)."""
    import sys

    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.core.Tracer)
