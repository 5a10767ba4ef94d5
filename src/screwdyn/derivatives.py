"""Partial derivatives of inverse and forward dynamics (needs JAX), the counterpart of Pinocchio's
``computeRNEADerivatives`` and ``computeABADerivatives``.

    dtau_dq, dtau_dqd, dtau_dqdd = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    dqdd_dq, dqdd_dqd, dqdd_dtau = sd.dynamics_derivatives(model, q, qd, tau=tau)

They are exact (forward-mode automatic differentiation through the recursions), batched over leading
dimensions like every public function. numpy inputs run the native program of the derivatives (the
traced recursion differentiated in forward mode, ``execution.graph.jacobian``, compiled like every
public function); JAX inputs (and numpy inputs where native code is off) run ``jax.jacfwd`` of the
recursion, jitted once per model. The derivative with respect to ``q`` is taken in the tangent
space, as Pinocchio's: column k is d/de out(q (+) e_k e) at e = 0 (``screwdyn.integrate``), nv
columns for every joint type (for revolute and prismatic joints, the plain derivative in q). numpy
inputs give float64 results whatever JAX's x64 setting (it is switched on locally, not globally).
"""
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from . import _backend, dynamics
from .execution import plan
from .model.configuration import integrate_arrays


class DynamicsDerivatives(NamedTuple):
    """Jacobians of the output (tau for inverse, qdd for forward dynamics) with respect to the
    inputs, each of shape batch + (nv, nv)."""

    dq: object  # d out / d q      (..., nv, nv), in the tangent space of q
    dqd: object  # d out / d qd    (..., nv, nv)
    du: object  # d out / d qdd (inverse dynamics: M) or d tau (forward dynamics: M^-1)

    def _numpy(self):
        return DynamicsDerivatives(*(np.asarray(a, dtype=np.float64) for a in self))


def dynamics_derivatives(model, q, qd, qdd=None, *, tau=None, gravity=None, algebra="spatial"):
    """Derivatives of inverse dynamics (pass ``qdd``) or forward dynamics (pass ``tau``) with
    respect to q (tangent space), qd and qdd or tau: a ``DynamicsDerivatives`` (dq, dqd, du) of
    arrays of shape (..., nv, nv) each. numpy in, numpy out (float64); JAX in, JAX out (and
    traceable: it can itself be jitted, vmapped or differentiated).

    Inverse dynamics: dq, dqd by forward-mode differentiation of the recursion, du = M(q).
    Forward dynamics, as Pinocchio does: with qdd = FD(q, qd, tau), differentiating
    ID(q, qd, qdd) = tau gives d qdd/dx = -M^-1 d ID/dx for x = q, qd, and d qdd/d tau = M^-1."""
    if (qdd is None) == (tau is None):
        raise ValueError("pass exactly one of qdd (inverse dynamics derivatives) and tau "
                         "(forward dynamics derivatives)")
    u = qdd if tau is None else tau
    if not any(_backend._is_jax(a) for a in (q, qd, u, gravity)):
        try:
            return _native(model, q, qd, qdd, tau, gravity, algebra)
        except plan.NativeUnavailable:  # native code off or unavailable: JAX below
            pass
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as error:
        raise ImportError("dynamics_derivatives needs JAX: pip install jax") from error
    use_jax = any(_backend._is_jax(a) for a in (q, qd, u, gravity))
    if not use_jax:  # numpy in: float64 out, whatever the global x64 setting
        with _backend.jax_float64():
            return dynamics_derivatives(model, *(jnp.asarray(_backend.as_float_array(a, np, n))
                                                 for a, n in ((q, "q"), (qd, "qd"))),
                                        **{("qdd" if tau is None else "tau"):
                                           jnp.asarray(_backend.as_float_array(u, np, "u"))},
                                        gravity=gravity, algebra=algebra)._numpy()
    xp = jnp
    names = ("q", "qd", "qdd" if tau is None else "tau")
    q, qd, u = (_backend.as_float_array(a, xp, name) for a, name in zip((q, qd, u), names))
    for a, n, name in zip((q, qd, u), (model.nq, model.nv, model.nv), names):
        _backend.check_last_dim(a, n, name, "one state per row")
    batch = _backend.broadcast_batch([(name, a, 1) for name, a in zip(names, (q, qd, u))])
    N = int(np.prod(batch, dtype=int))
    q, qd, u = (xp.broadcast_to(a, batch + a.shape[-1:]).reshape((N, a.shape[-1]))
                for a in (q, qd, u))
    if tau is not None:  # the accelerations at which to differentiate ID
        u = dynamics.forward_dynamics(model, q, qd, u, gravity=gravity, algebra=algebra)
    traced = any(isinstance(a, jax.core.Tracer) for a in (q, qd, u, gravity))
    if traced or _backend._is_jax(gravity):  # inside the caller's trace: no nested compile
        dq, dqd, M = jax.vmap(lambda q, qd, qdd: _id_jacobians(model, algebra, q, qd, qdd,
                                                               gravity))(q, qd, u)
    else:
        g = None if gravity is None else tuple(float(x) for x in np.asarray(gravity).reshape(3))
        dq, dqd, M = (xp.asarray(a) for a in _program(model, algebra, g)(q, qd, u))
    if tau is not None:
        Minv = xp.linalg.inv(M)
        dq, dqd, M = -Minv @ dq, -Minv @ dqd, Minv
    return DynamicsDerivatives(*(a.reshape(batch + a.shape[1:]) for a in (dq, dqd, M)))


def _native(model, q, qd, qdd, tau, gravity, algebra):
    """The derivatives on numpy inputs: the native program of d ID / d(q (+) e, qd, qdd) at
    e = 0, the forward differentiation of the traced recursion (``execution.graph.jacobian``),
    float64."""
    if tau is not None:  # the accelerations at which to differentiate ID
        qdd = dynamics.forward_dynamics(model, q, qd, tau, gravity=gravity, algebra=algebra)
    J = plan.run(dynamics.FUNCTIONS["inverse_dynamics_derivatives"], model, algebra,
                 (q, qd, qdd), (gravity,))
    nv = model.nv
    dq, dqd, M = J[..., :nv], J[..., nv:2 * nv], J[..., 2 * nv:]
    if tau is not None:
        Minv = np.linalg.inv(M)
        dq, dqd, M = -Minv @ dq, -Minv @ dqd, Minv
    return DynamicsDerivatives(dq, dqd, M)


def _id_jacobians(model, algebra, q, qd, qdd, gravity):
    """(d ID/dq, d ID/dqd, M) for one state."""
    import jax
    import jax.numpy as jnp

    def tau(dq, qd):  # at q (+) dq: the derivative in q's tangent space
        q_moved = integrate_arrays(jnp, model, q, dq)
        return dynamics.inverse_dynamics(model, q_moved, qd, qdd, gravity=gravity,
                                         algebra=algebra)

    dq, dqd = jax.jacfwd(tau, argnums=(0, 1))(jnp.zeros_like(qd), qd)
    return dq, dqd, dynamics.mass_matrix(model, q, algebra=algebra)


@lru_cache(maxsize=64)
def _program(model, algebra, gravity):
    """The jitted, batched ``_id_jacobians`` for one model (compiled once per model and shape)."""
    import jax

    from .compiled import compiler_options

    g = None if gravity is None else np.array(gravity)
    return jax.jit(jax.vmap(lambda q, qd, qdd: _id_jacobians(model, algebra, q, qd, qdd, g)),
                   compiler_options=compiler_options())
