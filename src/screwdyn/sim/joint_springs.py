"""Joint limits and Coulomb joint friction as the simulation applies them: one-sided
spring-dampers at the limits (``settings.JointLimits``) and elasto-plastic stick-slip springs for
Coulomb friction (``settings.JointFriction``). Both are tuned per joint from its inertia at the
initial state; written once for numpy and JAX, batch first: q (N, nq), qd (N, nv)."""
import numpy as np

from ..dynamics import mass_matrix


def _spring_constants(model, q0, dofs, frequency, damping_ratio, tendons=None):
    """(k, b) (N, len(dofs) + T): stiffness and damping that make each joint alone, with its
    inertia I = M_jj(q0), ring at ``frequency`` Hz with ``damping_ratio``; then, for the
    tendons of rates ``tendons`` (T, nv) (None: none), each along its length, with its apparent
    inertia (``tendon_inertias``)."""
    inertia = np.diagonal(np.asarray(mass_matrix(model, q0)), axis1=-2, axis2=-1)[..., dofs]
    if tendons is not None and len(tendons):
        inertia = np.concatenate([inertia, tendon_inertias(model, q0, tendons)], axis=-1)
    omega = 2 * np.pi * frequency
    return inertia * omega ** 2, 2 * damping_ratio * inertia * omega


def limited_joints(model):
    """(q_index, v_index) (int arrays): the coordinate and velocity of each 1-DoF joint
    (revolute, prismatic, helical) with a finite lower or upper position limit, in order:
    the joints whose limits a simulation enforces (springs here, ``limit_constraints``'
    rows)."""
    lower, upper = model.lower_position_limit, model.upper_position_limit
    q_index, v_index = [], []
    for b, qs, vs in zip(model.active_bodies, model.q_slices, model.v_slices):
        if b.nq == 1 and b.nv == 1 and (np.isfinite(lower[qs.start])
                                        or np.isfinite(upper[qs.start])):
            q_index.append(qs.start)
            v_index.append(vs.start)
    return np.array(q_index, dtype=int), np.array(v_index, dtype=int)


def limited_tendons(model):
    """The fixed tendons with a finite length limit (``FixedTendon.lower``, ``upper``), in
    order: (names, Cq (T, nq), Cv (T, nv): each one's length Cq q and its rate Cv qd, lower
    (T,), upper (T,)): the tendons whose limits a simulation enforces with the joints'."""
    tendons = [t for t in model.tendons if t.limited]
    Cq, Cv = tendon_maps(model, tendons)
    return (tuple(t.name for t in tendons), Cq, Cv, np.array([t.lower for t in tendons]),
            np.array([t.upper for t in tendons]))


def tendon_maps(model, tendons):
    """(Cq (T, nq), Cv (T, nv)): the lengths Cq q and rates Cv qd of ``tendons``
    (``FixedTendon``s of ``model``)."""
    from ..model.constraints import linear_map

    Cq, Cv = np.zeros((len(tendons), model.nq)), np.zeros((len(tendons), model.nv))
    for row, t in enumerate(tendons):
        q_index, v_index, c = linear_map(model, t.name, "fixed tendon")
        Cq[row, q_index] = c
        Cv[row, v_index] = c
    return Cq, Cv


def tendon_inverse_inertias(model, q0, Cv):
    """(N, T): c M^-1 c^T of each tendon at the states q0 (N, nq), for its rates Cv (T, nv):
    its inverse apparent inertia along its length (0 where the tendon has no rate there)."""
    M = np.asarray(mass_matrix(model, q0))  # (N, nv, nv)
    Minv_cT = np.linalg.solve(M, np.broadcast_to(Cv.T, M.shape[:-1] + Cv.shape[:1]))
    return np.einsum("tv,nvt->nt", Cv, Minv_cT)


def tendon_inertias(model, q0, Cv):
    """(N, T): each tendon's apparent inertia along its length, 1 / (c M^-1 c^T) at the
    states q0 (N, nq), for its rates Cv (T, nv)."""
    return 1.0 / tendon_inverse_inertias(model, q0, Cv)


class Limits:
    """Position limits of 1-DoF joints and length limits of fixed tendons: a force
    -(k x + b x') beyond a limit by x, never pulling (a tendon's on its joints: c times it)."""

    def __init__(self, model, settings):
        self.q_index, self.v_index = limited_joints(model)
        self.tendons, self.Cq, self.Cv, lower, upper = limited_tendons(model)
        self.lower = np.concatenate([model.lower_position_limit[self.q_index], lower])
        self.upper = np.concatenate([model.upper_position_limit[self.q_index], upper])
        #: (L, nv): each row's joint forces per unit of its force (a joint's e_v, a tendon's c)
        self.rows = np.concatenate([np.eye(model.nv)[self.v_index], self.Cv])
        self.settings = settings

    def __bool__(self):
        return len(self.lower) > 0

    @property
    def key(self):
        return ("limits", tuple(self.q_index.tolist()), self.Cq.tobytes(), self.Cv.tobytes())

    def params(self, model, q0):
        k, b = _spring_constants(model, q0, self.v_index, self.settings.frequency,
                                 self.settings.damping_ratio, self.Cv)
        return {"k": k, "b": b, "lower": self.lower, "upper": self.upper}

    def torques(self, xp, p, q, qd):
        """(forces (N, L): each limited joint's, then each limited tendon's (``rows`` maps
        them onto the joints), elastic energy (N,)) at q, qd."""
        x, rate = q[..., self.q_index], qd[..., self.v_index]
        if self.tendons:
            x = xp.concatenate([x, q @ self.Cq.T], axis=-1)
            rate = xp.concatenate([rate, qd @ self.Cv.T], axis=-1)
        low = xp.maximum(p["lower"] - x, 0.0)  # depth beyond the lower limit (inf-safe)
        high = xp.maximum(x - p["upper"], 0.0)
        push_up = xp.where(low > 0, xp.maximum(p["k"] * low - p["b"] * rate, 0.0), 0.0)
        push_down = xp.where(high > 0, xp.maximum(p["k"] * high + p["b"] * rate, 0.0), 0.0)
        elastic = 0.5 * p["k"] * (low * low + high * high)
        return push_up - push_down, xp.sum(elastic, axis=-1)


def tendon_friction(model):
    """(names, Cv (T, nv), frictionloss (T,)) of the fixed tendons with dry friction."""
    tendons = [t for t in model.tendons if t.frictionloss > 0]
    return (tuple(t.name for t in tendons), tendon_maps(model, tendons)[1],
            np.array([t.frictionloss for t in tendons]))


class StickSlip:
    """Coulomb friction of the joints that have it (then of the fixed tendons with a
    ``frictionloss``, along their lengths), as elasto-plastic springs: a joint deflected by
    delta from its anchor feels clip(-(k delta + b qd), -c+, -c-), and its anchor follows so
    that the spring alone stays inside [-c+, -c-] (c+ and c- the model's friction forces at
    positive and negative velocity; a tendon's, +-frictionloss, its joints feeling c times
    it)."""

    def __init__(self, model, settings):
        coulomb = model.coulomb
        self.index = np.flatnonzero(np.any(coulomb != 0, axis=1))
        _, self.Cv, force = tendon_friction(model)
        self.positive = np.concatenate([coulomb[self.index, 0], force])
        self.negative = np.concatenate([coulomb[self.index, 1], -force])
        #: (F, nv): each spring's joint forces per unit of its force (e_v, a tendon's c)
        self.rows = np.concatenate([np.eye(model.nv)[self.index], self.Cv])
        self.settings = settings

    def __bool__(self):
        return len(self.positive) > 0

    @property
    def key(self):
        return ("stick_slip", tuple(self.index.tolist()), self.Cv.tobytes())

    def params(self, model, q0):
        k, b = _spring_constants(model, q0, self.index, self.settings.frequency,
                                 self.settings.damping_ratio, self.Cv)
        return {"k": k, "b": b, "low": -self.positive, "high": -self.negative}

    def moved(self, xp, x):
        """(N, F): each spring's share of the joint motion x (N, nv) (a displacement or a
        velocity): a joint's own, a tendon's c x."""
        out = x[..., self.index]
        return xp.concatenate([out, x @ self.Cv.T], axis=-1) if len(self.Cv) else out

    def torques(self, xp, p, delta, qd):
        """(N, F): the springs' forces at deflection delta (N, F) and velocity qd (N, nv)
        (``rows`` maps them onto the joints)."""
        trial = -(p["k"] * delta + p["b"] * self.moved(xp, qd))
        return xp.clip(trial, p["low"], p["high"])

    def project(self, xp, p, delta):
        """(deflections the springs can hold, elastic energy (N,))."""
        delta = xp.clip(delta, -p["high"] / p["k"], -p["low"] / p["k"])
        return delta, xp.sum(0.5 * p["k"] * delta * delta, axis=-1)


class TendonSprings:
    """The springs and dampers of a model's fixed tendons (``model.tendons``): a tendon of length
    L = c . q feels f = -(k (L - L_spring) + b dL/dt), which its joints feel as tau = c f."""

    def __init__(self, model):
        tendons = [t for t in model.tendons if t.passive]
        self.Cq, self.Cv = tendon_maps(model, tendons)
        self.k = np.array([t.stiffness for t in tendons])
        self.b = np.array([t.damping for t in tendons])
        self.rest = np.array([t.spring_length for t in tendons])

    @property
    def key(self):
        return ("tendons", self.Cq.tobytes(), self.Cv.tobytes(), self.k.tobytes(),
                self.b.tobytes(), self.rest.tobytes())

    def forces(self, xp, q, qd):
        """(tau (N, nv), elastic energy (N,)) at q (N, nq), qd (N, nv)."""
        stretch = q @ self.Cq.T - self.rest
        f = -(self.k * stretch + self.b * (qd @ self.Cv.T))
        return f @ self.Cv, xp.sum(0.5 * self.k * stretch * stretch, axis=-1)
