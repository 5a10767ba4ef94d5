"""Array backends: numpy by default, JAX when the caller passes JAX arrays.

Algorithms take ``xp`` (the array namespace) from their inputs and never write in place, so the
same code runs eagerly on numpy and traced under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.
Mixed inputs are promoted to JAX: one JAX array is enough for a JAX result.
"""
import sys

import numpy as np


def _is_jax(a):
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(a, jax.Array)


def namespace(*arrays):
    """numpy, or jax.numpy if any argument is a JAX array (or tracer)."""
    if any(_is_jax(a) for a in arrays):
        import jax.numpy as jnp

        return jnp
    return np


def is_jax_namespace(xp):
    return xp is not np


def as_float_array(x, xp, name):
    """Convert user input to a floating array of the backend, refusing silent precision loss."""
    if xp is np:
        a = np.asarray(x)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be a real numeric array, got dtype {a.dtype}")
        return a.astype(np.float64, copy=False)
    import jax

    a = xp.asarray(x)
    if not xp.issubdtype(a.dtype, xp.floating):
        a = a.astype(xp.float64 if jax.config.jax_enable_x64 else xp.float32)
    return a


def check_last_dim(a, n, name, meaning):
    if a.ndim < 1 or a.shape[-1] != n:
        raise ValueError(f"{name} must have shape (..., {n}) ({meaning}), got shape {tuple(a.shape)}")


def broadcast_batch(arrays_and_cores):
    """Common batch shape of arrays whose trailing ``core`` dims are fixed; clear error otherwise."""
    shapes = {name: tuple(a.shape[: a.ndim - core]) for name, a, core in arrays_and_cores}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        detail = ", ".join(f"{name}: {s}" for name, s in shapes.items())
        raise ValueError(f"batch shapes do not broadcast ({detail})") from None
