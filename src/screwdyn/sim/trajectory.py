"""The Trajectory a simulation returns: samples, energy accounting, views, files and pictures.

Energy accounting. Besides the kinetic energy T and the gravitational potential energy V of every
sample, a rollout integrates, with the integrator's own stages, the work of two groups of forces:

- ``work()``: the work done *on* the robot by the controller's joint forces and the external
  wrenches (cumulative, J);
- the work of the passive forces (contact, joint limits, joint friction and damping), split into
  the energy their springs hold, ``elastic`` (contact and limit springs, stick-slip anchors), and
  the energy they took out for good, ``dissipated()`` (dampers, sliding friction, a contact
  letting go of a compressed spring).

So that T + V + elastic + dissipated - work is constant, to the integrator's accuracy, whatever
``record_every``; ``energy_drift()`` measures how far it strays.
"""
import math

import numpy as np


class Trajectory:
    """A simulated run: samples at times ``t`` (T,) of ``q`` (..., T, nq), ``qd``, ``qdd``, ``tau``
    (..., T, nv), ``kinetic`` and ``potential`` energy (..., T), ``elastic`` (..., T) the energy
    held by contact and joint springs, ``work_in`` and ``work_passive`` (..., T) the cumulative
    work of the input forces (controller, external wrenches) and of the passive ones (contact,
    limits, friction, damping); leading dimensions are the batch of rollouts (none for a single
    one). ``tau[k]`` (the controller's joint forces) acted during [t_k, t_k + dt); ``qdd[k]`` is
    the acceleration at t_k. ``contact_force`` (..., T, points, 3), the world-frame force on each
    contact point, when the run recorded it (``record_contact_forces=True``), else None.
    ``meta`` holds how it was made (model name, dt, integrator, algebra, backend, controller,
    gravity, contact, wall_time and compile_time in seconds)."""

    ARRAYS = ("t", "q", "qd", "qdd", "tau", "kinetic", "potential", "elastic", "work_in",
              "work_passive")

    def __init__(self, t, q, qd, qdd, tau, kinetic, potential, elastic=None, work_in=None,
                 work_passive=None, model=None, meta=None, contact_force=None):
        self.t, self.q, self.qd, self.qdd, self.tau = t, q, qd, qdd, tau
        self.kinetic, self.potential = kinetic, potential
        unknown = np.full(np.shape(kinetic), np.nan)
        self.elastic = unknown if elastic is None else elastic
        self.work_in = unknown if work_in is None else work_in
        self.work_passive = unknown if work_passive is None else work_passive
        self.contact_force = contact_force
        self.model, self.meta = model, dict(meta or {})

    # -- views ----------------------------------------------------------------------------
    @property
    def energy(self):
        """Mechanical energy T + V (..., T)."""
        return self.kinetic + self.potential

    @property
    def batch_shape(self):
        return self.q.shape[:-2]

    @property
    def n_samples(self):
        return len(self.t)

    @property
    def real_time_factor(self):
        """Simulated time per second of wall time (compilation excluded)."""
        wall = self.meta.get("wall_time", 0.0)
        return (self.t[-1] if len(self.t) else 0.0) / wall if wall > 0 else math.inf

    def __getitem__(self, index):
        """The rollout(s) at ``index`` of the batch, e.g. ``traj[3]``."""
        if not self.batch_shape:
            raise IndexError("a single rollout has no batch to index")
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index) or len(index) > len(self.batch_shape):
            raise IndexError(f"index {index} does not address the batch {self.batch_shape}")
        forces = None if self.contact_force is None else self.contact_force[index]
        return Trajectory(self.t, *(getattr(self, n)[index] for n in self.ARRAYS[1:]),
                          model=self.model, meta=self.meta, contact_force=forces)

    def __repr__(self):
        batch = f", batch={self.batch_shape}" if self.batch_shape else ""
        end = self.t[-1] if len(self.t) else 0.0
        return (f"Trajectory({self.meta.get('model', '?')!r}, {self.n_samples} samples over "
                f"{end:.6g} s{batch}, integrator={self.meta.get('integrator')!r})")

    # -- energy ---------------------------------------------------------------------------
    def work(self):
        """Cumulative work (..., T) done on the robot by the controller's joint forces and the
        external wrenches (J), integrated by the integrator's own stages."""
        return self.work_in

    def dissipated(self):
        """Cumulative energy (..., T) the passive forces took out of the robot for good (J):
        dissipated by contact damping and sliding, joint friction and damping, limit dampers;
        the negative of their work, less what their springs hold (``elastic``)."""
        return -self.work_passive - (self.elastic - self.elastic[..., :1])

    def energy_scale(self):
        """The energy the motion exchanges, per rollout (...): the larger of the peak kinetic
        energy and the range of the potential energy (total energy has no natural zero), but at
        least ``meta["energy_floor"]``, a thousandth of the robot's weight times its extent."""
        if self.kinetic.shape[-1] == 0:
            return np.zeros(self.batch_shape)
        exchanged = np.maximum(self.kinetic.max(axis=-1),
                               self.potential.max(axis=-1) - self.potential.min(axis=-1))
        return np.maximum(exchanged, self.meta.get("energy_floor", 0.0))

    def energy_error(self):
        """The energy no force accounts for (..., T): T + V + elastic + dissipated - work, minus
        its initial value (J). Zero for an exact integration."""
        e = self.energy - self.work_in - self.work_passive
        return e - e[..., :1]

    def energy_drift(self, final=False):
        """The largest |energy_error()| over the run (its value at the end if ``final``),
        relative to ``energy_scale()``, per rollout (...)."""
        if self.n_samples == 0:
            return np.zeros(self.batch_shape)
        error = self.energy_error()
        error = np.abs(error[..., -1] if final else error).reshape(self.batch_shape + (-1,))
        return error.max(axis=-1) / np.maximum(self.energy_scale(), np.finfo(float).tiny)

    # -- files ----------------------------------------------------------------------------
    def save(self, path):
        """Write ``.npz`` (any batch) or ``.csv`` (one rollout: a header line of metadata
        starting with ``#``, then one row per sample), atomically (a temporary file renamed:
        an interrupted save never leaves a partial file). An existing file is replaced."""
        from .files import save

        return save(self, path)

    @classmethod
    def load(cls, path, model=None):
        """Read a file written by ``save``; ``model`` (optional, enables drawing it) must be the
        model it was simulated with (same coordinates): ``ValueError`` otherwise."""
        from .files import load

        return load(cls, path, model)

    # -- pictures -------------------------------------------------------------------------
    def plot(self, path=None, **kwargs):
        """Joint positions, velocities, joint forces and the energy balance against time
        (``screwdyn.sim.pictures.plot_trajectory``). Saves to ``path``; returns the Figure."""
        from .pictures import plot_trajectory

        return plot_trajectory(self, path, **kwargs)

    def animate(self, path, model=None, **kwargs):
        """Save an animation of the robot along the trajectory (.gif or .mp4)."""
        from .pictures import animate

        return animate(self, path, model=model, **kwargs)

    def summary(self):
        """A few lines: length, wall time, real-time factor, energy balance, peak joint forces."""
        from .summary import summary_lines

        return "\n".join(summary_lines(self))


def coordinate_names(model):
    """Names of the q and v coordinates: a 1-DoF joint's name, or ``joint.x`` ... ``joint.qw``
    and ``joint.vx`` ... ``joint.wz`` for a multi-DoF joint (its ``position_names`` and
    ``velocity_names``)."""
    def names(joint, suffixes):
        return [f"{joint}.{c}" if c else joint for c in suffixes]

    q_names, v_names = [], []
    for b in model.active_bodies:
        q_names += names(b.joint, b.joint_model.position_names())
        v_names += names(b.joint, b.joint_model.velocity_names())
    return q_names, v_names
