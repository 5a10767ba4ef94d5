"""MJCF models through MuJoCo's own compiler: ``load_mjcf(path)`` and ``from_mujoco(mj_model)``
(``pip install "screwdyn[mujoco]"``).

MuJoCo compiles the file (default classes, includes, ``fromto``, inertias from geoms, ...); the
compiled ``mujoco.MjModel`` is read into a screwdyn Model whose q and v are exactly MuJoCo's
``qpos`` and ``qvel``, so ``data.qpos``, ``data.qvel``, ``data.qacc`` pass as they are:

    MuJoCo joint   screwdyn joint type (``model/joints.py``)   q ; v
    hinge          Revolute about ``axis`` through ``pos``      qpos (rad) ; its rate
    slide          Prismatic along ``axis``                     qpos (m) ; its rate
    ball           Spherical(scalar_first=True)                 quaternion w, x, y, z ; angular
                                                                velocity in the body frame
    free           MuJoCoFree                                   position, quaternion w x y z ;
                                                                linear velocity in world axes,
                                                                angular velocity in body axes

A hinge or slide measures from its reference ``ref`` (MuJoCo's qpos0), as MuJoCo does. Every
MuJoCo body is a link of the same name (``world`` is the root; unnamed bodies are ``body{id}``,
unnamed joints ``joint{id}``); a body with several joints gets one massless link per extra joint
(``{body}/{joint}``). Inertias are the bodies' (``body_mass``, ``body_ipos``, ``body_iquat``,
``body_inertia``), gravity is ``opt.gravity`` (zero when the model disables it), ``dof_armature`` is kept (``armature=True``,
MuJoCo's mass matrix includes it), ``dof_damping`` and ``dof_frictionloss`` on request; joint
limits are hinge and slide ``range`` (when limited) and ``actuatorfrcrange`` (effort).
Tendons and equality constraints are not modelled: such a model is refused with a
``ModelError`` unless ``unsupported="ignore"`` loads its rigid-body tree anyway (whose mass
matrix and bias forces are MuJoCo's: tendons and equalities add passive and constraint forces,
not inertia).
"""
import os

import numpy as np

from ..errors import ModelError
from . import joints
from .builder import ModelBuilder
from .model import Model


def load_mjcf(path: "str | os.PathLike", armature: bool = True, joint_damping: bool = False,
              joint_friction: bool = False, unsupported: str = "error") -> Model:
    """Compile the MJCF file ``path`` with MuJoCo and return the screwdyn Model
    (``from_mujoco``). A file MuJoCo rejects is a ``ModelError`` with MuJoCo's message."""
    mujoco = _mujoco()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelError(f"cannot read MJCF file {path!r}: No such file or directory")
    try:
        mj = mujoco.MjModel.from_xml_path(path)
    except ValueError as e:
        raise ModelError(f"{path}: MuJoCo cannot compile it: {e}") from None
    return from_mujoco(mj, name=None, armature=armature, joint_damping=joint_damping,
                       joint_friction=joint_friction, unsupported=unsupported, source=path)


def from_mujoco(mj_model: "mujoco.MjModel", name: "str | None" = None, armature: bool = True,
                joint_damping: bool = False, joint_friction: bool = False,
                unsupported: str = "error", source: str = "") -> Model:
    """A screwdyn Model of a compiled ``mujoco.MjModel`` (see the module docstring).

    armature: keep ``dof_armature`` (MuJoCo's mass matrix includes it; False gives the bare
        rigid-body dynamics, which ``mj_rne`` computes).
    joint_damping, joint_friction: read ``dof_damping`` (viscous) and ``dof_frictionloss``
        (Coulomb) into the model's joint forces.
    unsupported: ``"error"`` (default) refuses tendons and equality constraints; ``"ignore"``
        loads the rigid-body tree without them.
    """
    mujoco = _mujoco()
    m = mj_model
    if unsupported not in ("error", "ignore"):
        raise ValueError(f"unsupported must be 'error' or 'ignore', got {unsupported!r}")
    _check_supported(m, unsupported)
    obj = mujoco.mjtObj
    body_name = [mujoco.mj_id2name(m, obj.mjOBJ_BODY, i) or ("world" if i == 0 else f"body{i}")
                 for i in range(m.nbody)]
    joint_name = [mujoco.mj_id2name(m, obj.mjOBJ_JOINT, j) or f"joint{j}" for j in range(m.njnt)]
    model_name = name or bytes(m.names).split(b"\0", 1)[0].decode() or "mujoco_model"
    builder = ModelBuilder(model_name)
    builder.add_link(body_name[0], where="MJCF world body")
    for i in range(1, m.nbody):
        where = f'MJCF <body name="{body_name[i]}">'
        builder.add_link(body_name[i], mass=m.body_mass[i], com=m.body_ipos[i],
                         inertia=np.diag(m.body_inertia[i]),
                         inertia_rotation=_matrix(m.body_iquat[i]), where=where)
    for i in range(1, m.nbody):
        _add_body_joints(builder, m, i, body_name, joint_name, armature, joint_damping,
                         joint_friction)
    gravity = np.array(m.opt.gravity, dtype=float)
    if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
        gravity = np.zeros(3)  # <flag gravity="disable"/>
    model = builder.build(gravity=gravity, source=source)
    _check_layout(model, m, joint_name)
    return model


def _add_body_joints(builder, m, i, body_name, joint_name, armature, joint_damping,
                     joint_friction):
    """Body i's joints, as a chain from its parent's link to its own: (body_pos, body_quat),
    then per joint T(pos) [reference rotation or shift] motion T(-pos). A joint's child is the
    body's link when nothing follows it (last joint, anchor at the body's origin), else a
    massless link ``{body}/{joint}`` at the joint's anchor."""
    parent, body = body_name[m.body_parentid[i]], body_name[i]
    where = f'MJCF <body name="{body}">'
    first, count = int(m.body_jntadr[i]), int(m.body_jntnum[i])
    R, p = _matrix(m.body_quat[i]), np.array(m.body_pos[i], dtype=float)
    if count == 0:
        builder.add_joint(f"{body}_weld", "fixed", parent, body, xyz=p, rotation=R, where=where)
        return
    previous, back = parent, None  # back: T(-pos) of the previous joint, in its child frame
    for k, j in enumerate(range(first, first + count)):
        jwhere = f'MJCF <joint name="{joint_name[j]}"> (body {body!r})'
        kind = int(m.jnt_type[j])
        pos, axis = np.array(m.jnt_pos[j], dtype=float), np.array(m.jnt_axis[j], dtype=float)
        dofs = slice(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + _NV[kind])
        options = dict(armature=m.dof_armature[dofs] if armature else 0.0,
                       damping=m.dof_damping[dofs] if joint_damping else 0.0,
                       coulomb=m.dof_frictionloss[dofs] if joint_friction else 0.0,
                       where=jwhere)
        if kind == _FREE:  # qpos is the body's pose in the world
            if m.body_parentid[i] != 0 or count != 1:
                raise ModelError(f"{jwhere}: a free joint must be the only joint of a body whose "
                                 "parent is the world")
            builder.add_joint(joint_name[j], joints.MuJoCoFree(), parent, body, **options)
            return
        origin_R, origin_p = (R, p + R @ pos) if back is None else (np.eye(3), back + pos)
        ref = float(m.qpos0[m.jnt_qposadr[j]])
        limits = _limits(m, j, kind)
        if kind == _HINGE:
            joint = joints.make("revolute", axis=axis, limits=limits, where=jwhere)
            origin_R = origin_R @ _axis_angle(joint.axis, -ref)  # R(q - ref) = R(-ref) R(q)
        elif kind == _SLIDE:
            joint = joints.make("prismatic", axis=axis, limits=limits, where=jwhere)
            origin_p = origin_p - ref * (origin_R @ np.array(joint.axis))
        else:
            joint = joints.Spherical(scalar_first=True, limits=None)
        last_at_origin = k == count - 1 and not np.any(pos)
        child = body if last_at_origin else f"{body}/{joint_name[j]}"
        if not last_at_origin:
            builder.add_link(child, where=jwhere)
        builder.add_joint(joint_name[j], joint, previous, child, xyz=origin_p,
                          rotation=origin_R, **options)
        previous, back = child, -pos
    if previous != body:  # the body's frame sits at -pos from the last joint's anchor
        builder.add_joint(f"{body}_anchor", "fixed", previous, body, xyz=back, where=where)


def _limits(m, j, kind):
    """The joint's limits: ``range`` when limited (hinge, slide), effort from
    ``actuatorfrcrange`` when limited (the larger magnitude of its bounds)."""
    out = {}
    if kind in (_HINGE, _SLIDE) and m.jnt_limited[j]:
        out["lower"], out["upper"] = (float(x) for x in m.jnt_range[j])
    if m.jnt_actfrclimited[j]:
        out["effort"] = float(np.max(np.abs(m.jnt_actfrcrange[j])))
    return out or None


def _check_supported(m, unsupported):
    found = []
    if m.ntendon:
        found.append(f"{m.ntendon} tendon(s)")
    if m.neq:
        found.append(f"{m.neq} equality constraint(s)")
    if found and unsupported == "error":
        raise ModelError(f"MJCF model has {' and '.join(found)}, which screwdyn does not model; "
                         "pass unsupported='ignore' to load its rigid-body tree without them "
                         "(its mass matrix and inverse dynamics are MuJoCo's mj_fullM and "
                         "mj_rne, which tendons and equalities do not enter)")


def _check_layout(model, m, joint_name):
    """The Model's q and v are MuJoCo's qpos and qvel, joint by joint (a tree built in body
    order is numbered depth-first, as MuJoCo numbers its bodies)."""
    where = {b.joint: (qs.start, vs.start) for b, qs, vs in
             zip(model.active_bodies, model.q_slices, model.v_slices)}
    for j in range(m.njnt):
        if where.get(joint_name[j]) != (int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])):
            raise ModelError(f"MJCF joint {joint_name[j]!r}: its q and v would not be at "
                             f"qpos[{m.jnt_qposadr[j]}] and qvel[{m.jnt_dofadr[j]}] (joint "
                             "names must be unique)")


_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_NV = {_FREE: 6, _BALL: 3, _SLIDE: 1, _HINGE: 1}


def _matrix(quat_wxyz):
    w, x, y, z = (float(c) for c in quat_wxyz)
    n = np.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _axis_angle(axis, angle):
    x, y, z = axis
    K = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _mujoco():
    try:
        import mujoco
    except ImportError as error:
        raise ImportError('MJCF models need MuJoCo: pip install "screwdyn[mujoco]"') from error
    return mujoco
