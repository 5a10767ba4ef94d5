"""Array backends: numpy by default, JAX when the caller passes JAX arrays.

Algorithms take ``xp`` (the array namespace) from their inputs and never write in place, so the
same code runs eagerly on numpy and traced under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.

Dtype policy (what a public function does with its inputs):

- numpy (and lists, scalars): any real numeric dtype (bool, integers, float16/32/64) is converted
  to float64; the result is float64. Complex, object and string inputs raise ``ValueError``.
- JAX: one JAX array among the inputs makes the whole call JAX; the numpy inputs are converted to
  JAX arrays (a documented promotion, the same as ``jnp.add(np_array, jax_array)``). With
  ``jax_enable_x64`` on, every input is converted to float64 (float32 inputs are promoted, as on
  numpy) and the result is float64. Without x64, JAX has no float64: the call computes in float32
  and warns once (``Float32Warning``) that results carry float32 accuracy (about 1e-6 relative).
  Complex inputs raise ``ValueError``.
"""
import functools
import os
import sys

import numpy as np


def _is_jax(a):
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(a, jax.Array)


def namespace(*arrays):
    """numpy, or jax.numpy if any argument is a JAX array (or tracer), or the namespace of an
    array that names its own (``__array_namespace__``, the array API standard: the traced
    arrays of ``screwdyn.execution.trace``)."""
    if any(_is_jax(a) for a in arrays):
        import jax.numpy as jnp

        return jnp
    for a in arrays:
        if type(a) is not np.ndarray and hasattr(type(a), "__array_namespace__") \
                and not isinstance(a, np.generic):
            return a.__array_namespace__()
    return np


def is_jax_namespace(xp):
    return xp is not np and not getattr(xp, "traced", False)


class Float32Warning(UserWarning):
    """A JAX computation runs in float32 because ``jax_enable_x64`` is off."""


_warned_float32 = []


def as_float_array(x, xp, name):
    """Convert user input to a floating array of the backend (see the dtype policy above)."""
    if xp is np:
        a = np.asarray(x)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be a real numeric array, got dtype {a.dtype}")
        return a.astype(np.float64, copy=False)
    if getattr(xp, "traced", False):  # symbolic float64 scalars (screwdyn.execution.trace)
        return x if hasattr(type(x), "__array_namespace__") else as_float_array(x, np, name)
    if not _is_jax(x):
        x = as_float_array(x, np, name)  # numpy inputs follow the numpy policy first
    a = xp.asarray(x)
    if xp.issubdtype(a.dtype, xp.complexfloating) or not (xp.issubdtype(a.dtype, xp.number)
                                                           or a.dtype == xp.bool_):
        raise ValueError(f"{name} must be a real numeric array, got dtype {a.dtype}")
    if x64_enabled():
        return a.astype(xp.float64) if a.dtype != xp.float64 else a
    if not _warned_float32:
        _warned_float32.append(True)
        import warnings

        warnings.warn("screwdyn: jax_enable_x64 is off, so JAX computes in float32 (about 1e-6 "
                      "relative accuracy) on jax.numpy: screwdyn's compiled programs (XLA custom "
                      "calls) need float64, and XLA compiles the whole recursion instead, about "
                      "40 times slower (the Panda's forward dynamics under jit: 12 s against "
                      "0.3 s; jit(grad) for minutes). Enable x64 before any JAX array is made: "
                      "jax.config.update('jax_enable_x64', True), or JAX_ENABLE_X64=1 in the "
                      "environment", Float32Warning, stacklevel=4)
    return a.astype(xp.float32) if a.dtype != xp.float32 else a


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


def x64_enabled():
    """Whether JAX computes in float64 (``jax_enable_x64``)."""
    import jax

    return bool(getattr(jax.config, "jax_enable_x64", False))


def jax_float64():
    """A context in which JAX computes in float64, without changing the user's global setting
    (``jax.enable_x64``; a no-op when x64 is on already)."""
    import contextlib

    import jax

    if x64_enabled():
        return contextlib.nullcontext()
    manager = getattr(jax, "enable_x64", None)
    if manager is None:  # older JAX
        from jax.experimental import enable_x64 as manager
    return manager(True)


_allocator = []


def tune_allocator():
    """Let glibc keep freed heap memory mapped (trim above 256 MiB; blocks under 32 MiB from the
    heap). A batched numpy evaluation makes thousands of short-lived arrays; with glibc's defaults
    the heap is trimmed and regrown many times per call, and the page faults cost as much as the
    arithmetic (measured: x2 on 10,000 Panda states). Called once, on the first large numpy
    batch; skipped off glibc, when a MALLOC_*_ variable is set, or when SCREWDYN_MALLOPT=0."""
    if _allocator:
        return
    _allocator.append(True)
    if (os.environ.get("SCREWDYN_MALLOPT", "1") == "0" or not sys.platform.startswith("linux")
            or any(k.startswith("MALLOC_") for k in os.environ)):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only  # noqa: B018
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 256 << 20)
        _allocator.append("tuned")
    except (OSError, AttributeError):
        pass


def one_blas_thread():
    """A context in which numpy's BLAS and LAPACK run on one thread (``threadpoolctl``): the
    products and inverses of a batch of small matrices (a large tree's derivatives and mass
    matrix, finished on numpy 64 states at a time) gain little from a second thread, which
    spins: measured on 1,000 states of a 100-link chain's FD derivatives, 480 ms in 970 ms of
    CPU on two threads, 560 ms on one. The loaded libraries are found once (0.7 ms, most of
    ``threadpool_limits``'s cost per call); each use costs 14 us."""
    return _blas_controller().limit(limits=1, user_api="blas")


@functools.lru_cache(maxsize=None)
def _blas_controller():
    """The ThreadpoolController of the BLAS libraries loaded (numpy's: found once)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()

