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

A hinge or slide measures from its reference ``ref`` (MuJoCo's qpos0), as MuJoCo does. The
model keeps MuJoCo's ``qpos0`` (where the file places its bodies: a free body at its ``pos`` and
``quat``, hinges and slides at ``ref``) as ``model.q0`` and
``model.reference_configurations["qpos0"]``, and each ``<key>`` keyframe's ``qpos`` under its
name (unnamed keys, and one named ``qpos0``: ``key0``, ``key1``, ... by its index), as
Pinocchio's MJCF parser fills ``referenceConfigurations``. Every MuJoCo body is a link of the
same name (``world`` is the root; unnamed bodies are ``body{id}``, unnamed joints
``joint{id}``); a body with several joints gets one massless link per extra joint
(``{body}/{joint}``). Inertias are the bodies' (``body_mass``, ``body_ipos``, ``body_iquat``,
``body_inertia``), gravity is ``opt.gravity`` (zero when the model disables it),
``dof_armature`` is kept (``armature=True``, MuJoCo's mass matrix includes it),
``dof_damping``, ``dof_frictionloss`` and the joints' springs (``stiffness``, ``springref``) on
request; joint limits are hinge and slide ``range`` (when limited) and ``actuatorfrcrange``
(effort).
Fixed and spatial tendons and equality constraints are read onto the model (``Model.tendons``,
``Model.spatial_tendons``, ``Model.constraints``; ``screwdyn.constraints``), which
``constrained_forward_dynamics`` and the simulations enforce:

    MJCF element                       screwdyn
    <tendon><fixed>                    FixedTendon(name, joints, coef, stiffness, damping,
                                       springlength, range when limited: lower, upper,
                                       frictionloss)
    <tendon><spatial> through sites    SpatialTendon(name, the sites' bodies and positions,
                                       stiffness, damping, springlength, range when limited)
    <equality><connect> (body or site) Connect: the two anchors (``eq_data``) or site origins
    <equality><weld> (body or site)    Weld: anchors and ``relpose`` (or the sites' frames);
                                       ``torquescale`` (0: a Connect of the same anchors)
    <equality><joint>                  Coupling(joint1, joint2, polycoef, reference = qpos0)
    <equality><tendon>                 Coupling(tendon1, tendon2, polycoef,
                                       reference = tendon_length0)

Only equalities active at load (``eq_active0``) are read; inactive ones are skipped (none when
the model disables equality constraints). Each keeps its MuJoCo name (unnamed:
``equality{i}``, ``tendon{i}``; a tendon with the name of a joint is ``tendon:{name}``, as
screwdyn's couplings name joints and tendons alike). MuJoCo's constraints are soft (each solved
with a regularisation set by ``solimp``); by default screwdyn's are hard, stabilised by
Baumgarte's terms: only ``solref``'s time constant and damping ratio are used, which give the
stiffness and damping of MuJoCo's reference acceleration aref (at dmax = 1); ``solimp`` is
ignored. ``soft_equalities=True`` makes them MuJoCo's soft constraints: each gets its
``solimp`` and MuJoCo's approximate inverse weights of its rows (``Constraint.impedance``,
``Constraint.inverse_weights``; ``docs/constraints.md``, Soft constraints).
The time constant is the file's, with ``Constraint.refsafe`` set (unless the model disables
``refsafe``): a simulation makes it at least 2 dt of its own step, as MuJoCo does at its
``opt.timestep`` (``impedance.step_time_constant``; the file's ``<option timestep>`` plays no
part); a direct-form ``solref`` (-stiffness, -damping, never refsafe) becomes the time
constant 2 / damping and damping ratio damping / (2 sqrt(stiffness)). Where MuJoCo's rows
differ from screwdyn's (a weld's orientation rows are half the quaternion error, scaled by
``torquescale``, in the second body's axes; screwdyn's are sin(angle) axis in world axes), the
constraint is the same and so are the accelerations of the hard limit, and the forces J^T
lambda (the stabilisations differ at second order in the violation). MuJoCo (4.0) subtracts
dJ/dt qd from aref for connect and weld, as screwdyn does for every constraint, but not for
joint and tendon equalities: with a nonlinear ``polycoef`` they differ at a velocity by the
curvature term -poly''(x) xdot^2.

A tendon's length limits are inequality constraints (``sd.RigidLimits``, MuJoCo's
soft rows with ``RigidLimits.from_mjcf``; a spatial tendon's with J = its length's Jacobian at
each state: a string that goes taut, dm_control's ball_in_cup) and a fixed tendon's
``frictionloss`` dry friction (``sd.RigidFriction``, or the friction law of ``joint_friction``).
Refused with a ``ModelError`` naming the element (``unsupported="ignore"`` drops the element,
and the equalities on a dropped tendon, and loads the rest): spatial tendons that wrap around
geoms or pass pulleys, a spatial tendon's ``frictionloss``, a tendon's ``armature``, nonlinear
(``stiffnesspoly``, ``dampingpoly``), dead-band
(two different ``springlength`` values with stiffness) or plastic (``springyield``) springs,
flex equalities, and a ``solref`` that mixes the standard and direct forms. The rigid-body tree of
such a model is MuJoCo's either way (its mass matrix and bias forces are ``mj_fullM`` and
``mj_rne``: tendons and equalities add passive and constraint forces, not inertia, except a
tendon's armature). A medium (``<option density>`` or ``viscosity``: MuJoCo's fluid forces,
dm_control's fish and swimmer) loads with a ``UserWarning``: screwdyn's dynamics is in vacuum.
"""
import os
import warnings

import numpy as np

from ..errors import ModelError
from . import joints
from .constraints import Connect, Coupling, FixedTendon, SpatialTendon, Weld
from .builder import ModelBuilder
from .model import Model


def load_mjcf(path: "str | os.PathLike", armature: bool = True, joint_damping: bool = False,
              joint_friction: bool = False, unsupported: str = "error",
              joint_springs: bool = False, soft_equalities: bool = False) -> Model:
    """Compile the MJCF file ``path`` with MuJoCo and return the screwdyn Model, with its fixed
    tendons and active equality constraints (``from_mujoco``, the module docstring). A file
    MuJoCo rejects is a ``ModelError`` with MuJoCo's message; so is an element screwdyn does
    not model (a tendon wrapping a geom, a flex equality, ...) unless
    ``unsupported="ignore"``."""
    path = os.fspath(path)
    mj = _compiled(path)
    return from_mujoco(mj, name=None, armature=armature, joint_damping=joint_damping,
                       joint_friction=joint_friction, unsupported=unsupported, source=path,
                       joint_springs=joint_springs, soft_equalities=soft_equalities)


def from_mujoco(mj_model: "mujoco.MjModel", name: "str | None" = None, armature: bool = True,
                joint_damping: bool = False, joint_friction: bool = False,
                unsupported: str = "error", source: str = "",
                joint_springs: bool = False, soft_equalities: bool = False) -> Model:
    """A screwdyn Model of a compiled ``mujoco.MjModel`` (see the module docstring): its
    rigid-body tree, its fixed tendons (``model.tendons``) and the equality constraints active
    at load (``model.constraints``, ``eq_active0``; inactive ones are skipped), held with
    ``solref``'s time constant and damping ratio, and its ``qpos0`` and keyframes
    (``model.q0``, ``model.reference_configurations``).

    armature: keep ``dof_armature`` (MuJoCo's mass matrix includes it; False gives the bare
        rigid-body dynamics, which ``mj_rne`` computes).
    joint_damping, joint_friction: read ``dof_damping`` (viscous) and ``dof_frictionloss``
        (Coulomb) into the model's joint forces.
    joint_springs: read each hinge and slide joint's ``stiffness`` (MuJoCo's passive spring
        -stiffness (q - springref)) as a one-joint fixed tendon ``"spring:{joint}"``
        (coefficient 1, rest length ``qpos_spring``) that the simulations apply, with its
        elastic energy (none when the model disables springs); a ball or free joint's spring
        is refused (``unsupported``). Off by default, as the damping: the model's
        ``tendons`` are then the file's.
    soft_equalities: MuJoCo's soft equality constraints: each equality gets its ``solimp``
        (``Constraint.impedance``, as MuJoCo applies it: dmin, dmax and midpoint clamped to
        [0.0001, 0.9999]) and MuJoCo's approximation of its rows' A_jj, which their
        compliance (1 - d) / d A_jj scales (``Constraint.inverse_weights``: the bodies'
        ``body_invweight0``, the joints' ``dof_invweight0``, the tendons'
        ``tendon_invweight0``, as ``mj_diagApprox``). Off by default: hard constraints
        (Pinocchio's constrained dynamics; ``solimp`` ignored).
    unsupported: ``"error"`` (default) refuses, with a ``ModelError`` naming the element, what
        screwdyn does not model: spatial tendons around geoms, tendon armature, nonlinear,
        dead-band or plastic tendon springs, flex equalities; ``"ignore"`` drops those (and
        the equalities on a dropped tendon) and loads the rest.
    """
    mujoco = _mujoco()
    m = mj_model
    if unsupported not in ("error", "ignore"):
        raise ValueError(f"unsupported must be 'error' or 'ignore', got {unsupported!r}")
    if not isinstance(soft_equalities, bool):
        raise ValueError(f"soft_equalities must be True or False, got {soft_equalities!r}")
    obj = mujoco.mjtObj
    body_name = [mujoco.mj_id2name(m, obj.mjOBJ_BODY, i) or ("world" if i == 0 else f"body{i}")
                 for i in range(m.nbody)]
    joint_name = _joint_names(mujoco, m)
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
    tendons, tendon_name = _tendons(mujoco, m, joint_name, body_name, unsupported)
    if joint_springs:
        tendons += _joint_springs(mujoco, m, joint_name, tendons, unsupported)
    constraints = _equalities(mujoco, m, body_name, joint_name, tendon_name, unsupported,
                              soft_equalities)
    model = builder.build(gravity=gravity, source=source)
    _check_layout(model, m, joint_name)
    _warn_medium(m, source or model_name)
    if tendons or constraints:
        model = model.with_constraints(*constraints, tendons=tendons)
    return model.with_configurations(_configurations(mujoco, m))


def _warn_medium(m, where):
    """A ``UserWarning`` where the file's medium acts (``<option density>`` or ``viscosity``:
    MuJoCo's fluid forces on every body, dm_control's fish and swimmer), which screwdyn's
    dynamics does not have."""
    if m.opt.density > 0 or m.opt.viscosity > 0:
        warnings.warn(f"{where}: MuJoCo's fluid forces (<option density=\"{m.opt.density:g}\" "
                      f"viscosity=\"{m.opt.viscosity:g}\">: drag, lift and buoyancy on every "
                      "body) are not modelled: screwdyn's dynamics and simulations are in "
                      "vacuum", UserWarning, stacklevel=4)


def _configurations(mujoco, m):
    """{name: qpos}: ``"qpos0"`` (where the file places the bodies), then each keyframe's
    ``key_qpos`` by its name (unnamed, or named ``qpos0``: ``key{k}``); q is qpos, so they pass
    as they are."""
    out = {"qpos0": _finite(mujoco, m, m.qpos0, "qpos0 (the bodies' pos and quat, the "
                                                 "joints' ref)")}
    for k in range(m.nkey):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, k)
        label = f'<key name="{name}">' if name else f"<key> {k}"
        out[name if name and name != "qpos0" else f"key{k}"] = _finite(
            mujoco, m, m.key_qpos[k], f"{label} qpos")
    return out


def _finite(mujoco, m, qpos, what):
    """qpos as a float array; ``ModelError`` naming ``what`` and the first joint whose values
    are not finite."""
    q = np.array(qpos, dtype=float)
    bad = np.flatnonzero(~np.isfinite(q))
    if bad.size:
        j = int(np.searchsorted(m.jnt_qposadr, bad[0], side="right")) - 1
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
        raise ModelError(f"MJCF {what}: not finite at joint {name!r} (qpos[{bad[0]}] = "
                         f"{q[bad[0]]}): give finite numbers")
    return q


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


def _refuse(where, what, unsupported):
    """Raise the ModelError for an element screwdyn does not model (``unsupported="error"``);
    False (drop it) under ``"ignore"``."""
    if unsupported == "error":
        raise ModelError(f"{where}: {what}; pass unsupported=\"ignore\" to load the model "
                         "without it")
    return False


def _tendons(mujoco, m, joint_name, body_name, unsupported):
    """(FixedTendon and SpatialTendon list, {MuJoCo tendon id: name} of the tendons kept)."""
    disabled = m.opt.disableflags
    bit = mujoco.mjtDisableBit
    limits = not disabled & (bit.mjDSBL_LIMIT | bit.mjDSBL_CONSTRAINT)
    friction = not disabled & (bit.mjDSBL_FRICTIONLOSS | bit.mjDSBL_CONSTRAINT)
    spring, damper = not disabled & bit.mjDSBL_SPRING, not disabled & bit.mjDSBL_DAMPER
    out, kept = [], {}
    for i, (label, name) in enumerate(_tendon_names(mujoco, m, joint_name)):
        where = f'MJCF <tendon name="{label}">'
        wraps = range(int(m.tendon_adr[i]), int(m.tendon_adr[i]) + int(m.tendon_num[i]))
        stiffness = float(m.tendon_stiffness[i]) if spring else 0.0
        damping = float(m.tendon_damping[i]) if damper else 0.0
        low, high = (float(x) for x in m.tendon_lengthspring[i])
        problems = []
        kinds = {int(m.wrap_type[w]) for w in wraps}
        spatial = kinds == {int(mujoco.mjtWrap.mjWRAP_SITE)}
        if kinds != {int(mujoco.mjtWrap.mjWRAP_JOINT)} and not spatial:
            problems.append("a spatial tendon's wrapping around geoms and its pulleys are not "
                            "modelled, only fixed tendons and spatial tendons through sites")
        if spatial and friction and m.tendon_frictionloss[i] > 0:
            problems.append("a spatial tendon's frictionloss is not modelled (a fixed "
                            "tendon's is)")
        if m.tendon_armature[i] != 0:
            problems.append("its armature (inertia along the tendon) is not modelled")
        if (spring and np.any(m.tendon_stiffnesspoly[i])) \
                or (damper and np.any(m.tendon_dampingpoly[i])):
            problems.append("its nonlinear spring or damper (stiffnesspoly, dampingpoly) is not "
                            "modelled")
        if stiffness > 0 and low != high:
            problems.append(f"its dead-band spring (springlength {low:g} {high:g}: no force "
                            "between them) is not modelled, only one rest length")
        if getattr(m, "tendon_springyield", None) is not None and m.tendon_springyield[i] != 0:
            problems.append("its plastic spring (springyield) is not modelled")
        if problems:
            _refuse(where, "; ".join(problems), unsupported)
            continue
        lower, upper = (float(x) for x in m.tendon_range[i]) \
            if limits and m.tendon_limited[i] else (-np.inf, np.inf)
        kept[i] = name
        if spatial:
            sites = [int(m.wrap_objid[w]) for w in wraps]
            out.append(SpatialTendon(name, [(body_name[m.site_bodyid[k]], m.site_pos[k])
                                            for k in sites],
                                     stiffness=stiffness, damping=damping, spring_length=low,
                                     lower=lower, upper=upper))
            continue
        joint_ids = [int(m.wrap_objid[w]) for w in wraps]
        coefficients = [float(m.wrap_prm[w]) for w in wraps]
        out.append(FixedTendon(name, [joint_name[j] for j in joint_ids], coefficients,
                               stiffness=stiffness, damping=damping, spring_length=low,
                               lower=lower, upper=upper,
                               frictionloss=float(m.tendon_frictionloss[i]) if friction else 0.0))
    return out, kept


def _joint_springs(mujoco, m, joint_name, tendons, unsupported):
    """The ``FixedTendon`` ``"spring:{joint}"`` of each hinge and slide joint with a stiffness
    (``from_mujoco``'s ``joint_springs``); none when the model disables springs."""
    if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SPRING:
        return []
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    taken = {t.name for t in tendons} | set(joint_name)
    out = []
    for j in np.flatnonzero(np.asarray(m.jnt_stiffness) > 0):
        stiffness = float(m.jnt_stiffness[j])
        if int(m.jnt_type[j]) not in scalar:
            kind = "ball" if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_BALL) else "free"
            _refuse(f'MJCF <joint name="{joint_name[j]}">', f"its stiffness ({stiffness:g}) on a "
                    f"{kind} joint (a spring towards springref's pose) is not modelled, only on "
                    "hinge and slide joints", unsupported)
            continue
        name = f"spring:{joint_name[j]}"
        while name in taken:
            name = "_" + name
        taken.add(name)
        out.append(FixedTendon(name, [joint_name[j]], [1.0], stiffness=stiffness,
                               spring_length=float(m.qpos_spring[m.jnt_qposadr[j]])))
    return out


_EQUALITY_ELEMENT = {0: "connect", 1: "weld", 2: "joint", 3: "tendon", 4: "flex",
                     5: "flexvert", 6: "flexstrain", 7: "distance"}


def _equality_weights(mujoco, m, i, a, b):
    """MuJoCo's approximate A_jj of equality i's rows (its ``mj_diagApprox``), on screwdyn's
    rows: a connect's, its two bodies' translational ``body_invweight0``; a weld's, the same,
    then the rotational ones times (2 / torquescale)^2 (MuJoCo's orientation rows are
    torquescale / 2 times screwdyn's sin(angle) axis, to first order); a joint or tendon
    equality's, the sum of its objects' ``dof_invweight0`` or ``tendon_invweight0``."""
    eq = mujoco.mjtEq
    kind = int(m.eq_type[i])
    if kind in (eq.mjEQ_CONNECT, eq.mjEQ_WELD):
        if int(m.eq_objtype[i]) == mujoco.mjtObj.mjOBJ_SITE:
            a, b = int(m.site_bodyid[a]), int(m.site_bodyid[b])
        w = m.body_invweight0
        translation = float(w[a, 0] + w[b, 0])
        torquescale = float(m.eq_data[i][10])
        if kind == eq.mjEQ_CONNECT or torquescale == 0.0:
            return (translation,) * 3
        return (translation,) * 3 + (float(w[a, 1] + w[b, 1]) * (2.0 / torquescale) ** 2,) * 3
    if kind == eq.mjEQ_JOINT:
        return (sum(float(m.dof_invweight0[m.jnt_dofadr[j]]) for j in (a, b) if j >= 0),)
    return (sum(float(m.tendon_invweight0[j]) for j in (a, b) if j >= 0),)


def _equalities(mujoco, m, body_name, joint_name, tendon_name, unsupported, soft):
    """The active equality constraints as Connect, Weld and Coupling objects (``soft``: with
    their solimp and MuJoCo's approximate inverse weights)."""
    bit = mujoco.mjtDisableBit
    if m.opt.disableflags & (bit.mjDSBL_EQUALITY | bit.mjDSBL_CONSTRAINT):
        return []  # MuJoCo applies none
    eq = mujoco.mjtEq
    out = []
    for i in range(m.neq):
        if not m.eq_active0[i]:
            continue
        kind = int(m.eq_type[i])
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, i) or f"equality{i}"
        element = _EQUALITY_ELEMENT.get(kind, f"type {kind}")
        where = f'MJCF <equality><{element} name="{name}">'
        solref = _solref(mujoco, m, i, where, unsupported)
        if solref is None:
            continue
        options = dict(name=name, timeconst=solref[0], dampratio=solref[1],
                       refsafe=solref[2])
        data, a, b = m.eq_data[i], int(m.eq_obj1id[i]), int(m.eq_obj2id[i])
        if soft:
            options["impedance"] = applied_solimp(m.eq_solimp[i])
            options["inverse_weights"] = _equality_weights(mujoco, m, i, a, b)
        if kind in (eq.mjEQ_CONNECT, eq.mjEQ_WELD):
            if int(m.eq_objtype[i]) == mujoco.mjtObj.mjOBJ_SITE:
                links = body_name[m.site_bodyid[a]], body_name[m.site_bodyid[b]]
                points = m.site_pos[a], m.site_pos[b]
                # quaternions (X, Y) of R2^T R1 = X Y^T: the sites' frames coincide,
                # R1 S1 = R2 S2, so R2^T R1 = S2 S1^T
                rotation = (m.site_quat[b], m.site_quat[a])
            elif int(m.eq_objtype[i]) == mujoco.mjtObj.mjOBJ_BODY:
                links = body_name[a], body_name[b]
                # connect: data[0:3] on body 1, data[3:6] on body 2; weld: the other way
                points = (data[0:3], data[3:6]) if kind == eq.mjEQ_CONNECT else \
                    (data[3:6], data[0:3])
                # q1 relpose = q2: R2^T R1 = relpose^T
                rotation = ((1.0, 0.0, 0.0, 0.0), data[6:10])
            else:
                _refuse(where, f"its objects of type {int(m.eq_objtype[i])} (neither bodies nor "
                        "sites) are not modelled", unsupported)
                continue
            link = dict(link_a=links[0], link_b=links[1], point_a=points[0],
                        point_b=points[1])
            # torquescale scales MuJoCo's orientation rows (their softness): any nonzero value
            # is the same hard constraint; 0 leaves the points only
            if kind == eq.mjEQ_WELD and data[10] != 0:
                out.append(Weld(rotation=_matrix(rotation[0]) @ _matrix(rotation[1]).T,
                                torquescale=abs(float(data[10])), **link, **options))
            else:
                out.append(Connect(**link, **options))
        elif kind in (eq.mjEQ_JOINT, eq.mjEQ_TENDON):
            if kind == eq.mjEQ_JOINT:
                names = [joint_name[j] if j >= 0 else None for j in (a, b)]
                reference = [float(m.qpos0[m.jnt_qposadr[j]]) if j >= 0 else 0.0
                             for j in (a, b)]
            else:
                if any(j >= 0 and j not in tendon_name for j in (a, b)):
                    continue  # on a tendon dropped by unsupported="ignore"
                if any(j >= 0 and int(m.wrap_type[m.tendon_adr[j]]) != mujoco.mjtWrap.mjWRAP_JOINT
                       for j in (a, b)):
                    _refuse(where, "an equality on a spatial tendon (whose length is not linear "
                            "in the joints' positions) is not modelled", unsupported)
                    continue
                names = [tendon_name[j] if j >= 0 else None for j in (a, b)]
                reference = [float(m.tendon_length0[j]) if j >= 0 else 0.0 for j in (a, b)]
            out.append(Coupling(names[0], names[1], polynomial=data[:5] if b >= 0 else data[:1],
                                reference=reference, **options))
        else:
            _refuse(where, f"{element} equalities are not modelled", unsupported)
    return out


def limit_softness(path: "str | os.PathLike") -> dict:
    """{joint or tendon name: ((timeconst s, dampratio), solimp (dmin, dmax, width, midpoint,
    power), inverse weight, refsafe, margin)}: each limited hinge's and slide's (and limited
    fixed tendon's) solreflimit and solimplimit in MuJoCo's compiled model of the MJCF file
    ``path``, as MuJoCo applies them (``_time_constant``: refsafe where a simulation applies
    MuJoCo's refsafe at its step; ``applied_solimp``), its ``dof_invweight0`` (a tendon's
    ``tendon_invweight0``: what MuJoCo scales a limit's compliance by: 1/kg or 1/(kg m^2))
    and its ``margin`` (rad or m: MuJoCo's limit acts that far inside the range); the joints
    and tendons named as ``load_mjcf`` names them. ``ModelError`` for a file MuJoCo rejects or
    a solreflimit that mixes the standard and direct forms (naming the joint or tendon)."""
    m = _compiled(os.fspath(path))
    joints = [(j, m.jnt_solref[j], m.jnt_solimp[j], m.dof_invweight0[m.jnt_dofadr[j]],
               m.jnt_margin[j]) for j in range(m.njnt)
              if int(m.jnt_type[j]) in (_HINGE, _SLIDE) and m.jnt_limited[j]]
    tendons = [(t, m.tendon_solref_lim[t], m.tendon_solimp_lim[t], m.tendon_invweight0[t],
                m.tendon_margin[t]) for t in range(m.ntendon) if m.tendon_limited[t]]
    return _row_softness(path, m, "solreflimit", joints, tendons)


def friction_softness(path: "str | os.PathLike") -> dict:
    """{joint or tendon name: ((timeconst s, dampratio), solimp, inverse weight or None,
    refsafe, 0.0)}, as ``limit_softness``, of the dry friction rows MuJoCo makes for the MJCF
    file ``path``: each joint with a frictionloss (its solreffriction and solimpfriction, its
    ``dof_invweight0``: None for a joint of several DoFs, whose DoFs have several), each fixed
    tendon with one (its solreffriction and solimpfriction, ``tendon_invweight0``). Only a
    friction row's damping 2 / (dmax timeconst) acts (its violation is zero): a direct
    solreffriction (-stiffness, -damping) may have a zero stiffness."""
    m = _compiled(os.fspath(path))
    dofs = np.diff(np.append(m.jnt_dofadr, m.nv))
    joints = [(j, m.dof_solref[m.jnt_dofadr[j]], m.dof_solimp[m.jnt_dofadr[j]],
               m.dof_invweight0[m.jnt_dofadr[j]] if dofs[j] == 1 else None, 0.0)
              for j in range(m.njnt)
              if np.any(m.dof_frictionloss[m.jnt_dofadr[j]:m.jnt_dofadr[j] + dofs[j]] > 0)]
    tendons = [(t, m.tendon_solref_fri[t], m.tendon_solimp_fri[t], m.tendon_invweight0[t], 0.0)
               for t in range(m.ntendon) if m.tendon_frictionloss[t] > 0]

    def damping_only(solref):  # a direct solref's stiffness does not act: any will do
        a, b = (float(x) for x in solref)
        return (-1.0, b) if b < 0 and a == 0 else (a, b)

    return _row_softness(path, m, "solreffriction",
                         [(j, damping_only(ref), *rest) for j, ref, *rest in joints],
                         [(t, damping_only(ref), *rest) for t, ref, *rest in tendons])


def _row_softness(path, m, attribute, joints, tendons):
    """{name: ((timeconst, dampratio), solimp, inverse weight, refsafe, margin)} of the rows of
    ``joints`` and ``tendons`` ((index, solref, solimp, inverse weight, margin), ...) of
    MuJoCo's model m of the file ``path``, whose solref is the file's ``attribute``, named as
    ``load_mjcf`` names them (``limit_softness``)."""
    mujoco = _mujoco()

    def softness(element, name, solref, solimp, weight, margin):
        a, b = (float(x) for x in solref)
        ref = _time_constant(mujoco, m, a, b)
        if ref is None:
            raise ModelError(f'{os.fspath(path)}: MJCF <{element} name="{name}">: its '
                             f"{attribute} ({a:g}, {b:g}) mixes the standard (timeconst, "
                             "dampratio) and direct (-stiffness, -damping) forms, or has a "
                             "zero: give both > 0 or both < 0")
        return (ref[:2], applied_solimp(solimp), None if weight is None else float(weight),
                ref[2], float(margin))

    names = _joint_names(mujoco, m)
    tendon_names = _tendon_names(mujoco, m, names)
    out = {names[j]: softness("joint", names[j], *rest) for j, *rest in joints}
    for t, *rest in tendons:
        label, name = tendon_names[t]
        out[name] = softness("tendon", label, *rest)
    return out


def _joint_names(mujoco, m):
    """Each joint's name as ``load_mjcf`` names it: MuJoCo's, ``joint{j}`` where it has none."""
    return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
            for j in range(m.njnt)]


def _tendon_names(mujoco, m, joint_names):
    """Each tendon's (name in the file, name as ``load_mjcf`` names it): MuJoCo's
    (``tendon{i}`` where it has none), ``tendon:{name}`` where a joint has it (MuJoCo names
    joints and tendons apart, screwdyn's couplings name them together)."""
    out = []
    for i in range(m.ntendon):
        label = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, i) or f"tendon{i}"
        out.append((label, f"tendon:{label}" if label in joint_names else label))
    return out


def _compiled(path):
    """MuJoCo's compiled model of the MJCF file ``path``; ``ModelError`` for a file that is
    not there or that MuJoCo rejects (with MuJoCo's message)."""
    mujoco = _mujoco()
    if not os.path.exists(path):
        raise ModelError(f"cannot read MJCF file {path!r}: No such file or directory")
    try:
        return mujoco.MjModel.from_xml_path(path)
    except ValueError as e:
        raise ModelError(f"{path}: MuJoCo cannot compile it: {e}") from None


def applied_solimp(solimp) -> tuple:
    """A compiled MuJoCo solimp (5,) as MuJoCo applies it: dmin, dmax and the midpoint clamped
    to [0.0001, 0.9999] (mjMINIMP, mjMAXIMP), the width at least 0, the power at least 1."""
    dmin, dmax, width, midpoint, power = (float(x) for x in solimp)

    def clamp(x):
        return min(max(x, 1e-4), 0.9999)

    return clamp(dmin), clamp(dmax), max(width, 0.0), clamp(midpoint), max(power, 1.0)


def _time_constant(mujoco, m, a, b):
    """(timeconst, dampratio, refsafe) of a solref (a, b) as MuJoCo reads it: the standard
    form as given, refsafe unless the model disables it (a simulation then uses a time
    constant of at least 2 dt of its own step, ``impedance.step_time_constant``); the direct
    (-stiffness, -damping) as timeconst 2 / damping, dampratio damping / (2 sqrt(stiffness)),
    never refsafe (as MuJoCo's); None for a mix of both forms or a zero."""
    if a > 0 and b > 0:
        return a, b, not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE
    if a < 0 and b < 0:  # direct: stiffness -a, damping -b (k = 1/(tc dr)^2, b = 2/tc)
        k, c = -a, -b
        return 2.0 / c, c / (2.0 * np.sqrt(k)), False
    return None


def _solref(mujoco, m, i, where, unsupported):
    """(timeconst, dampratio, refsafe) of equality i from ``eq_solref`` as MuJoCo reads it, or None
    (refused and dropped)."""
    a, b = (float(x) for x in m.eq_solref[i])
    ref = _time_constant(mujoco, m, a, b)
    if ref is not None:
        return ref
    what = ("mixes the standard (timeconst, dampratio) and direct (-stiffness, -damping) "
            "forms" if (a > 0) != (b > 0) else "has a zero stiffness or damping")
    _refuse(where, f"its solref ({a:g}, {b:g}) {what}: screwdyn's stabilisation needs a "
            "time constant and damping ratio > 0", unsupported)
    return None


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
