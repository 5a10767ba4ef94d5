"""The paper's scheme: whole-body inverse dynamics as the subsystems' W_i composed.

Each subsystem runs its own W_i (``function.SubsystemFunction``); between subsystems only
connection-point quantities travel:

    forward, parents first:   the twist and twist derivative at each connection point a_j, from
                              the parent's forward evaluation (xi_a = Ad(x_(a,k)) xi_k, no cross
                              term, the offset being constant); a black box's are measured;
    backward, children first: the wrench zeta_a each child exerts at its point, which its parent's
                              W_i carries to its joints and its own point (a black box's wrench is
                              measured, logged or computed by its callable);
    whole body:               tau = the subsystems' tau, stacked.

Internal layout as in the algorithms: (n, N) arrays, algebra objects for twists and wrenches.
"""
from typing import NamedTuple

import numpy as np

from .. import _backend
from ..algebra.entries import cut
from ..algorithms.kinematics import world_poses
from ..dynamics import GRAVITY
from ..dynamics import _Call as _ModelCall
from ..errors import ModelError
from .blackbox import ConnectionState, WrenchLog
from .function import SubsystemFunction, _pose
from .layout import Batch


class Call(Batch):
    """One call on an assembly: the arrays broadcast to one batch, each subsystem's share parsed
    by the model-level parser (``_ModelCall``), black-box values converted to the same layout."""

    def __init__(self, assembly, algebra, q, qd=None, qdd=None, f_ext=None, gravity=None,
                 time=None, tau=None):
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
        given = [a for a in (q, qd, qdd, tau, gravity, *f_ext.values()) if a is not None]
        xp = _backend.namespace(*given)
        vectors, cores = {}, []
        for name, value, size in (("q", q, assembly.nq), ("qd", qd, assembly.nv),
                                  ("qdd", qdd, assembly.nv), ("tau", tau, assembly.nv)):
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
            _backend.check_last_dim(gravity, 3, "gravity", "gravity vector in the world frame")
            cores.append(("gravity", gravity, 1))
        if time is not None:
            time = _backend.as_float_array(time, xp, "time")
            cores.append(("time", time, 0))
        super().__init__(xp, _backend.broadcast_batch(cores))
        self.assembly, self.algebra = assembly, algebra
        self.gravity = np.array(GRAVITY) if gravity is None else gravity
        self.time = None if time is None else xp.broadcast_to(time, self.shape)
        self.models = {}
        rows = {name: self._rows(a) for name, a in vectors.items()}
        for s in assembly.models:  # JAX: cut at every body (``loop``: as a loop's body)
            share = {name: xp.moveaxis(a[s.q_slice if name == "q" else s.v_slice], 0, -1)
                     .reshape(self.shape + (-1,)) for name, a in rows.items()}
            F = f_ext.get(s.name)
            self.models[s.name] = _ModelCall(
                s.model, algebra, entries=True, loop=True, **share,
                f_ext=None if F is None else xp.broadcast_to(F, self.shape + F.shape[-2:]))
        self.alg = self.models[s.name].alg  # the algebra the subsystems' recursions run in

    def _rows(self, a):
        """A public (..., n) array as (n, N) rows, computed once (under JAX: cut into memory, so
        that each subsystem's share is contiguous rows, not strided columns of a)."""
        a = self.xp.moveaxis(self.xp.broadcast_to(a, self.shape + a.shape[-1:]).reshape(
            (self.N, a.shape[-1])), 0, -1)
        return a if self.xp is np else cut(a)

    def __getitem__(self, name):
        """The model-level call of subsystem ``name``: its q, qd, qdd or tau, f_ext (n, N)."""
        return self.models[name]

    def root_motion(self, root):
        """(None, -g): the root's connection point is at rest in the world, and gravity is
        folded into its twist derivative, in the point's frame (the root's ``placement``), as a
        public array would bring it."""
        g = self.xp.asarray(self.gravity)
        minus_g = self.twist(self.alg, self.xp.concatenate([-g, 0 * g], axis=-1), "gravity")
        return None, self.through_public(self.alg, self.alg.inv_act_twist(
            _pose(self.alg, root.mount), minus_g))

    def function(self, name):
        """The W_i of subsystem ``name`` in this call's algebra."""
        return SubsystemFunction(self.assembly, name, self.algebra)

    def measured_motion(self, parent, s):
        """The twist and twist derivative at subsystem s's connection point, from those its
        parent, a black box, imposes at its point ``s.link`` (moved by s's placement there)."""
        state = parent.black_box.points[s.link]
        where = f"black box {parent.name!r} at its connection point {s.link!r}"
        x = _pose(self.alg, s.mount)
        return tuple(None if V is None else self.through_public(self.alg,
                                                                self.alg.inv_act_twist(x, V))
                     for V in (self.twist(self.alg, state.twist, f"{where}: twist"),
                               self.twist(self.alg, state.twist_derivative,
                                          f"{where}: twist_derivative")))

    def black_box_wrench(self, s, motion, require_known=False):
        """The wrench black box ``s`` exerts at its connection point (algebra wrench): measured,
        read from its log at the call's times, or its callable's value; None at the root.
        ``require_known``: a callable is an error (forward dynamics does not know the point's
        twist derivative before it is solved)."""
        box, where = s.black_box, f"black box {s.where}"
        value = box.wrench
        if value is None:
            return None
        if isinstance(value, WrenchLog):
            if self.time is None:
                raise ValueError(f"{where}: its wrench is a {value!r}; pass the times of the "
                                 "states (time=, shape (...) like the batch)")
            value = value.at(self.time, where)
        elif callable(value):
            if require_known:
                raise ModelError(f"{where}: its wrench is a function of the connection point's "
                                 "twist derivative, which forward dynamics solves for; give it "
                                 "as a measured array or a WrenchLog")
            value = value(*(self.twist_public(self.alg, V) for V in motion))
        a = self.internal(value, (6,), f"{where}: wrench")
        if self.xp is np and not np.all(np.isfinite(a)):
            raise ValueError(f"{where}: wrench is not finite (NaN or inf)")
        return self.alg.wrench(a)


class Solution(NamedTuple):
    """Per subsystem name: joint forces tau (nv_i, N), the (twist, twist derivative) at its
    connection point (twist None: at rest), the wrench it exerts there on its parent, and its
    forward state."""

    tau: dict
    motion: dict
    wrench: dict
    states: dict


def newton_euler(assembly, call):
    """Whole-body inverse dynamics: every W_i, composed."""
    functions = {s.name: call.function(s.name) for s in assembly.models}
    children = assembly.children()
    motion, states, outgoing = {}, {}, {}
    for s in assembly.subsystems:  # forward: parents first
        if s.parent is None:
            motion[s.name] = call.root_motion(s)
        elif assembly[s.parent].model is None:
            motion[s.name] = call.measured_motion(assembly[s.parent], s)
        else:
            motion[s.name] = outgoing[s.parent][s.name]
        if s.model is not None:
            states[s.name], outgoing[s.name] = functions[s.name].evaluate_forward(
                call[s.name], call, *motion[s.name])
    tau, wrench = {}, {}
    for s in reversed(assembly.subsystems):  # backward: children first
        if s.model is None:
            wrench[s.name] = call.black_box_wrench(s, motion[s.name])
        else:
            tau[s.name], wrench[s.name] = functions[s.name].evaluate_backward(
                call[s.name], call, states[s.name], *motion[s.name],
                {c.name: wrench[c.name] for c in children[s.name]})
    return Solution(tau, motion, wrench, states)


def inverse_dynamics(assembly, algebra, q, qd, qdd, f_ext, gravity, time):
    """tau (..., nv) (``Assembly.inverse_dynamics``)."""
    call = Call(assembly, algebra, q, qd, qdd, f_ext, gravity, time)
    tau = newton_euler(assembly, call).tau
    return call.public(call.xp.concatenate([tau[s.name] for s in assembly.models]))


def connection_points(assembly, algebra, q, qd, qdd, f_ext, gravity, time):
    """{subsystem: ConnectionState} (``Assembly.connection_points``)."""
    call = Call(assembly, algebra, q, qd, qdd, f_ext, gravity, time)
    solution = newton_euler(assembly, call)
    poses = connection_poses(assembly, call, {name: state[0] for name, state
                                              in solution.states.items()})
    alg, out = call.alg, {}
    for s in assembly.subsystems:
        V, A = solution.motion[s.name]
        zeta = solution.wrench[s.name]
        out[s.name] = ConnectionState(
            call.public(alg.to_matrix(poses[s.name])), call.twist_public(alg, V),
            call.twist_public(alg, A), None if zeta is None else call.public(alg.wrench_vector(zeta)))
    return out


def connection_poses(assembly, call, joint_poses):
    """T_world_a for every connection point a (algebra poses), from each subsystem's joint poses
    X (``joint_poses``: {subsystem: X})."""
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
                T_bodies[s.parent] = world_poses(alg, assembly[s.parent].model,
                                                 joint_poses[s.parent])
            base = alg.compose(T[s.parent], T_bodies[s.parent][s.body])
        else:
            base = T[s.parent]
        T[s.name] = alg.compose(base, _pose(alg, s.mount))
    return T
