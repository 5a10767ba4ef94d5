"""Forward dynamics, the mass matrix and the energies of an assembly, across its connection points.

Featherstone's recursions (``algorithms/aba.py``, ``algorithms/crba.py``), run subsystem by
subsystem; at a connection point a_j on body k of the parent only connection-point quantities
cross, as in the paper's scheme:

    forward dynamics, O(n):
      1. parents first:   the twist at a_j (xi_a = Ad(x_(a,k)) xi_k), each subsystem's velocity
                          terms (v, c = v x vJ, pA = v x* I v - f_ext) on its moving base;
      2. children first:  the articulated inertia IA_a and bias wrench pA_a of everything beyond
                          a_j, at a_j (the root bodies' Ia and pa moved to the base, plus the
                          links welded to the base); the parent adds Ad(x_(k,a)) * IA_a and
                          Ad(x_(k,a)) pA_a to body k's. A black box is the known wrench zeta it
                          exerts (measured or logged): body k's bias loses Ad(x_(k,a)) zeta;
      3. parents first:   the twist derivative at a_j (gravity folded in), then each
                          subsystem's joint accelerations.
    mass matrix: composite inertias summed across the points the same way (children first),
      then each column's wrench F = IC S walked to the root, crossing each point with
      Ad(x_(k,a)) (RBDA Table 6.2); a black box adds no inertia (it is a known wrench).
    kinetic and potential energy: body by body, on the moving bases.

All in body frames, in any algebra (in dual quaternions: dual-quaternion operations on body
frames, as the shared recursions run; the paper has no forward dynamics).
"""
import numpy as np

from ..algebra import body_constants
from ..algorithms.aba import accelerations, articulated_bodies, check_defined, velocity_terms
from ..algorithms.crba import composite_inertias, walk_to_base
from ..algorithms.joint_forces import friction
from ..algorithms.kinematics import (body_velocities, concatenate_dofs, joint_poses,
                                     motion_subspaces, world_poses)
from .function import _on_base_links, _pose, base_inertia
from .scheme import Call, connection_poses


def forward_dynamics(assembly, algebra, q, qd, tau, f_ext, gravity, time):
    """qdd (..., nv) (``Assembly.forward_dynamics``)."""
    _check_defined(assembly)
    call = Call(assembly, algebra, q, qd=qd, f_ext=f_ext, gravity=gravity, time=time, tau=tau)
    alg, children = call.alg, assembly.children()
    zero_wrench = alg.wrench(np.zeros((6, 1)))
    velocity, terms = {}, {}
    for s in assembly.subsystems:  # 1. velocities, parents first
        velocity[s.name] = v0 = _point_velocity(assembly, call, s, velocity, terms)
        if s.model is not None:
            c = call[s.name]
            X = joint_poses(alg, s.model, c["q"])
            S = motion_subspaces(alg, s.model, c["q"])
            terms[s.name] = (X, S) + velocity_terms(alg, s.model, X, S, c["q"], c["qd"], v0,
                                                    c.body_wrenches())
    beyond, bodies = {}, {}
    for s in reversed(assembly.subsystems):  # 2. articulated inertias, children first
        if s.model is None:
            beyond[s.name] = call.black_box_wrench(s, (velocity[s.name], None), require_known=True)
            continue
        c, model, v0 = call[s.name], s.model, velocity[s.name]
        X, S, _, cv, pA = terms[s.name]
        IA, pA = [I for (_, _, I) in body_constants(alg, model)], list(pA)
        I_b = base_inertia(alg, model)
        base = [_zero_inertia(alg) if I_b is None else I_b,
                zero_wrench if I_b is None or v0 is None
                else alg.cross_force(v0, alg.inertia_apply(I_b, v0))]
        base[1] = base[1] - _on_base_links(c, zero_wrench)
        for child in children[s.name]:
            x = _pose(alg, child.mount)
            if child.model is None:
                if beyond[child.name] is None:
                    continue
                IA_a, pA_a = None, -beyond[child.name]  # a known wrench: a bias of -zeta
            else:
                IA_a, pA_a = beyond[child.name]
            k, moved = child.body, alg.act_wrench(x, pA_a)
            if k >= 0:
                pA[k] = pA[k] + moved
            else:
                base[1] = base[1] + moved
            if IA_a is not None:
                moved = alg.inertia_act(x, IA_a)
                if k >= 0:
                    IA[k] = IA[k] + moved
                else:
                    base[0] = base[0] + moved
        U, D, u = articulated_bodies(alg, model, X, S, cv, pA,
                                     c["tau"] - friction(call.xp, model, c["qd"]), IA=IA,
                                     base=None if s.parent is None else base)
        beyond[s.name], bodies[s.name] = tuple(base), (U, D, u)
    acceleration, qdd = {}, {}
    for s in assembly.subsystems:  # 3. accelerations, parents first
        a0 = _point_acceleration(assembly, call, s, acceleration)
        if s.model is not None:
            X, S, _, cv, _ = terms[s.name]
            a, qdd_s = accelerations(alg, s.model, X, S, *bodies[s.name], cv, a0)
            acceleration[s.name] = (a0, a)
            qdd[s.name] = concatenate_dofs(call.xp, qdd_s, call[s.name]["q"])
    return call.public(call.xp.concatenate([qdd[s.name] for s in assembly.models]))


def _point_velocity(assembly, call, s, velocity, terms):
    """The twist of s's connection point in its frame (None: at rest)."""
    if s.parent is None:
        return None
    parent = assembly[s.parent]
    if parent.model is None:
        return call.measured_motion(parent, s)[0]
    v = velocity[s.parent] if s.body < 0 else terms[s.parent][2][s.body]
    return None if v is None else call.alg.inv_act_twist(_pose(call.alg, s.mount), v)


def _point_acceleration(assembly, call, s, acceleration):
    """The twist derivative of s's connection point in its frame, gravity folded in."""
    if s.parent is None:
        return call.root_motion(s)[1]
    parent = assembly[s.parent]
    if parent.model is None:
        return call.measured_motion(parent, s)[1]
    a0, a = acceleration[s.parent]
    return call.alg.inv_act_twist(_pose(call.alg, s.mount), a0 if s.body < 0 else a[s.body])


def _zero_inertia(alg):
    return alg.inertia(0.0, np.zeros(3), np.zeros((3, 3)))


def _check_defined(assembly):
    """ModelError if forward dynamics is undefined (``aba.check_defined`` on the assembly's
    configuration model), checked once per version of the assembly."""
    if getattr(assembly, "_defined_version", None) != assembly.version:
        model = assembly.configuration_model
        if model.nbodies:
            check_defined(model)
        assembly._defined_version = assembly.version


def mass_matrix(assembly, algebra, q):
    """M(q) (..., nv, nv) (``Assembly.mass_matrix``)."""
    call = Call(assembly, algebra, q)
    alg, xp, children = call.alg, call.xp, assembly.children()
    X = {s.name: joint_poses(alg, s.model, call[s.name]["q"]) for s in assembly.models}
    S = {s.name: motion_subspaces(alg, s.model, call[s.name]["q"]) for s in assembly.models}
    IC, beyond = {}, {}
    for s in reversed(assembly.models):  # composite inertias, children first
        model = s.model
        start = [I for (_, _, I) in body_constants(alg, model)]
        I_b = base_inertia(alg, model)
        base = [_zero_inertia(alg) if I_b is None else I_b]
        for child in children[s.name]:
            if child.model is None:
                continue
            moved = alg.inertia_act(_pose(alg, child.mount), beyond[child.name])
            if child.body >= 0:
                start[child.body] = start[child.body] + moved
            else:
                base[0] = base[0] + moved
        IC[s.name] = composite_inertias(alg, model, X[s.name], IC=start, base=base)
        beyond[s.name] = base[0]
    zero = xp.zeros(call.N)
    M = [[zero] * assembly.nv for _ in range(assembly.nv)]
    for s in assembly.models:  # columns, each walked to the root across the points
        offset = s.v_slice.start
        for i, S_i in enumerate(S[s.name]):
            for k, S_k in enumerate(S_i):
                col = offset + s.model.v_slices[i].start + k
                F = walk_to_base(alg, s.model, X[s.name], S[s.name],
                                 alg.inertia_apply(IC[s.name][i], S_k), i, col, M, zero, offset)
                t = s
                while t.parent is not None and assembly[t.parent].model is not None:
                    F, p = alg.act_wrench(_pose(alg, t.mount), F), assembly[t.parent]
                    if t.body >= 0:
                        F = walk_to_base(alg, p.model, X[p.name], S[p.name], F, t.body, col, M,
                                         zero, p.v_slice.start)
                    t = p
    if not M:
        return call.public(xp.zeros((0, 0, 1)))
    armature = np.concatenate([s.model.armature for s in assembly.models])
    return call.public(xp.stack([xp.stack(row) for row in M]) + np.diag(armature)[..., None])


def kinetic_energy(assembly, algebra, q, qd):
    """(...,): sum over bodies (and links welded to moving bases) of v . I v / 2, plus the
    armatures' qd^2 / 2."""
    call = Call(assembly, algebra, q, qd=qd)
    alg, velocity, bodies = call.alg, {}, {}
    T = 0.0
    for s in assembly.subsystems:
        v0 = _point_velocity(assembly, call, s, velocity, bodies)
        velocity[s.name] = v0
        if s.model is None:
            continue
        c = call[s.name]
        v, _ = body_velocities(alg, s.model, joint_poses(alg, s.model, c["q"]),
                               motion_subspaces(alg, s.model, c["q"]), c["qd"], v0)
        bodies[s.name] = (None, None, v)
        I_b = base_inertia(alg, s.model)
        parts = [(v_i, I) for v_i, (_, _, I) in zip(v, body_constants(alg, s.model))]
        if I_b is not None and v0 is not None:
            parts.append((v0, I_b))
        T = T + sum(alg.dot(v_i, alg.inertia_apply(I, v_i)) for v_i, I in parts) \
            + (s.model.armature[:, None] * c["qd"] ** 2).sum(axis=0)
    return call.public((0.5 * (T + call.xp.zeros(call.N)))[None])[..., 0]


def potential_energy(assembly, algebra, q, gravity):
    """(...,): -g . sum m c over the bodies, and over the links welded to bases that move (the
    root's are fixed to the world and left out, as a flat model's ``base_inertia`` is)."""
    call = Call(assembly, algebra, q, gravity=gravity)
    alg, xp = call.alg, call.xp
    X = {s.name: joint_poses(alg, s.model, call[s.name]["q"]) for s in assembly.models}
    points = connection_poses(assembly, call, X)
    moment = 0.0
    for s in assembly.models:
        T_bodies = world_poses(alg, s.model, X[s.name])
        parts = [(alg.compose(points[s.name], T_i), b.mass, b.com)
                 for T_i, b in zip(T_bodies, s.model.bodies)]
        mass, com, _ = s.model.base_inertia
        if s.parent is not None and mass > 0:
            parts.append((points[s.name], mass, com))
        for pose, m, c in parts:
            H = alg.to_matrix(pose)
            moment = moment + m * (xp.einsum("ij...,j->i...", H[:3, :3], xp.asarray(c))
                                   + H[:3, 3])
    g = call.internal(call.gravity, (3,), "gravity")
    return call.public(-(g * (moment + xp.zeros((3, call.N)))).sum(axis=0)[None])[..., 0]
