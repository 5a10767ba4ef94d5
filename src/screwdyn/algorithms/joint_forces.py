"""The forces of the joints themselves, added to the rigid-body forces: reflected rotor inertia
(armature) times qdd, viscous friction (damping) times qd, and Coulomb friction, a constant force
against the motion (its value for positive and for negative velocity, zero at rest, as Robotics
Toolbox's ``Link.friction``).

The terms of joints whose coefficient is zero are left out, not multiplied by an exact zero, as
the algebras leave out products with a constant zero: on every path (numpy, JAX, the traced
programs of ``screwdyn.execution``) the same operations, and an infinite rate of a joint without
friction does not make 0 * inf = NaN."""
import numpy as np


def add_diagonal(xp, tau, coefficients, x):
    """tau + diag(coefficients) x for per-dof model constants ``coefficients`` (nv,) (armature,
    damping) and rates x (nv, N); the terms of zero coefficients are left out."""
    coefficients = np.asarray(coefficients, dtype=float)
    if not coefficients.any():
        return tau
    if coefficients.all():
        return tau + coefficients[:, None] * x
    return xp.stack([tau[k] + c * x[k] if c else tau[k] for k, c in
                     enumerate(coefficients.tolist())])


def friction(xp, model, qd):
    """damping * qd + Coulomb friction (nv, N), or 0.0 when the model has none."""
    if not model.has_joint_friction:
        return 0.0
    out = add_diagonal(xp, xp.zeros_like(qd), model.damping, qd)
    c = model.coulomb
    if c.any():
        out = out + coulomb(xp, qd, c[:, :1], c[:, 1:])
    return out


def coulomb(xp, rate, positive, negative):
    """Coulomb friction at velocities ``rate``: ``positive`` where rate > 0, ``negative`` where
    rate < 0, none at rest (arrays that broadcast with rate)."""
    return xp.where(rate > 0, positive, xp.where(rate < 0, negative, 0.0))


def add_joint_forces(xp, model, tau, qd, qdd):
    """tau + armature * qdd + friction (nv, N): the rigid-body joint forces ``tau`` plus what
    each joint's motor and bearings add."""
    tau = add_diagonal(xp, tau, model.armature, qdd)
    return tau + friction(xp, model, qd) if model.has_joint_friction else tau
