"""The paper's scheme: Newton-Euler over subsystems, in any algebra of ``screwdyn.algebra``.

Each subsystem runs the recursion every model's inverse dynamics runs (``newton_euler_forward``
and ``newton_euler_backward``); between subsystems, only connection-point quantities travel:

    forward, parents first:   xi_a = Ad(x_(a,k)) xi_k,  xidot_a = Ad(x_(a,k)) xidot_k
                              (k the parent's body the point is fixed to; no cross term, the
                              offset being constant), and the subsystem's bodies follow from them;
    backward, children first: the parent adds Ad(x_(k,a)) zeta_a to the wrench of body k, then its
                              own backward pass carries it to its joints and its base;
                              zeta_a includes -(I_b xidot_a + xi_a x* I_b xi_a), the links
                              the child's model welds to its base (I_b, Model.base_inertia),
                              which move with the point a;
    whole body:               tau = the subsystems' tau, stacked.

Internal layout as in the algorithms: (n, N) arrays, algebra objects for twists and wrenches.
"""
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .. import _backend
from ..algebra import link_placements
from ..algorithms.kinematics import world_poses
from ..algorithms.rnea import newton_euler_backward, newton_euler_forward
from ..dynamics import _Call as _ModelCall
from ..errors import ModelError


class Call:
    """One call on an assembly: the arrays broadcast to one batch, each subsystem's share parsed
    by the model-level parser, and black-box values converted to the same layout."""

    def __init__(self, assembly, algebra, q, qd=None, qdd=None, f_ext=None, gravity=None):
        if algebra == "vector":
            raise ValueError("assemblies run in an algebra with moving bases: 'dq', 'spatial' or "
                             "'cga' (the DH recursion of algebra='vector' has a fixed base)")
        f_ext = dict(f_ext or {})
        for name in f_ext:
            if name not in assembly.names or assembly[name].model is None:
                raise ModelError(f"f_ext: no subsystem with links named {name!r} (subsystems with "
                                 f"models: {[s.name for s in assembly.models]})")
        if not assembly.models:
            raise ModelError(f"assembly {assembly.name!r} has no subsystem with a model")
        given = [a for a in (q, qd, qdd, gravity, *f_ext.values()) if a is not None]
        self.xp = xp = _backend.namespace(*given)
        vectors, cores = {}, []
        for name, value, size in (("q", q, assembly.nq), ("qd", qd, assembly.nv),
                                  ("qdd", qdd, assembly.nv)):
            if value is not None:
                vectors[name] = a = _backend.as_float_array(value, xp, name)
                _backend.check_last_dim(a, size, name, f"the assembly's {name}, {size}")
                cores.append((name, a, 1))
        for name, value in f_ext.items():
            f_ext[name] = a = _backend.as_float_array(value, xp, f"f_ext[{name!r}]")
            shape = (assembly[name].model.nlinks, 6)
            if tuple(a.shape[-2:]) != shape:
                raise ValueError(f"f_ext[{name!r}] must have shape (..., {shape[0]}, 6) (a "
                                 f"wrench per link of {name!r}), got shape {tuple(a.shape)}")
            cores.append((f"f_ext[{name!r}]", a, 2))
        if gravity is not None:
            gravity = _backend.as_float_array(gravity, xp, "gravity")
            cores.append(("gravity", gravity, 1))
        self.batch = _backend.broadcast_batch(cores)
        self.N = int(np.prod(self.batch, dtype=int))
        if gravity is not None and gravity.ndim > 1:
            gravity = xp.broadcast_to(gravity, self.batch + (3,))  # else one for the whole batch
        self.models = {}
        for s in assembly.models:
            share = {name: xp.broadcast_to(a, self.batch + a.shape[-1:])
                     [..., s.q_slice if name == "q" else s.v_slice] for name, a in vectors.items()}
            F = f_ext.get(s.name)
            self.models[s.name] = _ModelCall(
                s.model, algebra, entries=True, **share, gravity=gravity,
                f_ext=None if F is None else xp.broadcast_to(F, self.batch + F.shape[-2:]))
        self.alg = self.models[s.name].alg  # the algebra the subsystems' recursions run in

    def __getitem__(self, name):
        """The model-level call of subsystem ``name``: its q, qd, qdd, f_ext (n, N)."""
        return self.models[name]

    def gravity_twist(self):
        """-g as an algebra twist in the world frame (gravity folded into the base acceleration)."""
        return next(iter(self.models.values())).gravity_twist()

    def internal(self, value, core, what):
        """A public array (..., *core), e.g. a black box's measurement, in the internal layout."""
        a = _backend.as_float_array(value, self.xp, what)
        if tuple(a.shape[a.ndim - len(core):]) != core:
            raise ValueError(f"{what} must have shape (..., {', '.join(map(str, core))}), "
                             f"got shape {tuple(a.shape)}")
        try:
            a = self.xp.broadcast_to(a, self.batch + core)
        except ValueError:
            raise ValueError(f"{what}: batch shape {tuple(a.shape[:a.ndim - len(core)])} does not "
                             f"broadcast to the call's batch {self.batch}") from None
        return self.xp.moveaxis(a.reshape((self.N,) + core), 0, -1)

    def public(self, a):
        """(n..., N or 1) -> (..., n...)."""
        a = self.xp.broadcast_to(a, a.shape[:-1] + (self.N,))
        return self.xp.moveaxis(a, -1, 0).reshape(self.batch + a.shape[:-1])

    def pose(self, T):
        """The algebra pose of a constant 4x4 transform (16 numbers)."""
        return _constant_pose(self.alg, T)


@lru_cache(maxsize=None)
def _constant_pose(alg, T):
    T = np.reshape(T, (4, 4))
    return alg.pose(T[:3, :3], T[:3, 3])


class Solution(NamedTuple):
    """Per subsystem name: joint forces tau (nv_i, N), the (twist, twist derivative) at its
    connection point (twist None: at rest), the wrench it exerts there on its parent, and the
    forward pass (X, v, a, f) of a subsystem with a model."""

    tau: dict
    motion: dict
    wrench: dict
    passes: dict


def newton_euler(assembly, call):
    """Whole-body inverse dynamics by the paper's scheme."""
    alg, children = call.alg, assembly.children()
    motion, passes = {}, {}
    for s in assembly.subsystems:  # forward: parents first
        motion[s.name] = v0, a0 = _connection_motion(assembly, call, s, motion, passes)
        if s.model is not None:
            c = call[s.name]
            passes[s.name] = newton_euler_forward(alg, s.model, c["q"], c["qd"], c["qdd"], a0, v0)
    tau, wrench = {}, {}
    for s in reversed(assembly.subsystems):  # backward: children first
        if s.model is None:
            wrench[s.name] = _black_box_wrench(call, s, motion[s.name])
        else:
            tau[s.name], wrench[s.name] = _backward(call, s, passes[s.name], motion[s.name],
                                                    [(c, wrench[c.name]) for c in children[s.name]])
    return Solution(tau, motion, wrench, passes)


def _connection_motion(assembly, call, s, motion, passes):
    """(twist, twist derivative) at s's connection point, in its frame, from its parent's."""
    alg = call.alg
    if s.parent is None:  # fixed to the world at rest; gravity folded into the derivative
        v, a = None, call.gravity_twist()
    elif assembly[s.parent].model is None:
        v, a = _measured_motion(call, assembly[s.parent], s.link)
    elif s.body >= 0:
        _, _, v_bodies, a_bodies, _ = passes[s.parent]
        v, a = v_bodies[s.body], a_bodies[s.body]
    else:  # a link welded to the parent's base moves with the parent's connection point
        v, a = motion[s.parent]
    x = call.pose(s.mount)  # x_(k, a): the connection point in the frame of body k
    return (None if v is None else alg.inv_act_twist(x, v)), alg.inv_act_twist(x, a)


def _backward(call, s, forward, motion, children):
    """Subsystem s's backward pass with its children's wrenches: (tau, zeta at s's point)."""
    alg = call.alg
    v0, a0 = motion
    X, S, _, _, f = forward
    external = call[s.name].body_wrenches()
    f = list(f) if external is None else [f_i - e_i for f_i, e_i in zip(f, external)]
    on_base = _on_base_links(call, s, 0.0 * a0)
    for child, zeta in children:
        load = alg.act_wrench(call.pose(child.mount), zeta)  # Ad(x_(k,a)) zeta_a, on body k
        if child.body >= 0:
            f[child.body] = f[child.body] - load
        else:
            on_base = on_base + load
    c = call[s.name]
    tau, f_base = newton_euler_backward(alg, s.model, X, S, f, c["qd"], c["qdd"], 0.0 * a0)
    zeta = on_base - f_base  # the bodies push on the base with -f_base (third law)
    I_b = base_inertia(alg, s.model)
    if I_b is not None:  # the links welded to the base move with the point: the parent drives them
        f_b = alg.inertia_apply(I_b, a0)
        if v0 is not None:
            f_b = f_b + alg.cross_force(v0, alg.inertia_apply(I_b, v0))
        zeta = zeta - f_b
    return tau, zeta


@lru_cache(maxsize=64)
def base_inertia(alg, model):
    """The algebra inertia of the links ``model`` welds to its base, in its root frame (the
    connection point's), or None when they have none (``Model.base_inertia``)."""
    mass, com, inertia = model.base_inertia
    if mass == 0 and not any(inertia):
        return None
    return alg.inertia(mass, np.array(com), np.reshape(inertia, (3, 3)))


def _on_base_links(call, s, zero):
    """The external wrenches on the links s's model welds to its base, at s's connection point:
    the parent carries them (the model-level ``body_wrenches`` leaves them out)."""
    F = call[s.name].arrays.get("f_ext")  # (nlinks, 6, N), link frames
    if F is None:
        return zero
    alg = call.alg
    return sum((alg.act_wrench(placement, alg.wrench(F[l])) for l, (link, placement)
                in enumerate(zip(s.model.links, link_placements(alg, s.model))) if link.body < 0),
               zero)


def _measured_motion(call, parent, point):
    state = parent.black_box.points[point]
    where = f"black box {parent.name!r} at its connection point {point!r}"
    return tuple(call.alg.twist(call.internal(value, (6,), f"{where}: {what}"))
                 for value, what in ((state.twist, "twist"),
                                     (state.twist_derivative, "twist_derivative")))


def _black_box_wrench(call, s, motion):
    """The wrench a black box exerts at its connection point: measured, or its callable's value."""
    box = s.black_box
    if box.wrench is None:  # the root's, on the world: not needed by anyone
        return None
    value = box.wrench
    if callable(value):
        value = value(*(call.public(twist_or_rest(call, V)) for V in motion))
    return call.alg.wrench(call.internal(value, (6,), f"black box {s.where}: wrench"))


def twist_or_rest(call, V):
    """A public twist vector (6, N or 1); None (at rest) is zero."""
    return np.zeros((6, 1)) if V is None else call.alg.twist_vector(V)


def connection_poses(assembly, call, solution):
    """T_world_a for every connection point a (algebra poses)."""
    alg, T, T_bodies = call.alg, {}, {}
    for s in assembly.subsystems:
        if s.parent is None:
            base = alg.identity()
        elif assembly[s.parent].model is None:
            pose = assembly[s.parent].black_box.points[s.link].pose
            base = alg.from_matrix(call.internal(pose, (4, 4), f"black box {s.parent!r} at "
                                                 f"connection point {s.link!r}: pose"))
        elif s.body >= 0:
            if s.parent not in T_bodies:
                X = solution.passes[s.parent][0]
                T_bodies[s.parent] = world_poses(alg, assembly[s.parent].model, X)
            base = alg.compose(T[s.parent], T_bodies[s.parent][s.body])
        else:
            base = T[s.parent]
        T[s.name] = alg.compose(base, call.pose(s.mount))
    return T
