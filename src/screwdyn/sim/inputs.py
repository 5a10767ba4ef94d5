"""The checks of what ``simulate`` is given, before anything runs: the model (or assembly), the
step and the duration, the initial states, a torque table's batch, and the size of the run (its
samples must fit in memory; a very long one warns). Each raises ``ValueError`` naming the
argument at fault."""
import math
import warnings

import numpy as np

from .. import _backend, validation
from .checks import positive
from .record import sample_width

#: an initial state farther than this from satisfying the model's constraints (m, rad; m/s,
#: rad/s for their rates) warns before the run
CONSTRAINT_TOLERANCE = 1e-6

#: a contact point deeper than this (m) in the ground at the initial state warns before the run
INITIAL_PENETRATION = 0.01

#: a rollout with more steps than this (steps x rollouts) warns with its size before it runs
LONG_ROLLOUT_STEPS = 10 ** 8


def split_assembly(model):
    """(assembly, model): a Model simulates itself (assembly None). An object with its own
    ``forward_dynamics(q, qd, tau, gravity=, algebra=, time=)``, ``kinetic_energy``,
    ``potential_energy``, a ``version`` (changed when it changes) and a ``configuration_model``
    (a Model of its q and v layout), as a ``screwdyn.composition.Assembly`` has, is simulated
    through them."""
    layout = getattr(model, "configuration_model", None)
    return (None, model) if layout is None else (model, layout)


def steps(model, dt, t_final, record_every):
    """(dt (s), t_final (s), n_records, n_steps), checked: a model with degrees of freedom,
    0 < dt <= t_final. The run takes ceil(t_final / (dt record_every)) records of
    ``record_every`` steps (t_final rounded up to whole recorded intervals)."""
    if model.nv == 0:
        raise ValueError(f"model {model.name!r} has no degrees of freedom: nothing to simulate")
    dt, t_final = positive(dt, "dt"), positive(t_final, "t_final")
    if dt > t_final:
        raise ValueError(f"dt = {dt:g} s is longer than t_final = {t_final:g} s: nothing would "
                         "be simulated between the first and the last sample; use dt <= t_final")
    n_records = max(1, math.ceil(t_final / (dt * record_every) - 1e-9))
    return dt, t_final, n_records, n_records * record_every


def initial_state(model, q0, qd0):
    """(q0 (N, nq), qd0 (N, nv), batch shape), checked: real, finite, unit quaternions."""
    arrays = []
    for name, value, size, meaning in (("q0", q0, model.nq, "configuration, nq"),
                                       ("qd0", qd0, model.nv, "velocity, nv")):
        if value is None:
            if name == "q0":
                raise ValueError(f"q0 must be an array of shape (..., {model.nq}) (configuration,"
                                 f" nq), got None (model.neutral is the zero configuration)")
            value = np.zeros(model.nv)
        a = np.array(value)  # a copy; JAX arrays come back to numpy here
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be real numbers, got dtype {a.dtype}")
        a = a.astype(float)
        _backend.check_last_dim(a, size, name, meaning)
        arrays.append(a)
    q0, qd0 = arrays
    batch = _backend.broadcast_batch([("q0", q0, 1), ("qd0", qd0, 1)])
    if not (np.all(np.isfinite(q0)) and np.all(np.isfinite(qd0))):
        raise ValueError("q0 and qd0 must be finite")
    for b, qs in zip(model.active_bodies, model.q_slices):
        unit = b.joint_model.normalize(np, q0[..., qs])
        if np.any(np.abs(unit - q0[..., qs]) > 1e-6):
            raise ValueError(f"q0: the quaternion of joint {b.joint!r} (q[{qs.start}:{qs.stop}], "
                             f"{' '.join(b.joint_model.position_names())}) must have unit norm")
        q0[..., qs] = unit
    N = int(np.prod(batch, dtype=int))
    return (np.broadcast_to(q0, batch + (model.nq,)).reshape(N, model.nq).copy(),
            np.broadcast_to(qd0, batch + (model.nv,)).reshape(N, model.nv).copy(), batch)


def table_batch(policy, batch):
    """A torque table with batch axes (..., steps, nv) must broadcast with the initial
    states' batch shape."""
    if policy.table is not None and policy.table.ndim > 2:
        try:
            np.broadcast_shapes(policy.table.shape[:-2], batch)
        except ValueError:
            raise ValueError(f"the torque table's batch shape {policy.table.shape[:-2]} does not "
                             f"match the initial states' {batch}") from None


def run_size(model, system, settings, N, n_records, n_steps):
    """Refuse a run whose samples alone would not fit in memory; warn about a very long one
    (called by ``simulate`` itself: the warning points at its caller)."""
    points = 0 if system.contact is None else len(system.contact.labels)
    width = sample_width(model, points, settings.record_contact_forces) + 4  # + energies
    # + the sample times and a temporary while they are computed (all of an empty batch's)
    need = 8 * (width * N + 2) * (n_records + 1)
    available = validation.memory_bytes()
    if available and need > validation.MEMORY_FRACTION * available:
        raise ValueError(f"the recorded samples would take {need / 2 ** 30:,.1f} GiB "
                         f"({n_records + 1} samples x {N} rollouts x {width} numbers, and the "
                         "sample times), more than "
                         f"{validation.MEMORY_FRACTION:.0%} of this machine's "
                         f"{available / 2 ** 30:.3g} GiB: "
                         "shorten the run, record fewer samples (record_every) or split the batch")
    if n_steps * max(N, 1) > LONG_ROLLOUT_STEPS:
        warnings.warn(f"a long simulation: {n_steps:,} steps x {N:,} rollouts "
                      f"({n_steps * N:.3g} state steps; the samples take "
                      f"{need / 2 ** 20:,.0f} MiB). The progress bar (progress=True) shows the "
                      "estimated time; Ctrl-C keeps the samples computed so far.", stacklevel=3)


def check_constraints(model, q0, qd0):
    """Warn (``ConstraintWarning``) before a run of a model with equality constraints whose
    initial states violate them (their residual or its rate above ``CONSTRAINT_TOLERANCE``),
    naming the worst row and the fix, or whose rows are redundant at the first state (an
    over-constrained loop: kept, solved by least squares)."""
    if not model.constraints or not len(q0):
        return
    from .. import constraints
    from ..errors import ConstraintWarning, warn

    names = constraints.labels(model)
    e = np.abs(np.asarray(constraints.constraint_residual(model, q0))).max(axis=0)
    J = np.asarray(constraints.constraint_jacobian(model, q0))
    rate = np.abs(np.einsum("nij,nj->ni", J, qd0)).max(axis=0)
    for what, values, unit in (("violates", e, "m or rad"), ("moves off", rate, "m/s or rad/s")):
        worst = int(np.argmax(values))
        if values[worst] > CONSTRAINT_TOLERANCE:
            timeconst = model.constraints[0].timeconst
            warn(f"the initial state {what} the constraint row {names[worst]!r} by "
                 f"{values[worst]:.3g} {unit}: the stabilisation closes it within a few time "
                 f"constants ({timeconst:g} s), with large forces; start from "
                 "sd.constraints.project(model, q0) (and qd0 in the null space of "
                 "sd.constraint_jacobian)", ConstraintWarning)
    rank = constraints.rank(model, q0[0])
    if rank < model.nconstraints:
        warn(f"the model's {model.nconstraints} constraint rows have rank {rank} at the initial "
             "state (redundant rows, e.g. a planar loop closed by a 3-D Connect): the "
             "simulation takes the least-squares constraint forces", ConstraintWarning)


def check_penetration(run):
    """Warn (``PenetrationWarning``) before a run whose initial state has a contact point
    deeper than ``INITIAL_PENETRATION`` in the ground, naming the point, the depth and the
    rollout, rather than letting the first steps throw it out of the ground."""
    if run.deepest is None:
        return
    from ..errors import PenetrationWarning, warn

    depth, label, overlap = run.deepest
    if depth > INITIAL_PENETRATION and overlap:  # a shape inside another
        warn(f"the initial state has two shapes overlapping: {overlap} by {depth * 100:.3g} "
             f"cm ({label!r}); the contact throws them apart in the first steps, "
             "and deep inside, their contact points can be shallow and will not push them "
             "apart reliably: move them apart in q0, or exclude the pair (sd.Scene's exclude= "
             "or srdf=) where two links of a robot overlap by design", PenetrationWarning)
    elif depth > INITIAL_PENETRATION:
        warn(f"the initial state has the contact point {label!r} {depth * 100:.3g} cm inside "
             "the ground: the contact will throw it out in the first steps; raise q0 (a "
             "floating base's height) by that much, or, for a link that a fixed base holds at "
             "or below the ground, leave it out (sd.Scene.add_robot(..., exclude=[(link, "
             "'ground')]), GroundContact(links=...))", PenetrationWarning)
