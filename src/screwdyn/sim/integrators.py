"""Fixed-step integrators on the configuration manifold, written once for numpy and JAX.

Each integrator advances (q, qd) over one step dt given the system's right-hand side
``rates(t, q, qd, xi) -> (qdd, power, tau)`` (xi: the displacement from the step's start, in
velocity coordinates; ``power(v)``: the power (N, 2) of the forces acting there when the robot
moves with velocity v, integrated alongside for the energy balance, with the velocity the
integrator moves the configuration with; tau: the controller's joint forces) and returns ``Step(q, qd, xi, qdd, tau, energy, finite)``: the new
state, the step's displacement, the acceleration and joint forces at the step's start, the
integral of the power over the step, and whether every stage's joint forces were finite.

- ``rk4``: classical fourth-order Runge-Kutta in its Lie-group form (Munthe-Kaas): the stages
  move on the manifold as q0 exp(xi) and the twist is mapped back by the truncated inverse of the
  exponential's differential, so a spinning free body keeps fourth order; the power channels are
  integrated with the same weights, so the energy balance holds to the method's accuracy;
- ``semi_implicit_euler``: qd += dt qdd(q, qd); q = q exp(dt qd) (first order, symplectic for a
  separable system, one evaluation per step); the power is taken at the mean of the step's two
  velocities, which makes the work equal the kinetic-energy change of the step (the joints'
  damping is implicit in it, as in MuJoCo's Euler: ``system``'s docstring);
- ``euler``: explicit Euler (first order, gains energy; for comparisons).

``largest_stable_step`` finds the largest dt for which an integrator is stable on a damped
oscillator (the linear test problem of a stiff contact or limit spring), by running the
integrator itself on it.
"""
from collections import namedtuple

import numpy as np

from .. import _backend
from ..model.configuration import dexpinv, integrate_arrays

Step = namedtuple("Step", "q qd xi qdd tau energy finite")

# Classical RK4 as a loop over its four stages (stage i starts from the state advanced by
# a_i dt along stage i-1's slope); a loop traces the dynamics once, so JAX compiles it in a
# quarter of the time, and the compiled loop also runs faster than four inlined copies.
_RK4_A = (0.0, 0.5, 0.5, 1.0)
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)
_RK4_FIRST = (1.0, 0.0, 0.0, 0.0)


class Manifold:
    """What an integrator needs besides the right-hand side: the array namespace, the step, the
    model's configuration manifold, and a loop over stages."""

    def __init__(self, xp, model, dt):
        self.xp, self.model, self.dt = xp, model, dt
        #: values the right-hand side leaves as it runs ({name: a dict of arrays, or None}),
        #: which ``stages`` carries through its loop so that the last stage's are read after it
        self.side = {}

    def integrate(self, q, v):
        return integrate_arrays(self.xp, self.model, q, v)

    def dexpinv(self, xi, v):
        return dexpinv(self.xp, self.model, xi, v)

    def stages(self, body, carry, xs):
        """A loop over stages: ``jax.lax.scan`` under JAX (traced once), one loop of a native
        program (``trace.fori_loop``: the stages' numbers ``xs`` ride along as carried rows,
        rotated one place each stage), a Python loop on numpy. The values in ``side`` are
        carried along (what the body leaves there at the last stage is there after it)."""
        keys = sorted(k for k, v in self.side.items() if v is not None)
        names = [sorted(self.side[k]) for k in keys]

        def leaves():
            return tuple(self.side[k][name] for k, group in zip(keys, names) for name in group)

        def restore(values):
            values = iter(values)
            for k, group in zip(keys, names):
                self.side[k] = {name: next(values) for name in group}

        xp, n = self.xp, len(carry)
        if _backend.is_jax_namespace(xp):
            import jax

            def scan_body(state, x):
                return (tuple(body(state[0], x)), leaves()), None

            final, side = jax.lax.scan(scan_body, (tuple(carry), leaves()),
                                       tuple(xp.asarray(a) for a in xs))[0]
            restore(side)
            return final
        if hasattr(xp, "fori_loop"):
            m = len(xs)

            def stage(_, state):
                rows = state[n:n + m]
                out = tuple(body(state[:n], tuple(r[0] for r in rows)))
                return out + tuple(xp.concatenate([r[1:], r[:1]]) for r in rows) + leaves()

            rows = tuple(np.asarray(a, dtype=float) for a in xs)
            state = xp.fori_loop(len(xs[0]), stage, tuple(carry) + rows + leaves())
            restore(state[n + m:])
            return state[:n]
        for x in zip(*xs):
            carry = body(carry, x)
        return carry


def rk4(m, t, q, qd, rates):
    """Classical RK4 on the configuration manifold (RKMK), the right-hand side (controller
    included) evaluated at every stage."""
    xp, dt = m.xp, m.dt

    def stage(carry, abf):
        K_prev, A_prev, K_sum, A_sum, P_sum, A_first, tau_first, finite = carry
        a, b, first = abf
        xi = (a * dt) * K_prev
        q_i, qd_i = m.integrate(q, xi), qd + (a * dt) * A_prev
        A_i, power, tau_i = rates(t + a * dt, q_i, qd_i, xi)
        P_i = power(qd_i)
        K_i = m.dexpinv(xi, qd_i)
        finite = finite & _finite(xp, tau_i)
        return (K_i, A_i, K_sum + b * K_i, A_sum + b * A_i, P_sum + b * P_i,
                xp.where(first > 0, A_i, A_first), xp.where(first > 0, tau_i, tau_first), finite)

    zero = 0 * qd
    power0 = xp.zeros(qd.shape[:-1] + (2,), dtype=qd.dtype)
    carry = (zero,) * 4 + (power0, zero, zero, xp.ones(qd.shape[:-1], dtype=bool))
    _, _, K_sum, A_sum, P_sum, qdd, tau, finite = m.stages(stage, carry,
                                                          (_RK4_A, _RK4_B, _RK4_FIRST))
    xi = dt * K_sum
    return Step(m.integrate(q, xi), qd + dt * A_sum, xi, qdd, tau, dt * P_sum, finite)


def semi_implicit_euler(m, t, q, qd, rates):
    """qd1 = qd + dt qdd(q, qd); q1 = q exp(dt qd1)."""
    qdd, power, tau = rates(t, q, qd, 0 * qd)
    qd1 = qd + m.dt * qdd
    xi = m.dt * qd1
    return Step(m.integrate(q, xi), qd1, xi, qdd, tau, _work(m.dt, power, qd, qd1), _finite(m.xp, tau))


def euler(m, t, q, qd, rates):
    """q1 = q exp(dt qd); qd1 = qd + dt qdd(q, qd)."""
    qdd, power, tau = rates(t, q, qd, 0 * qd)
    xi, qd1 = m.dt * qd, qd + m.dt * qdd
    return Step(m.integrate(q, xi), qd1, xi, qdd, tau, _work(m.dt, power, qd, qd1),
                _finite(m.xp, tau))


def _work(dt, power, qd, qd1):
    """The work of forces held over a step, at the mean of the step's two velocities: the
    kinetic-energy change of a one-stage step, dt F . (qd + qd1) / 2, exactly (constant M)."""
    return 0.5 * dt * (power(qd) + power(qd1))


def _finite(xp, a):
    return xp.all(xp.isfinite(a), axis=-1)


STEPPERS = {"rk4": rk4, "semi_implicit_euler": semi_implicit_euler, "euler": euler}


# -- stability on a damped oscillator -------------------------------------------------------------
class _Oscillator(Manifold):
    """m x'' = -k x - b x' on the real line, for the stability of an integrator."""

    def __init__(self, dt):
        super().__init__(np, None, dt)

    def integrate(self, q, v):
        return q + v

    def dexpinv(self, xi, v):
        return v


def amplification(integrator, dt, stiffness, damping, mass):
    """The 2x2 matrix that one step of ``integrator`` applies to (x, x') of the oscillator
    m x'' = -k x - b x' (computed by running the integrator on the two unit states)."""
    def rates(t, x, v, xi):
        return (-(stiffness * x + damping * v) / mass,
                lambda u: np.zeros(u.shape[:-1] + (2,)), 0 * x)

    # two states with one degree of freedom: (x, x') = (1, 0) and (0, 1), the matrix's columns
    step = STEPPERS[integrator](_Oscillator(dt), 0.0, np.array([[1.0], [0.0]]),
                                np.array([[0.0], [1.0]]), rates)
    return np.array([step.q[:, 0], step.qd[:, 0]])


def largest_stable_step(integrator, stiffness, damping, mass):
    """The largest dt (s) for which ``integrator`` does not amplify the oscillator
    m x'' = -k x - b x' (spectral radius of its step <= 1), to 1%; inf if none is unstable up to
    1e3 / sqrt(k / m) (explicit Euler on an undamped oscillator: 0, it always gains energy)."""
    omega = np.sqrt(stiffness / mass) + damping / mass
    if omega == 0:
        return np.inf

    def stable(dt):
        return np.max(np.abs(np.linalg.eigvals(amplification(integrator, dt, stiffness,
                                                             damping, mass)))) <= 1 + 1e-12

    low, high = 1e-6 / omega, 1e3 / omega
    if not stable(low):
        return 0.0
    if stable(high):
        return np.inf
    while high / low > 1.01:
        mid = np.sqrt(low * high)
        low, high = (mid, high) if stable(mid) else (low, mid)
    return low
