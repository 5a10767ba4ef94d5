"""What a run records: the layout of its samples, and the ``Trajectory`` made of them.

A run's samples are a tuple of arrays (T, N, ...), T samples of the N rollouts, as every loop
returns them: q (T, N, nq), qd, qdd, tau (T, N, nv), the energy channels (T, N, 3) [elastic,
work_in, work_passive] (J), and, with ``record_contact_forces``, the contact forces
(T, N, points, 3) (N, world frame).
"""
import numpy as np

from .energy import energies, energy_floor, penetration_energy
from .limit_constraints import LimitRows, RigidLimits
from .trajectory import Trajectory


def sample_width(model, points, record_forces):
    """Numbers recorded per sample and rollout."""
    return model.nq + 3 * model.nv + 3 + (3 * points if record_forces else 0)


def empty_samples(run, T=0):
    """Samples (T, N, ...) of zeros: none at all (T = 0), or T of an empty batch (N = 0)."""
    N, model = len(run.q0), run.model
    out = (np.zeros((T, N, model.nq)),) + tuple(np.zeros((T, N, model.nv)) for _ in range(3)) \
        + (np.zeros((T, N, 3)),)
    if run.settings.record_contact_forces and run.points:
        out = out + (np.zeros((T, N, run.points, 3)),)
    return out


def make_trajectory(run, samples, backend, timing):
    """The ``Trajectory`` of ``samples`` (T, N, ...) (batch axes first, as the user gave them),
    its energies and its meta (the run's settings, ``backend``, ``timing``: wall_time and
    compile_time in s)."""
    model, batch, s = run.model, run.batch, run.settings

    def public(a):
        return np.ascontiguousarray(np.moveaxis(a, 0, 1).reshape(batch + (a.shape[0],)
                                                                + a.shape[2:]))

    q, qd = public(samples[0]), public(samples[1])
    channels = public(samples[4])
    kinetic, potential = energies(model, q, qd, s.gravity, run.system.assembly)
    forces = public(samples[5]) if len(samples) > 5 else None
    gravity = s.gravity if s.gravity is not None else model.gravity
    meta = {"model": model.name, "dt": run.dt, "record_every": run.record_every,
            "integrator": s.integrator, "algebra": s.algebra, "backend": backend,
            "control": "hold" if run.policy.kind == "table" else s.control,
            "controller": run.policy.name, "gravity": list(gravity),
            "damping": model.damping.tolist(),
            "energy_floor": energy_floor(run, gravity) if len(run.q0) else 0.0,
            "penetration_energy": penetration_energy(run, gravity),
            **timing}
    if run.system.contact is not None:
        meta["contact"] = run.system.contact.describe(run.params["contact"])
    if isinstance(s.joint_limits, RigidLimits):  # (no rows where no joint has a limit)
        meta["joint_limits"] = (run.system.limits or LimitRows(model, s.joint_limits)).describe()
    elif s.joint_limits is not None:
        meta["joint_limits"] = {"frequency": s.joint_limits.frequency,
                                "damping_ratio": s.joint_limits.damping_ratio}
    if run.system.friction is not None:
        meta["joint_friction"] = s.joint_friction.model
    elif run.system.friction_rows is not None:
        meta["joint_friction"] = run.system.friction_rows.describe()
    if s.external is not None:
        meta["external"] = getattr(s.external, "__name__", type(s.external).__name__)
    return Trajectory(
        t=np.arange(q.shape[-2]) * run.dt * run.record_every, q=q, qd=qd,
        qdd=public(samples[2]), tau=public(samples[3]), kinetic=kinetic, potential=potential,
        elastic=channels[..., 0], work_in=channels[..., 1], work_passive=channels[..., 2],
        model=model, meta=meta, contact_force=forces)
