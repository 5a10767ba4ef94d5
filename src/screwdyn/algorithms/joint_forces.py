"""The forces of the joints themselves, added to the rigid-body forces: reflected rotor inertia
(armature) times qdd, viscous friction (damping) times qd, and Coulomb friction, a constant force
against the motion (its value for positive and for negative velocity, zero at rest, as Robotics
Toolbox's ``Link.friction``)."""


def friction(xp, model, qd):
    """damping * qd + Coulomb friction (nv, N), or 0.0 when the model has none."""
    if not model.has_joint_friction:
        return 0.0
    out = model.damping[:, None] * qd
    c = model.coulomb
    if c.any():
        out = out + xp.where(qd > 0, c[:, :1], xp.where(qd < 0, c[:, 1:], 0.0))
    return out


def joint_forces(xp, model, qd, qdd):
    """armature * qdd + friction (nv, N): what a joint's motor adds to the rigid-body tau."""
    return model.armature[:, None] * qdd + friction(xp, model, qd)
