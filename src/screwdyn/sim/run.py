"""One simulation run: the constants every part of ``simulate`` works from (``Run``), and the
numbers the compiled loops take as arguments (``all_params``)."""
import functools

import numpy as np


class Run:
    """Everything one ``simulate`` call runs with, fixed before the first step.

    model: the Model simulated (an assembly's configuration layout); system: its ``System``
    (the forces); settings: the ``Settings``; policy: the controller as a ``Policy``;
    q0 (N, nq), qd0 (N, nv): the initial states, flattened over the batch; batch: the batch
    shape (() for one rollout; N = prod(batch)); dt: the step (s); n_records: recorded
    intervals (n_records + 1 samples, the final state included); record_every: steps per
    recorded interval; n_steps = n_records record_every; params: the system's numbers
    (``System.params(q0)``: gravity, contact, per-rollout spring constants); points: the
    number of contact points (0 without contact).
    """

    def __init__(self, model, system, settings, policy, q0, qd0, batch, dt, n_records):
        self.model, self.system, self.settings, self.policy = model, system, settings, policy
        self.q0, self.qd0, self.batch, self.dt = q0, qd0, batch, dt
        self.n_records, self.record_every = n_records, settings.record_every
        self.n_steps = n_records * settings.record_every
        self.params = system.params(q0) if len(q0) else {}
        self.points = 0 if system.contact is None else len(system.contact.labels)

    @functools.cached_property
    def deepest(self):
        """(depth (m), label, overlap) of the deepest contact point at the initial states
        (``ContactModel.deepest``; None without contact or initial state): what
        ``inputs.check_penetration`` reports and ``energy.penetration_energy`` allows."""
        if self.system.contact is None or not len(self.q0):
            return None
        from ..dynamics import forward_kinematics

        T = np.asarray(forward_kinematics(self.model, self.q0))
        return self.system.contact.deepest(self.model, self.params["contact"], T)


def all_params(run, xp):
    """{"policy": the controller's gains, "system": ``run.params``} as arrays of ``xp``: the
    numbers a step takes as an argument."""
    convert = (lambda a: a) if xp is np else xp.asarray
    return {"policy": {k: convert(v) for k, v in run.policy.params.items()},
            "system": tree_map(convert, run.params)}


def tree_map(fn, tree):
    """``fn`` applied to every leaf of a tree of dicts."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)
