"""W_i of the branched-robot paper: one subsystem evaluated on its own at its connection points.

Eqs. (1)-(2) of the paper: the wrenches at the joints of subsystem i come from three sources, its
own motion, the motion at its connection point a_i with its predecessor, and the wrenches at the
connection points b_ij with its successors. ``SubsystemFunction`` takes exactly these:

    forward:   (q_i, qd_i, qdd_i, twist and twist derivative at a_i)
                   -> the twist and twist derivative at every b_ij (what the successors need)
    W_i:       (the same, and the wrench at every b_ij)
                   -> its joint forces tau_i and the wrench at a_i (what it passes up)

in the public layout of ``screwdyn.composition.blackbox`` (leading batch dimensions, twists and
wrenches (..., 6) in the frame of their connection point). Nothing else of the assembly enters, so
subsystems can be evaluated separately, by different controllers, in other processes or on other
machines (``distributed``), and ``Assembly.inverse_dynamics`` is these evaluations composed.

The recursion inside depends on the algebra: in dual quaternions it is the paper's own, the
Newton-Euler at the centres of mass (``algorithms/dq_newton_euler.py``); in the spatial algebra and
CGA it is Featherstone's on body frames (``algorithms/rnea.py``). Both give the same numbers to
rounding.
"""
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..algebra import link_placements
from ..algorithms import dq_newton_euler as com
from ..algorithms.rnea import newton_euler_backward, newton_euler_forward
from ..dynamics import _Call as _ModelCall
from ..errors import ModelError
from .layout import Batch


class SubsystemPass(NamedTuple):
    """A subsystem's forward evaluation: ``motion`` {successor: (twist, twist_derivative)} at their
    connection points (public arrays), and what its backward evaluation reads."""

    motion: dict
    state: object


class SubsystemFunction:
    """W_i for subsystem ``name`` of ``assembly`` in ``algebra``: its model, the connection points
    of its successors (name, the body each is fixed to and its pose there), nothing else. It can
    be pickled and sent to another process."""

    def __init__(self, assembly, name, algebra="spatial"):
        if algebra == "vector":
            raise ValueError("a subsystem runs in an algebra with a moving base: 'dq', 'spatial' "
                             "or 'cga' (the DH recursion of algebra='vector' has a fixed base)")
        s = assembly[name]
        if s.model is None:
            raise ModelError(f"subsystem {name!r} is a black box: it has no W_i, only the wrench "
                             "it exerts at its connection point")
        self.name, self.model, self.algebra, self.where = name, s.model, algebra, s.where
        self.successors = tuple((c.name, c.body, c.mount) for c in (
            assembly[child] for child in assembly._children[name]))

    def __repr__(self):
        return (f"SubsystemFunction({self.name!r}, nv={self.model.nv}, successors="
                f"{[n for n, _, _ in self.successors]}, algebra={self.algebra!r})")

    # -- public: leading batch dimensions -----------------------------------------------------------
    def forward(self, q, qd, qdd, twist, twist_derivative, f_ext=None):
        """Its forward evaluation (``SubsystemPass``): ``q`` (..., nq_i), ``qd``, ``qdd``
        (..., nv_i), the ``twist`` (None: at rest) and ``twist_derivative`` (gravity folded in)
        (..., 6) at its connection point, ``f_ext`` (..., nlinks_i, 6) on its links."""
        c = _ModelCall(self.model, self.algebra, entries=True, q=q, qd=qd, qdd=qdd, f_ext=f_ext)
        motion_batch = [np.shape(a)[:-1] for a in (twist, twist_derivative) if a is not None]
        batch = Batch(c.xp, np.broadcast_shapes(c.batch, *motion_batch))
        if batch.shape != c.batch:  # the motion has more states than the joints: broadcast
            xp, given = c.xp, {"q": q, "qd": qd, "qdd": qdd, "f_ext": f_ext}
            c = _ModelCall(self.model, self.algebra, entries=True, **{
                k: None if v is None else xp.broadcast_to(
                    xp.asarray(v), batch.shape + np.shape(v)[-(2 if k == "f_ext" else 1):])
                for k, v in given.items()})
        what = f"subsystem {self.where}: connection point"
        v0 = batch.twist(c.alg, twist, f"{what} twist")
        a0 = batch.twist(c.alg, twist_derivative, f"{what} twist_derivative")
        state, motion = self.evaluate_forward(c, batch, v0, a0)
        return SubsystemPass({n: (None if V is None else batch.twist_public(c.alg, V),
                                  batch.twist_public(c.alg, A)) for n, (V, A) in motion.items()},
                             (c, batch, v0, a0, state))

    def backward(self, forward, wrenches):
        """W_i after ``forward``: ``wrenches`` {successor: (..., 6)}, the wrench each successor
        exerts at its connection point. Returns (tau_i (..., nv_i), the wrench (..., 6) it exerts
        at its own connection point on its predecessor)."""
        c, batch, v0, a0, state = forward.state
        missing = [n for n, _, _ in self.successors if n not in wrenches]
        if missing:
            raise ValueError(f"subsystem {self.where}: no wrench given for its successors "
                             f"{missing}")
        loads = {n: batch.wrench(c.alg, w, f"subsystem {n!r}: wrench at its connection point")
                 for n, w in wrenches.items()}
        tau, zeta = self.evaluate_backward(c, batch, state, v0, a0, loads)
        return batch.public(tau), batch.public(c.alg.wrench_vector(zeta))

    def __call__(self, q, qd, qdd, twist, twist_derivative, wrenches, f_ext=None):
        """W_i: (tau_i, the wrench at its connection point) from its joint state, the motion at
        its connection point and the wrenches at its successors' (see ``forward``, ``backward``)."""
        return self.backward(self.forward(q, qd, qdd, twist, twist_derivative, f_ext), wrenches)

    # -- internal layout: what the assembly composes ----------------------------------------------
    def evaluate_forward(self, c, batch, v0, a0):
        """(state, {successor: (twist, twist derivative)}) from the model-level call ``c`` and the
        algebra twists at the connection point; the successors' values as through the public
        layout (``layout``)."""
        alg = c.alg
        formulation = _formulation(alg)
        state = formulation.forward(self.model, c, v0, a0)
        motion = {}
        for name, body, mount in self.successors:
            v, a = (v0, a0) if body < 0 else formulation.body_motion(self.model, state, body)
            x = _pose(alg, mount)  # the connection point in the body's frame
            motion[name] = (batch.through_public(alg, None if v is None else
                                                 alg.inv_act_twist(x, v)),
                            batch.through_public(alg, alg.inv_act_twist(x, a)))
        return state, motion

    def evaluate_backward(self, c, batch, state, v0, a0, wrenches):
        """(tau (nv_i, N), zeta at the connection point) from ``evaluate_forward``'s state and the
        successors' algebra wrenches at their points."""
        alg = c.alg
        formulation = _formulation(alg)
        zero = 0.0 * a0
        external = c.body_wrenches()
        loads = list(external) if external is not None else [None] * self.model.nbodies
        on_base = _on_base_links(c, zero)
        for name, body, mount in self.successors:
            load = alg.act_wrench(_pose(alg, mount), wrenches[name])  # on body k
            if body < 0:
                on_base = on_base + load
            else:
                loads[body] = load if loads[body] is None else loads[body] + load
        tau, f_base = formulation.backward(self.model, state, c, loads, zero)
        zeta = on_base - f_base  # the bodies push on the base with -f_base (third law)
        carried = formulation.base_links(self.model, v0, a0)
        if carried is not None:  # the links welded to the base move with the point
            zeta = zeta - carried
        return tau, batch.through_public(alg, zeta, "wrench")


@lru_cache(maxsize=256)  # keyed by user data (poses, axes): bounded
def _pose(alg, T):
    """The algebra pose of a constant 4x4 transform (16 numbers)."""
    T = np.reshape(T, (4, 4))
    return alg.pose(T[:3, :3], T[:3, 3])


def _on_base_links(c, zero):
    """The external wrenches on the links a model welds to its base, at its connection point:
    the parent carries them (the model-level ``body_wrenches`` leaves them out)."""
    F = c.arrays.get("f_ext")  # (nlinks, 6, N), link frames
    if F is None:
        return zero
    alg, model = c.alg, c.model
    return sum((alg.act_wrench(placement, alg.wrench(F[l])) for l, (link, placement)
                in enumerate(zip(model.links, link_placements(alg, model))) if link.body < 0),
               zero)


def _formulation(alg):
    """The recursion a subsystem runs in ``alg``: the paper's at the centres of mass in dual
    quaternions, Featherstone's on body frames otherwise."""
    return CentresOfMass(alg) if alg.name == "dq" else BodyFrames(alg)


class BodyFrames:
    """Featherstone's Newton-Euler on body frames (``algorithms/rnea.py``)."""

    def __init__(self, alg):
        self.alg = alg

    def forward(self, model, c, v0, a0):
        return newton_euler_forward(self.alg, model, c["q"], c["qd"], c["qdd"], a0, v0)

    def body_motion(self, model, state, k):
        """The twist and twist derivative of body k's frame."""
        _, _, v, a, _ = state
        return v[k], a[k]

    def backward(self, model, state, c, loads, zero):
        X, S, _, _, f = state
        f = [f_i if l_i is None else f_i - l_i for f_i, l_i in zip(f, loads)]
        return newton_euler_backward(self.alg, model, X, S, f, c["qd"], c["qdd"], zero)

    def base_links(self, model, v0, a0):
        """The wrench that moves the links welded to the base with the base: I_b a0 +
        v0 x* I_b v0 (None when they have no inertia)."""
        alg, I_b = self.alg, base_inertia(self.alg, model)
        if I_b is None:
            return None
        f = alg.inertia_apply(I_b, a0)
        return f if v0 is None else f + alg.cross_force(v0, alg.inertia_apply(I_b, v0))


class CentresOfMass:
    """The paper's Newton-Euler at the centres of mass (``algorithms/dq_newton_euler.py``)."""

    def __init__(self, alg):
        self.alg = alg

    def forward(self, model, c, v0, a0):
        return com.forward(self.alg, model, c["q"], c["qd"], c["qdd"], a0, v0)

    def body_motion(self, model, state, k):
        """The twist and twist derivative of body k's frame: Ad(t_ck) of its centre of mass's."""
        _, _, xi, xidot, _ = state
        offset = com.com_constants(self.alg, model)[k].c
        return com.translated(self.alg, offset, xi[k]), com.translated(self.alg, offset, xidot[k])

    def backward(self, model, state, c, loads, zero):
        X, S, _, _, zeta = state
        return com.backward(self.alg, model, X, S, zeta, c["qd"], c["qdd"], loads, zero)

    def base_links(self, model, v0, a0):
        """The Newton-Euler wrench of the links welded to the base at their centre of mass,
        moved to the base frame (None when they have no inertia)."""
        alg, found = self.alg, base_com(self.alg, model)
        if found is None:
            return None
        offset, II = found
        xi = None if v0 is None else com.translated(alg, -offset, v0)
        zeta = com.newton_euler_wrench(alg, II, xi, com.translated(alg, -offset, a0))
        return com.translated(alg, offset, zeta)


@lru_cache(maxsize=64)
def base_inertia(alg, model):
    """The algebra inertia of the links ``model`` welds to its base, in its root frame (the
    connection point's), or None when they have none (``Model.base_inertia``)."""
    mass, c, inertia = model.base_inertia
    if mass == 0 and not any(inertia):
        return None
    return alg.inertia(mass, np.array(c), np.reshape(inertia, (3, 3)))


@lru_cache(maxsize=64)
def base_com(alg, model):
    """(eps c, II) of the links ``model`` welds to its base, or None when they have no inertia."""
    mass, c, inertia = model.base_inertia
    if mass == 0 and not any(inertia):
        return None
    return (alg.twist(np.concatenate([c, np.zeros(3)])[:, None]),
            com.inertia_operator(alg, mass, inertia))
