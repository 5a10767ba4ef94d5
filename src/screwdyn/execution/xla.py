"""What screwdyn's JAX programs do for XLA: values computed once, on purpose.

XLA's CPU loop fusion recomputes a shared value inside every consumer loop: the sine and cosine
of each joint angle in each of the Panda's nine torque loops, which made its batched inverse
dynamics 3.7x slower. A *cut* makes XLA compute a value once, into memory: ``x / one`` with
``one = (x == x) * 0 + 1``, exactly 1 for every x (NaN and inf included, so the value is x's in
every bit) but not known to XLA, which never duplicates a division into its consumers. Derivatives
are x's too (``one`` has none).

``namespace(cut_sines)`` is jax.numpy, or jax.numpy whose ``sin``, ``cos`` and ``sqrt`` return cut
values (the sines and cosines of joint angles, the norms of quaternions), for the algebras to
compute with (``plan.jax_options`` decides when: on CPU; on an H200 the cuts made batched inverse
dynamics 7x slower). The per-body cuts of large trees are the algebras' ``EntriesMode.checkpoint``,
with the same ``cut``.
"""
from ..algebra.entries import cut

_STATE = {}


class _CutSines:
    """jax.numpy with sin, cos and sqrt computed once (``cut``)."""

    def __init__(self, jnp):
        self._jnp = jnp

    def __getattr__(self, name):
        return getattr(self._jnp, name)

    def sin(self, x):
        return cut(self._jnp.sin(x))

    def cos(self, x):
        return cut(self._jnp.cos(x))

    def sqrt(self, x):
        return cut(self._jnp.sqrt(x))

    def __repr__(self):
        return "jax.numpy (sines, cosines and square roots computed once)"


def namespace(cut_sines):
    """jax.numpy, or its cutting variant (one instance, so that algebras cached per namespace
    are reused)."""
    import jax.numpy as jnp

    if not cut_sines:
        return jnp
    if "cut" not in _STATE:
        _STATE["cut"] = _CutSines(jnp)
    return _STATE["cut"]
