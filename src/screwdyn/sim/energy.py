"""The energy account of a run: the kinetic and potential energy of every sample, the energy
scale an error is measured against (``energy_floor``), the energy an initial penetration may
release (``penetration_energy``), and the check that the balance holds (``energy_failure``:
``energy_limit``)."""
import numpy as np

from ..dynamics import forward_kinematics, kinetic_energy, potential_energy
from .trajectory import Trajectory

#: the smallest extent (m) of a robot in the energy floor (see ``energy_floor``)
MIN_EXTENT = 0.1


def energy_floor(run, gravity):
    """A thousandth of the robot's weight times its extent at the first initial state (the
    spread of its link origins and contact points, at least MIN_EXTENT), in J: the smallest
    energy scale an energy error is measured against, so that a robot that hardly moves (or
    starts at rest) does not divide by almost nothing. ``gravity`` (3,) (m/s^2)."""
    model = run.model
    T = np.asarray(forward_kinematics(model, run.q0[0]))
    points = [T[:, :3, 3]]
    if run.system.contact is not None:
        points.append(run.system.contact.points_at(np, run.params["contact"], T[None])[0])
    points = np.concatenate(points)
    extent = np.linalg.norm(points - points.mean(axis=0), axis=-1).max() * 2 if len(points) \
        else 0.0
    g = max(np.linalg.norm(gravity), 9.81)
    return 1e-3 * g * model.total_mass * max(float(extent), MIN_EXTENT)


def penetration_energy(run, gravity):
    """The energy (J) the contact may give out pushing what starts inside the ground or
    inside another shape out of it: the robot's weight lifted through the deepest initial
    penetration (0 without contact or penetration), which ``energy_failure`` does not count
    as energy the springs produced. ``gravity`` (3,) (m/s^2)."""
    if run.deepest is None:
        return 0.0
    g = max(np.linalg.norm(gravity), 9.81)
    return float(run.model.total_mass * g * max(run.deepest[0], 0.0))


def energies(model, q, qd, gravity, assembly=None, block=8192):
    """Kinetic and potential energy (..., T) (J) of every sample q (..., T, nq),
    qd (..., T, nv), in numpy blocks (bounded memory); an assembly's own (see
    ``inputs.split_assembly``)."""
    if assembly is not None:
        with np.errstate(all="ignore"):
            return (np.asarray(assembly.kinetic_energy(q, qd)),
                    np.asarray(assembly.potential_energy(q, gravity=gravity)))
    shape = q.shape[:-1]
    qf, qdf = q.reshape(-1, model.nq), qd.reshape(-1, model.nv)
    T, V = np.empty(len(qf)), np.empty(len(qf))
    for s in range(0, len(qf), block):
        with np.errstate(all="ignore"):
            T[s:s + block] = kinetic_energy(model, qf[s:s + block], qdf[s:s + block])
            V[s:s + block] = potential_energy(model, qf[s:s + block], gravity=gravity)
    return T.reshape(shape), V.reshape(shape)


def energy_failure(run, traj):
    """The energy check: (failure, trajectory cut before it) when, beyond ``energy_limit`` of
    the energy exchanged so far, the energy balance breaks (energy no force accounts for) or the
    passive forces produce energy (negative dissipation: springs too stiff for the step give
    out more than they took in, beyond what pushing the initial penetrations out may give:
    ``penetration_energy``); else (None, traj). A failure is (reason, step, rollout index),
    as ``failures.failure`` returns it."""
    limit = run.settings.energy_limit
    if limit is None or traj.n_samples < 2:
        return None, traj
    scale = np.maximum.accumulate(np.maximum(traj.kinetic, np.abs(traj.work_in)), axis=-1)
    spread = np.maximum.accumulate(traj.potential, axis=-1) \
        - np.minimum.accumulate(traj.potential, axis=-1)
    scale = np.maximum(np.maximum(scale, spread), traj.meta.get("energy_floor", 0.0))
    scale = np.maximum(scale, np.finfo(float).tiny)
    unaccounted = np.abs(traj.energy_error())
    produced = -traj.dissipated() - traj.meta.get("penetration_energy", 0.0)
    found = None
    for amount, what in ((unaccounted, "the energy balance broke: {err:.3g} J that no force "
                                       "accounts for"),
                         (produced, "the contact, limit or friction springs gave out {err:.3g} J "
                                    "more than they took in (the step is too long for their "
                                    "stiffness)")):
        bad = (amount > limit * scale).reshape(-1, traj.n_samples)
        if not bad.any():
            continue
        first = np.where(bad.any(axis=1), bad.argmax(axis=1), traj.n_samples)
        rollout = int(np.argmin(first))
        sample = int(first[rollout])
        if found is None or sample < found[0]:
            err = float(amount.reshape(-1, traj.n_samples)[rollout, sample])
            ref = float(scale.reshape(-1, traj.n_samples)[rollout, sample])
            found = (sample, rollout, what.format(err=err), err / ref, ref)
    if found is None:
        return None, traj
    sample, rollout, what, ratio, ref = found
    where = tuple(int(i) for i in np.unravel_index(rollout, run.batch)) if run.batch else ()
    reason = (f"{what}, {ratio:.3g} of the {ref:.3g} J the motion exchanges (the simulation "
              f"diverged; a smaller dt or a stabler integrator helps; energy_limit={limit:g})")
    keep = sample  # the samples before the one where it broke
    cut = Trajectory(traj.t[:keep], *(getattr(traj, n)[..., :keep, :] for n in
                                      ("q", "qd", "qdd", "tau")),
                     *(getattr(traj, n)[..., :keep] for n in ("kinetic", "potential", "elastic",
                                                              "work_in", "work_passive")),
                     model=traj.model, meta=traj.meta,
                     contact_force=None if traj.contact_force is None
                     else traj.contact_force[..., :keep, :, :])
    return (reason, sample * run.record_every, where), cut
