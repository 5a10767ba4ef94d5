"""Loops over a fixed count, and work done only where a condition holds, for code that runs on
numpy, JAX and the native tracer alike (a solver's sweeps, a line search's rounds, the rows of a
contact point that touches nothing): one loop (one branch) of the compiled program where the
namespace has one, so the program does not grow with the count.

``loop(xp, n, body, x)`` is x after ``x = body(i, x)`` for i = 0 .. n-1:

* under JAX (``xp`` is ``jax.numpy``), ``jax.lax.fori_loop``: one loop, differentiable;
* in the native tracer (``execution.trace.xp``), with ``indexed=False`` (the body ignores its
  index and gets None), ``trace.fori_loop``: the body traced once into a loop of the program;
  a body that reads its index (``indexed=True``) is unrolled there, one copy per index;
* on numpy, a Python loop.

``x`` is an array or a tuple of arrays, and ``body`` returns the same shapes.

``when(xp, condition, body, x)`` is ``body(x)`` for the states (rows of the batch) where the
boolean ``condition`` (N,) holds, and ``x`` for the others: on numpy and JAX, ``body`` on all of
them and ``where`` (on numpy, not at all where the condition holds for no state); in the native
tracer (one state), ``trace.when``: the body runs only where the condition holds. Either way a
state where the condition does not hold keeps ``x`` exactly, and one where it holds gets the
body's values."""
import numpy as np

from .._backend import is_jax_namespace


def loop(xp, n: int, body, x, indexed: bool = True):
    """x after ``x = body(i, x)`` for i = 0 .. n-1 (see the module docstring)."""
    if is_jax_namespace(xp):
        import jax

        return jax.lax.fori_loop(0, n, body, x)
    if not indexed and hasattr(xp, "fori_loop"):
        return xp.fori_loop(n, body, x)
    for i in range(n):
        x = body(i, x)
    return x


def when(xp, condition, body, x):
    """``body(x)`` where ``condition`` (N,) holds, else ``x`` (see the module docstring); ``x``
    an array or a tuple of arrays, each (N, ...)."""
    if getattr(xp, "traced", False) and hasattr(xp, "when"):
        return xp.when(condition, body, x)
    if xp is np and not np.any(condition):  # every state keeps x: the body need not run
        return x
    new = body(x)

    def pick(a, b):
        c = xp.reshape(condition, condition.shape + (1,) * (a.ndim - condition.ndim))
        return xp.where(c, a, b)

    return tuple(map(pick, new, x)) if isinstance(x, tuple) else pick(new, x)
