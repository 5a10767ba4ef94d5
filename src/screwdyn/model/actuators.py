"""An MJCF file's actuators as MuJoCo applies them (``mj_fwdActuation``), for
``controllers.MjcfActuators``.

Each actuator whose activation is its control (``dyntype`` none) and which drives a hinge or
slide joint or a fixed tendon (its transmission, of length L = gear c . q: c = 1 for a joint,
the tendon's coefficients) gives the force

    f = gain u + b0 + b1 L + b2 V,   gain = g0 + g1 L + g2 V   (gaintype fixed: g1 = g2 = 0)

(V = gear c . qd; u its control, clamped to ``ctrlrange`` where ``ctrllimited``; f clamped to
``forcerange`` where ``forcelimited``; bias type none: b = 0), and the joints feel
tau = sum f gear c, each joint's total clamped to its ``actuatorfrcrange`` where limited. A
``<motor>`` is gain 1 (times its gear), a ``<position kp kv>`` gain kp and bias (0, -kp, -kv),
a ``<velocity kv>`` gain kv and bias (0, 0, -kv).

An actuator with activation dynamics (``dyntype`` filter, filterexact or integrator:
dm_control's quadruped's servos are filters of 0.1 s) has a state, its activation w (MuJoCo's
``d.act``, 0 at the start), which takes the control's place in the gain: f = gain w + bias.
Its rate is dw/dt = (u - w) / tau (filters, tau = ``dynprm[0]``) or u (integrator), and a step
dt advances it as MuJoCo's does: w += dt dw/dt (filter, integrator), w += tau (1 - exp(-dt /
tau)) dw/dt (filterexact: exactly), then clamps it to ``actrange`` where ``actlimited``.
Muscles and user dynamics, ``actearly`` (a force of the activation the step ends with),
delays, site, body and slider-crank transmissions, ball and free joints, and the actuators'
own armature and damping are not modelled: a ``ModelError`` naming the actuator.
"""
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import ModelError
from .constraints import linear_map


@dataclass(frozen=True, eq=False)
class Actuators:
    """The actuators of an MJCF file bound to its Model (``mjcf_actuators``), as arrays."""

    #: (nu,): their names (MuJoCo's; ``actuator{i}`` where it has none)
    names: tuple
    #: (nu, nq): each one's transmission length L = length @ q (gear c; m or rad)
    length: Any
    #: (nu, nv): each one's moment arm: its velocity V = moment @ qd, its joint forces f moment
    moment: Any
    #: (nu, 3): gain g0, g1, g2 (f = (g0 + g1 L + g2 V) u + ...)
    gain: Any
    #: (nu, 3): bias b0, b1, b2 (f = ... + b0 + b1 L + b2 V)
    bias: Any
    #: (nu, 2): each control's range (-inf, inf: not limited)
    ctrl_range: Any
    #: (nu, 2): each force's range (-inf, inf: not limited)
    force_range: Any
    #: (nv, 2): the range of the total actuator force on each DoF (-inf, inf: not limited)
    joint_force_range: Any
    #: (na,): the actuators that have an activation (dyntype filter, filterexact, integrator),
    #: in the order of MuJoCo's ``d.act``
    activated: tuple
    #: (na, 2): their activation's rate dw/dt = r0 u - r1 w (filter: 1 / tau, 1 / tau;
    #: integrator: 1, 0)
    activation_rate: Any
    #: (na,): a filterexact's time constant tau (s), which a step integrates exactly over;
    #: 0: the step is Euler's
    exact_time_constant: Any
    #: (na, 2): each activation's range (-inf, inf: not limited)
    activation_range: Any

    @property
    def nu(self) -> int:
        return len(self.names)

    @property
    def na(self) -> int:
        """The number of activations (MuJoCo's ``m.na``)."""
        return len(self.activated)

    @cached_property
    def selection(self) -> np.ndarray:
        """(na, nu): 1 where activation i is actuator j's (``d.act`` into the actuators'
        places), built once."""
        S = np.zeros((self.na, self.nu))
        S[np.arange(self.na), list(self.activated)] = 1.0
        return S


def mjcf_actuators(path: "str | os.PathLike", model: Any) -> Actuators:
    """The actuators of the MJCF file ``path`` (compiled by MuJoCo) on ``model``, the Model
    ``load_mjcf(path)`` gives (its joints and fixed tendons named as the loader names them).
    ``ModelError`` naming the actuator for what is not modelled (module docstring), or a
    transmission on a joint or tendon ``model`` lacks (loaded with ``unsupported="ignore"``)."""
    from .mjcf import _compiled, _joint_names, _mujoco, _tendon_names

    mujoco = _mujoco()
    path = os.fspath(path)
    m = _compiled(path)
    joints = _joint_names(mujoco, m)
    tendons = [name for _, name in _tendon_names(mujoco, m, joints)]
    trn, gain_type, bias_type = mujoco.mjtTrn, mujoco.mjtGain, mujoco.mjtBias
    clamp = not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CLAMPCTRL
    names, length, moment, gain, bias, ctrl_range, force_range = ([] for _ in range(7))
    dyn_type = mujoco.mjtDyn
    dynamics = (int(dyn_type.mjDYN_NONE), int(dyn_type.mjDYN_FILTER),
                int(dyn_type.mjDYN_FILTEREXACT), int(dyn_type.mjDYN_INTEGRATOR))
    activated, rate, exact, act_range = ([] for _ in range(4))
    for i in range(m.nu):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or f"actuator{i}"
        where = f'{path}: MJCF <actuator name="{name}">'
        problems = []
        dyn = int(m.actuator_dyntype[i])
        if dyn not in dynamics:
            problems.append("its activation dynamics (dyntype muscle or user; filter, "
                            "filterexact and integrator are modelled)")
        if int(m.actuator_gaintype[i]) not in (int(gain_type.mjGAIN_FIXED),
                                               int(gain_type.mjGAIN_AFFINE)):
            problems.append("its gain (gaintype muscle or user; fixed and affine are modelled)")
        if int(m.actuator_biastype[i]) not in (int(bias_type.mjBIAS_NONE),
                                               int(bias_type.mjBIAS_AFFINE)):
            problems.append("its bias (biastype muscle or user; none and affine are modelled)")
        if dyn != int(dyn_type.mjDYN_NONE) and m.actuator_actearly[i]:
            problems.append("its actearly (a force of the activation the step ends with)")
        for field, what in (("actuator_armature", "armature"), ("actuator_damping", "damping"),
                            ("actuator_delay", "delay")):
            if np.any(np.asarray(getattr(m, field, np.zeros(m.nu))[i]) != 0):
                problems.append(f"its {what}")
        kind, target = int(m.actuator_trntype[i]), int(m.actuator_trnid[i, 0])
        if kind == int(trn.mjTRN_JOINT) and int(m.jnt_type[target]) in (
                int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            over = joints[target]
        elif kind == int(trn.mjTRN_TENDON) and all(
                int(m.wrap_type[w]) == int(mujoco.mjtWrap.mjWRAP_JOINT)
                for w in range(m.tendon_adr[target], m.tendon_adr[target]
                               + m.tendon_num[target])):
            over = tendons[target]
        else:
            over = None
            problems.append("its transmission (a hinge or slide joint or a fixed tendon are "
                            "modelled; not a ball or free joint, site, body, slider-crank or "
                            "spatial tendon)")
        if problems:
            raise ModelError(f"{where}: {'; '.join(problems)} is not modelled")
        q_index, v_index, c = linear_map(model, over, where)
        gear = float(m.actuator_gear[i, 0])
        row_q, row_v = np.zeros(model.nq), np.zeros(model.nv)
        row_q[q_index] = gear * np.asarray(c)
        row_v[v_index] = gear * np.asarray(c)
        g = np.asarray(m.actuator_gainprm[i, :3], dtype=float)
        if int(m.actuator_gaintype[i]) == int(gain_type.mjGAIN_FIXED):
            g = np.array([g[0], 0.0, 0.0])
        b = np.asarray(m.actuator_biasprm[i, :3], dtype=float)
        if int(m.actuator_biastype[i]) == int(bias_type.mjBIAS_NONE):
            b = np.zeros(3)
        names.append(name)
        length.append(row_q)
        moment.append(row_v)
        gain.append(g)
        bias.append(b)
        ctrl_range.append(m.actuator_ctrlrange[i] if clamp and m.actuator_ctrllimited[i]
                          else (-np.inf, np.inf))
        force_range.append(m.actuator_forcerange[i] if m.actuator_forcelimited[i]
                           else (-np.inf, np.inf))
        if dyn != int(dyn_type.mjDYN_NONE):
            tau = max(float(m.actuator_dynprm[i, 0]), mujoco.mjMINVAL)
            activated.append(i)
            rate.append((1.0, 0.0) if dyn == int(dyn_type.mjDYN_INTEGRATOR)
                        else (1.0 / tau, 1.0 / tau))
            exact.append(tau if dyn == int(dyn_type.mjDYN_FILTEREXACT) else 0.0)
            act_range.append(m.actuator_actrange[i] if m.actuator_actlimited[i]
                             else (-np.inf, np.inf))
    joint_range = np.tile([-np.inf, np.inf], (model.nv, 1))
    for j in range(m.njnt):
        if m.jnt_actfrclimited[j]:
            dofs = range(m.jnt_dofadr[j], m.jnt_dofadr[j] + (1 if int(m.jnt_type[j]) in (
                int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)) else 3))
            joint_range[list(dofs)] = m.jnt_actfrcrange[j]

    def table(rows, width):
        return np.array(rows, dtype=float).reshape(len(rows), width)

    return Actuators(tuple(names), table(length, model.nq), table(moment, model.nv),
                     table(gain, 3), table(bias, 3), table(ctrl_range, 2),
                     table(force_range, 2), joint_range, tuple(activated), table(rate, 2),
                     np.array(exact, dtype=float), table(act_range, 2))
