"""MJCF fixed tendons and equality constraints against MuJoCo itself.

screwdyn holds each equality as a hard constraint, J qdd + dJ/dt qd = -k e - b J qd, with k, b
from ``solref``; MuJoCo as a soft one. The cross-checks make MuJoCo's nearly hard (solimp
0.9999, its maximum) and switch off everything else (contacts, limits, friction loss, springs,
dampers, actuators, fluid), then compare at random states, including states that violate the
constraints (there the stabilisation acts), with

- the hard limit built from MuJoCo's own quantities (mj_fullM, qacc_smooth, efc_J, efc_pos,
  and dJ/dt qd by a central difference of efc_pos along mj_integratePos): the same equations in
  MuJoCo's rows, so screwdyn equals it to 1e-6 relative (the difference's truncation);
- MuJoCo's soft qacc and efc_force from mj_forward: solimp 0.9999 leaves a regularisation
  R = (1/0.9999 - 1) diag(A) ~ 1e-4 diag(A) and scales aref's gains by 1/0.9999, so they differ
  from the hard limit by ~1e-4 relative, more where J M^-1 J^T is ill-conditioned: 2e-3
  relative. MuJoCo subtracts dJ/dt qd from aref for connect and weld (as screwdyn does), not for
  joint and tendon equalities: there the missing term (nonzero for a nonlinear polycoef) is
  added to MuJoCo's answer through the constraint space, M^-1 J^T (J M^-1 J^T)^+ (...).

Rows: connect and coupling rows are MuJoCo's (p1 - p2 in world axes; y - y0 - poly(x - x0)),
so efc_force equals ``constraint_forces`` row by row. A weld's orientation rows differ (MuJoCo:
torquescale * Im(conj(q2) q1 relpose), half the angle in body 2's axes; screwdyn: sin(angle)
axis in world axes), so welds compare the joint forces J^T lambda = qfrc_constraint, and the
hard limit only at states that satisfy the weld (where the two stabilisations are the same
equation)."""
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.constraints import Connect, Coupling, FixedTendon, Weld

mujoco = pytest.importorskip("mujoco")
from test_mjcf import MODELS  # noqa: E402

_BIT = mujoco.mjtDisableBit
SOFT, SOFT_FORCE, TIGHT = 2e-3, 3e-2, 1e-6


def _hard(m):
    """Only MuJoCo's equality constraints act, nearly hard."""
    m.eq_solimp[:] = [0.9999, 0.9999, 0.001, 0.5, 2]
    m.opt.disableflags |= (_BIT.mjDSBL_CONTACT | _BIT.mjDSBL_LIMIT | _BIT.mjDSBL_FRICTIONLOSS
                           | _BIT.mjDSBL_SPRING | _BIT.mjDSBL_DAMPER | _BIT.mjDSBL_ACTUATION)
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    m.opt.density = m.opt.viscosity = 0.0
    return m


def _rows(m, model):
    """(k, b) per MuJoCo equality row (a weld has 6, also with torquescale 0, whose screwdyn
    constraint is a Connect of 3), as screwdyn's stabilisation uses them: the loader keeps
    MuJoCo's active equalities in order."""
    active = [i for i in range(m.neq) if m.eq_active0[i]]
    assert len(active) == len(model.constraints)
    sizes = {int(mujoco.mjtEq.mjEQ_CONNECT): 3, int(mujoco.mjtEq.mjEQ_WELD): 6}
    k, b = [], []
    for i, c in zip(active, model.constraints):
        k += [c.gains[0]] * sizes.get(int(m.eq_type[i]), 1)
        b += [c.gains[1]] * sizes.get(int(m.eq_type[i]), 1)
    return np.array(k), np.array(b)


def _mujoco(m, model, qpos, qvel, tau, h=1e-4, impedance=0.9999):
    """MuJoCo's soft answer (qacc, efc_force, corrected for the dJ/dt qd it leaves out) at
    solimp ``impedance`` and its hard limit (qacc, force), with M and the equality rows'
    Jacobian."""
    m.eq_solimp[:, :2] = impedance
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.qfrc_applied[:] = qpos, qvel, tau
    mujoco.mj_forward(m, d)
    ne = d.ne
    assert ne == d.nefc
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    J = d.efc_J.reshape(d.nefc, m.nv).copy()

    def residual(t):
        q = np.array(qpos, dtype=float)
        mujoco.mj_integratePos(m, q, np.asarray(qvel, dtype=float), t)
        other = mujoco.MjData(m)
        other.qpos[:] = q
        mujoco.mj_forward(m, other)
        return other.efc_pos[:ne].copy()

    jdot_v = (residual(h) - 2 * residual(0.0) + residual(-h)) / h ** 2  # dJ/dt qd, MuJoCo's rows
    MinvJT = np.linalg.solve(M, J.T)
    A_pinv = np.linalg.pinv(J @ MinvJT, rcond=1e-10)
    k, b = _rows(m, model)
    aref = -k * d.efc_pos[:ne] - b * (J @ qvel) - jdot_v
    force = A_pinv @ (aref - J @ d.qacc_smooth)
    hard = d.qacc_smooth + MinvJT @ force
    # what MuJoCo subtracted from aref (connect, weld): the rest of dJ/dt qd it leaves out
    K, B, imp = d.efc_KBIP[:ne, 0], d.efc_KBIP[:ne, 1], d.efc_KBIP[:ne, 2]
    included = -(d.efc_aref[:ne] + B * d.efc_vel[:ne] + K * imp * d.efc_pos[:ne])
    missing = A_pinv @ (jdot_v - included)
    soft = d.qacc - MinvJT @ missing
    return dict(hard=hard, force=force, soft=soft, soft_force=d.efc_force[:ne] - missing, J=J,
                M=M, d=d)


def _relative(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


def _compare(m, model, qpos, qvel, tau, per_row=True, hard=True):
    """screwdyn's constrained dynamics against MuJoCo's at one state; returns the relative
    differences (hard limit, soft) for the report. MuJoCo's forward dynamics applies refsafe
    at its timestep: screwdyn's model at that step (``Model.at_step``)."""
    model = model.at_step(m.opt.timestep)
    ref = _mujoco(m, model, qpos, qvel, tau)
    qdd = np.asarray(sd.constrained_forward_dynamics(model, qpos, qvel, tau))
    lam = np.asarray(sd.constraint_forces(model, qpos, qvel, tau))
    Jsd = np.asarray(sd.constraint_jacobian(model, qpos))
    frc = Jsd.T @ lam  # the joint forces of the constraints
    # MuJoCo's regularisation moves qacc by ~1e-4 of what the constraints change in it, and
    # the forces by more where J M^-1 J^T is ill-conditioned; it shrinks as (1 - solimp)
    scale = max(1.0, np.max(np.abs(ref["hard"] - ref["d"].qacc_smooth)), np.max(np.abs(qdd)))
    soft = np.max(np.abs(qdd - ref["soft"])) / scale
    softer = _mujoco(m, model, qpos, qvel, tau, impedance=0.999)
    assert soft < SOFT
    assert soft <= 0.2 * np.max(np.abs(qdd - softer["soft"])) / scale + TIGHT
    assert _relative(frc, ref["J"].T @ ref["soft_force"]) < SOFT_FORCE
    if per_row:
        assert _relative(lam, ref["soft_force"]) < SOFT_FORCE
    if hard:
        assert _relative(qdd, ref["hard"]) < TIGHT
        assert _relative(frc, ref["J"].T @ ref["force"]) < TIGHT
        if per_row:
            assert _relative(lam, ref["force"]) < TIGHT
    return _relative(qdd, ref["hard"]) if hard else 0.0, soft


def _null_space_velocity(model, q, rng):
    J = np.asarray(sd.constraint_jacobian(model, q))
    _, s, Vt = np.linalg.svd(J)
    rank = int(np.sum(s > 1e-9 * s[0]))
    return Vt[rank:].T @ rng.normal(size=model.nv - rank)


FOUR_BAR = """<mujoco model="four_bar">
  <default><joint type="hinge" axis="0 1 0"/>
    <geom type="capsule" size="0.02" density="500"/></default>
  <worldbody>
    <body name="crank">
      <joint name="crank" armature="0.01"/>
      <geom fromto="0 0 0 0.2 0 0"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="coupler"/>
        <geom fromto="0 0 0 0.5 0 0.1"/>
      </body>
    </body>
    <body name="rocker" pos="0.6 0 0">
      <joint name="rocker"/>
      <geom fromto="0 0 0 0.1 0 0.1"/>
    </body>
  </worldbody>
  <equality>
    <connect name="loop" body1="coupler" body2="rocker" anchor="0.5 0 0.1"/>
    <connect name="off" body1="crank" body2="rocker" anchor="0 0 0" active="false"/>
  </equality>
</mujoco>"""

PENDULUM_PIN = """<mujoco model="pinned">
  <worldbody>
    <site name="pin" pos="0.3 0.1 -0.5"/>
    <body name="upper" pos="0 0 0">
      <joint name="shoulder" type="ball"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
      <body name="lower" pos="0 0 -0.3">
        <joint name="elbow" type="hinge" axis="1 0 0"/>
        <joint name="twist" type="hinge" axis="0 0 1" pos="0 0.01 0"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 -0.3" size="0.03"/>
        <site name="tip" pos="0.2 0 -0.3"/>
      </body>
    </body>
  </worldbody>
  <equality><connect site1="tip" site2="pin" solref="0.05 0.7"/></equality>
</mujoco>"""

WELDS = """<mujoco model="welds">
  <option timestep="0.001"/>
  <worldbody>
    <site name="dock" pos="0.5 0.5 0.2" euler="0.3 0 0.5"/>
    <body name="link1" pos="0 0 0.1">
      <joint name="j1" type="hinge" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
      <body name="link2" pos="0.4 0 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
    <body name="box" pos="0.8 0.05 0.15" euler="0.2 0.1 0">
      <freejoint name="box"/>
      <geom type="box" size="0.05 0.04 0.03"/>
    </body>
    <body name="ball" pos="0.5 0.45 0.2">
      <freejoint name="ball"/>
      <geom type="sphere" size="0.05" pos="0.01 0 0"/>
      <site name="handle" pos="0 0.05 0" euler="0 0.2 0"/>
    </body>
    <body name="bead" pos="0 -0.5 0.3">
      <freejoint name="bead"/>
      <geom type="box" size="0.02 0.03 0.04"/>
    </body>
  </worldbody>
  <equality>
    <weld name="grip" body1="box" body2="link2" anchor="0.3 0 0"
          relpose="0.05 0.02 -0.01 0.9 0.1 0.2 0.3" solref="0.03 0.9"/>
    <weld name="docked" site1="handle" site2="dock" torquescale="0.5"/>
    <weld name="pinned" body1="bead" anchor="0 0 0.1" torquescale="0"/>
  </equality>
</mujoco>"""

COUPLED = """<mujoco model="coupled">
  <compiler angle="radian"/>
  <worldbody>
    <body name="a">
      <joint name="a" type="hinge" axis="0 0 1" ref="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="b" pos="0.3 0 0">
        <joint name="b" type="hinge" axis="0 1 0" ref="-0.2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="c" pos="0.3 0 0">
          <joint name="c" type="slide" axis="1 0 0" ref="0.05"/>
          <geom type="sphere" size="0.04"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint name="quadratic" joint1="b" joint2="a" polycoef="0.1 0.5 0.3 0 0"/>
    <joint joint1="c" polycoef="0.02 0 0 0 0" solref="-2500 -80"/>
  </equality>
</mujoco>"""

FINGERS = """<mujoco model="fingers">
  <option timestep="0.004"/>
  <worldbody>
    <body name="hand" pos="0 0 0.5">
      <joint name="wrist" type="hinge" axis="0 1 0"/>
      <geom type="box" size="0.05 0.05 0.02"/>
      <body name="thumb" pos="0.04 0 -0.02">
        <joint name="thumb" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.01"/>
        <body name="thumbtip" pos="0 0 -0.1">
          <joint name="thumbtip" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.05" size="0.01"/>
        </body>
      </body>
      <body name="finger" pos="-0.04 0 -0.02">
        <joint name="finger" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.01"/>
        <body name="fingertip" pos="0 0 -0.1">
          <joint name="fingertip" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.05" size="0.01"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="coupling"><joint joint="thumb" coef="1"/><joint joint="finger" coef="1"/></fixed>
    <fixed name="grasp" stiffness="3" damping="0.2" springlength="0.1">
      <joint joint="thumb" coef="0.5"/><joint joint="finger" coef="-0.5"/></fixed>
    <fixed name="curl"><joint joint="thumbtip" coef="1"/><joint joint="fingertip" coef="-2"/>
    </fixed>
  </tendon>
  <equality>
    <tendon name="coupling" tendon1="coupling" solref="0.005 0.5"/>
    <tendon name="curl" tendon1="curl" tendon2="grasp" polycoef="0 1.5 0.8 0 0"/>
  </equality>
</mujoco>"""


def _scene(xml):
    m = mujoco.MjModel.from_xml_string(xml)
    return m, sd.from_mujoco(m)


def test_loaded_constraints_are_mujocos():
    """What the loader reads: names, kinds, anchors, relposes, references, solref (refsafe,
    direct form), inactive equalities skipped."""
    m, model = _scene(FOUR_BAR)
    (loop,) = model.constraints  # "off" is inactive
    assert (loop.name, loop.link_a, loop.link_b, loop.point_a) == ("loop", "coupler", "rocker",
                                                                   (0.5, 0, 0.1))
    assert np.allclose(loop.point_b, (0.1, 0, 0.1), atol=1e-15)
    assert len(sd.constraints.labels(model)) == 3
    m, model = _scene(PENDULUM_PIN)
    (pin,) = model.constraints
    assert (pin.name, pin.link_a, pin.link_b, pin.point_b) == ("equality0", "lower", "world",
                                                               (0.3, 0.1, -0.5))
    assert (pin.timeconst, pin.dampratio) == (0.05, 0.7)
    m, model = _scene(WELDS)
    grip, docked, pinned = model.constraints
    assert type(grip) is Weld and type(docked) is Weld and type(pinned) is Connect
    assert (grip.link_a, grip.link_b, grip.point_b) == ("box", "link2", (0.3, 0, 0))
    assert np.allclose(grip.point_a, (0.05, 0.02, -0.01)) and grip.timeconst == 0.03
    assert (docked.link_a, docked.link_b) == ("ball", "world")
    assert (pinned.link_b, pinned.point_b) == ("world", (0.0, 0.0, 0.1))
    m, model = _scene(COUPLED)
    quadratic, held = model.constraints
    assert quadratic == Coupling("b", "a", (0.1, 0.5, 0.3, 0, 0), (-0.2, 0.3), name="quadratic",
                                 refsafe=True)
    assert (held.target, held.source, held.polynomial, held.reference) == ("c", None, (0.02,),
                                                                           (0.05, 0.0))
    assert held.gains == pytest.approx((2500, 80))  # solref="-2500 -80": direct k, b
    assert not held.refsafe and held.at_step(1.0) is held  # never refsafe (as MuJoCo)
    m, model = _scene(FINGERS)
    assert model.tendons == (FixedTendon("coupling", ("thumb", "finger"), (1, 1)),
                             FixedTendon("grasp", ("thumb", "finger"), (0.5, -0.5), 3, 0.2, 0.1),
                             FixedTendon("curl", ("thumbtip", "fingertip"), (1, -2)))
    coupling = model.constraints[0]  # solref 0.005: refsafe, which a step applies
    assert (coupling.timeconst, coupling.refsafe) == (0.005, True)
    assert coupling.at_step(0.004).timeconst == 0.008  # < 2 dt: 2 dt (the file's timestep)
    assert coupling.at_step(0.002) is coupling and coupling.at_step(1e-3) is coupling
    assert model.at_step(0.004).constraints[0].timeconst == 0.008
    assert model.constraints[1] == Coupling("curl", "grasp", (0, 1.5, 0.8, 0, 0), (0.0, 0.0),
                                            name="curl", refsafe=True)


def _states(model, rng, n, start=None, violation=None):
    """n random (q, qd, tau): anywhere (start None), or near ``start`` projected onto the
    constraints, then moved off them by ``violation`` (tangent step size), with velocities
    off them likewise (0: consistent states)."""
    for _ in range(n):
        tau = rng.normal(size=model.nv)
        if start is None:
            yield sd.random_configuration(model, rng), rng.normal(size=model.nv), tau
            continue
        q = sd.constraints.project(model, sd.integrate(model, start,
                                                       0.3 * rng.normal(size=model.nv)))
        qd = _null_space_velocity(model, q, rng)
        if violation:
            q = np.asarray(sd.integrate(model, q, violation * rng.normal(size=model.nv)))
            qd = qd + violation * 100 * rng.normal(size=model.nv)
        yield q, qd, tau


@pytest.mark.parametrize("xml", [FOUR_BAR, PENDULUM_PIN, COUPLED, FINGERS],
                         ids=["four_bar", "site_pin", "joint_quadratic", "tendon_fingers"])
def test_constrained_dynamics_equals_mujoco(xml):
    """Connect (bodies, sites, a redundant planar loop), joint and tendon couplings (nonlinear
    polycoef, direct solref, refsafe): at random states anywhere (violated, with velocity) and
    on the constraints, qacc and efc_force equal MuJoCo's hard limit to 1e-6 and its soft answer
    to 2e-3 relative."""
    m, model = _scene(xml)
    _hard(m)
    rng = np.random.default_rng(7)
    worst = [0.0, 0.0]
    states = list(_states(model, rng, 4)) + list(_states(model, rng, 2, start=m.qpos0))
    for q, qd, tau in states:
        worst = np.maximum(worst, _compare(m, model, q, qd, tau))
    print(f"worst relative difference: hard limit {worst[0]:.2g}, MuJoCo {worst[1]:.2g}")


def test_welds_equal_mujoco():
    """Body weld with relpose to a moving link, site weld to the world with torquescale 0.5,
    torquescale 0 (a connect): on the constraints (consistent velocities) qacc and J^T lambda
    equal MuJoCo's hard limit to 1e-6; off them by 1e-3 (rad, m) with velocities off them, its
    soft answer to 2e-3 (the two orientation stabilisations differ at second order there)."""
    m, model = _scene(WELDS)
    _hard(m)
    rng = np.random.default_rng(3)
    for q, qd, tau in _states(model, rng, 3, start=m.qpos0):
        _compare(m, model, q, qd, tau, per_row=False)
    for q, qd, tau in _states(model, rng, 3, start=m.qpos0, violation=1e-3):
        _compare(m, model, q, qd, tau, per_row=False, hard=False)


CORPUS_EQUALITY = [p for p in MODELS if os.path.basename(p) in
                   ("manipulator.xml", "quadruped.xml", "stacker.xml")]


@pytest.mark.skipif(not CORPUS_EQUALITY, reason="dm_control is not installed")
@pytest.mark.parametrize("path", CORPUS_EQUALITY, ids=[os.path.basename(p)
                                                       for p in CORPUS_EQUALITY])
def test_dm_control_equalities_equal_mujoco(path):
    """dm_control's manipulator, stacker (a fixed-tendon equality coupling the fingers) and
    quadruped (four, refsafe-clamped time constants) at random states: as the scenes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        model = sd.load_mjcf(path)
    m = _hard(mujoco.MjModel.from_xml_path(path))
    assert model.constraints and model.tendons
    rng = np.random.default_rng(11)
    for q, qd, tau in _states(model, rng, 3):
        _compare(m, model, q, qd, tau)


def _unsupported(m):
    """The names of m's tendons screwdyn refuses (spatial ones around geoms or pulleys)."""
    out = []
    for i in range(m.ntendon):
        wraps = set(m.wrap_type[m.tendon_adr[i]:m.tendon_adr[i] + m.tendon_num[i]].tolist())
        if wraps not in ({mujoco.mjtWrap.mjWRAP_JOINT}, {mujoco.mjtWrap.mjWRAP_SITE}):
            out.append(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, i))
    return out


@pytest.mark.skipif(not MODELS, reason="no MJCF models installed (dm_control, gymnasium)")
def test_corpus_models_with_tendons_and_equalities_load():
    """Every bundled model with tendons or equalities loads with all of them (fixed tendons,
    spatial tendons through sites, its active equalities) unless it has a tendon wrapped around
    a geom, which the error names (and unsupported="ignore" drops). With dm_control and
    gymnasium: all 13 load (ball_in_cup's string was refused before spatial tendons were
    modelled)."""
    loaded, refused = [], []
    for path in MODELS:
        m = mujoco.MjModel.from_xml_path(path)
        if not (m.ntendon or m.neq):
            continue
        bad = _unsupported(m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.InertiaWarning)
            if bad:
                with pytest.raises(sd.ModelError, match=f'<tendon name="{bad[0]}">.*not '
                                                        'modelled.*unsupported="ignore"'):
                    sd.load_mjcf(path)
                model = sd.load_mjcf(path, unsupported="ignore")
                assert len(model.tendons + model.spatial_tendons) == m.ntendon - len(bad)
                refused.append(path)
                continue
            model = sd.load_mjcf(path)
        assert len(model.tendons + model.spatial_tendons) == m.ntendon
        assert len(model.constraints) == int(np.sum(m.eq_active0))
        tendon_joints = {j for t in model.tendons for j in t.joints}
        assert tendon_joints <= set(model.joint_names)
        site_links = {link for t in model.spatial_tendons for link, _ in t.sites}
        assert site_links <= set(model.link_names)
        loaded.append(path)
    names = sorted(os.path.basename(p) for p in refused)
    print(f"{len(loaded)} corpus models with tendons or equalities load, refused: {names}")
    assert loaded
    if any("dm_control" in p for p in MODELS) and any("gymnasium" in p for p in MODELS):
        assert (len(loaded), names) == (13, [])


SPATIAL = """<mujoco><worldbody>
  <site name="s0"/>
  <body pos="0 0 -0.5"><joint name="j" type="slide" axis="0 0 1"/><geom size="0.1"/>
    <site name="s1"/></body></worldbody>
  <tendon><spatial name="rope" {attrs}><site site="s0"/><site site="s1"/></spatial></tendon>
</mujoco>"""

LIMITED = """<mujoco><worldbody>
  <body><joint name="a" type="hinge"/><geom size="0.1"/>
    <body><joint name="b" type="hinge"/><geom size="0.1"/></body></body></worldbody>
  <tendon><fixed name="sum" {attrs}><joint joint="a" coef="1"/><joint joint="b" coef="1"/>
  </fixed></tendon>
  <equality><tendon tendon1="sum"/><joint joint1="a" joint2="b" active="false"/></equality>
</mujoco>"""


SOFT_SCENES = {"four_bar": FOUR_BAR, "site_pin": PENDULUM_PIN, "welds": WELDS,
               "joint_quadratic": COUPLED, "tendon_fingers": FINGERS}


def _quiet(m, solimp):
    """Only MuJoCo's equality constraints act, soft: their solimp ``solimp`` (None: the
    file's)."""
    given = m.eq_solimp.copy()
    _hard(m)
    m.eq_solimp[:] = given if solimp is None else solimp
    return m


@pytest.mark.parametrize("solimp", [None, (0.5, 0.99, 0.01, 0.3, 3.0)],
                         ids=["files", "sigmoid"])
@pytest.mark.parametrize("name", list(SOFT_SCENES))
def test_soft_equalities_are_mujocos(name, solimp):
    """load_mjcf(..., soft_equalities=True) gives MuJoCo's soft equality constraints: at rest
    (qd = 0) on the constraints and off them by 1e-4 and 1e-3 (m, rad; the impedance's
    sigmoid and beyond), qacc equals mj_forward's to 1e-9 relative, and the forces too (row by
    row; a weld's as J^T lambda, its rows being other than MuJoCo's); a weld off its
    constraint to 1e-6 (its orientation rows are sin(angle) axis, MuJoCo's the quaternion
    error's: their Jacobians differ with the angle, and the compliance scales fixed weights;
    1.4e-7 measured). With velocities, the connects too (the couplings' curvature term, which
    MuJoCo leaves out, differs there).""" 
    m = _quiet(mujoco.MjModel.from_xml_string(SOFT_SCENES[name]), solimp)
    # MuJoCo's forward dynamics applies refsafe at its timestep
    model = sd.from_mujoco(m, soft_equalities=True).at_step(m.opt.timestep)
    assert all(c.soft and c.inverse_weights for c in model.constraints)
    rng = np.random.default_rng(5)
    moving = name in ("four_bar", "site_pin")
    for violation in (0.0, 1e-4, 1e-3):
        for q, qd, tau in _states(model, rng, 2, start=m.qpos0, violation=violation):
            qd = qd if moving else 0.0 * qd
            d = mujoco.MjData(m)
            d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, qd, tau
            mujoco.mj_forward(m, d)
            qdd = np.asarray(sd.constrained_forward_dynamics(model, q, qd, tau))
            lam = np.asarray(sd.constraint_forces(model, q, qd, tau))
            scale = max(1.0, np.abs(d.qacc - d.qacc_smooth).max())
            tol = 1e-6 if name == "welds" and violation else 1e-9
            assert np.abs(qdd - d.qacc).max() / scale < tol, (violation, qdd, d.qacc)
            if name == "welds":
                J = np.asarray(sd.constraint_jacobian(model, q))
                assert _relative(J.T @ lam, d.qfrc_constraint) < tol * 10
            else:
                assert _relative(lam, d.efc_force[:d.ne]) < 1e-8


def test_soft_equalities_read_mujocos_numbers():
    """What soft_equalities=True reads: each equality's solimp as MuJoCo applies it (clamped)
    and its rows' approximate A_jj, which equal MuJoCo's efc_diagApprox (R imp / (1 - imp),
    from efc_R and efc_KBIP) row by row, a weld's orientation rows times (2 / torquescale)^2
    (screwdyn's rows are 2 / torquescale times MuJoCo's); the torquescale. By default the
    constraints are hard (impedance 1, no weights), as before."""
    for xml in SOFT_SCENES.values():
        m = _quiet(mujoco.MjModel.from_xml_string(xml), None)
        hard = sd.from_mujoco(m)
        assert not any(c.soft or c.inverse_weights for c in hard.constraints)
        model = sd.from_mujoco(m, soft_equalities=True)
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        imp = d.efc_KBIP[:d.ne, 2]
        approx = d.efc_R[:d.ne] * imp / (1 - imp)
        first = 0
        for i, c in zip([i for i in range(m.neq) if m.eq_active0[i]], model.constraints):
            assert c.impedance.as_tuple() == pytest.approx(tuple(m.eq_solimp[i]))
            weights = np.array(c.inverse_weights)
            if isinstance(c, Weld):
                assert c.torquescale == abs(m.eq_data[i][10])
                weights[3:] *= (c.torquescale / 2) ** 2
            # MuJoCo's (the orientation rows of a weld of torquescale 0, a Connect here, left
            # out: they carry no force)
            np.testing.assert_allclose(weights, approx[first:first + c.rows], rtol=1e-12)
            first += 6 if m.eq_type[i] == mujoco.mjtEq.mjEQ_WELD else c.rows
        assert first == d.ne
    m = mujoco.MjModel.from_xml_string(COUPLED)
    m.eq_solimp[0] = (2.0, 0.95, 0.001, 0.5, 2)  # dmin > 1: MuJoCo clamps it to 0.9999
    (quadratic, _) = sd.from_mujoco(m, soft_equalities=True).constraints
    assert quadratic.impedance.dmin == 0.9999
    with pytest.raises(ValueError, match="soft_equalities must be True or False, got 'yes'"):
        sd.from_mujoco(m, soft_equalities="yes")


def test_unsupported_elements_are_named():
    for xml, attrs, message in [
            (SPATIAL.replace('<site site="s1"/>', '<geom geom="drum"/><site site="s1"/>')
             .replace('<site name="s0"/>', '<site name="s0"/><geom name="drum" type="sphere" '
                      'size="0.05" pos="0.2 0 -0.2"/>'), "",
             '<tendon name="rope">: a spatial tendon\'s wrapping around geoms'),
            (LIMITED, 'armature="0.1"', '<tendon name="sum">: its armature'),
            (LIMITED, 'stiffness="1" springlength="0 0.2"', "dead-band spring")]:
        m = mujoco.MjModel.from_xml_string(xml.format(attrs=attrs))
        with pytest.raises(sd.ModelError, match=message + '.*unsupported="ignore"'):
            sd.from_mujoco(m)
        ignored = sd.from_mujoco(m, unsupported="ignore")  # the tendon and its equality go
        assert (ignored.tendons, ignored.constraints, ignored.nv) == ((), (), m.nv)
    # a limited tendon loads with its range (test_rigid_limits: the simulations enforce it);
    # with limits disabled in the file MuJoCo applies none, and it has none
    m = mujoco.MjModel.from_xml_string(LIMITED.format(attrs='limited="true" range="-1 1"'))
    (tendon,) = sd.from_mujoco(m).tendons
    assert (tendon.name, tendon.lower, tendon.upper) == ("sum", -1.0, 1.0)
    m = mujoco.MjModel.from_xml_string(LIMITED.format(attrs='frictionloss="0.1"'))
    assert sd.from_mujoco(m).tendons[0].frictionloss == 0.1  # dry friction, modelled too
    m.opt.disableflags |= _BIT.mjDSBL_FRICTIONLOSS
    assert sd.from_mujoco(m).tendons[0].frictionloss == 0.0
    m = mujoco.MjModel.from_xml_string(LIMITED.format(attrs='limited="true" range="-1 1"'))
    m.opt.disableflags |= _BIT.mjDSBL_LIMIT
    model = sd.from_mujoco(m)
    assert [t.name for t in model.tendons] == ["sum"]
    assert (model.tendons[0].lower, model.tendons[0].upper) == (-np.inf, np.inf)
    assert model.constraints == (Coupling("sum", None, (0.0,), (0.0, 0.0), name="equality0",
                                          refsafe=True),)
    # a direct solref with zero damping has no time constant
    m = mujoco.MjModel.from_xml_string(LIMITED.format(attrs="").replace(
        '<tendon tendon1="sum"/>', '<tendon name="held" tendon1="sum" solref="-100 0"/>'))
    with pytest.raises(sd.ModelError, match='<equality><tendon name="held">: its solref '
                                            r'\(-100, 0\)'):
        sd.from_mujoco(m)
    assert sd.from_mujoco(m, unsupported="ignore").constraints == ()
    # a tendon named as a joint is renamed: screwdyn names both alike
    m = mujoco.MjModel.from_xml_string(LIMITED.format(attrs="").replace('name="sum"', 'name="a"')
                                       .replace('tendon1="sum"', 'tendon1="a"'))
    model = sd.from_mujoco(m)
    assert model.tendons[0].name == "tendon:a" and model.constraints[0].target == "tendon:a"


def test_constraint_on_a_missing_body_is_refused():
    """from_mujoco cannot produce one (MuJoCo resolves the names); Model.with_constraints
    refuses it, naming the constraint."""
    m, model = _scene(FOUR_BAR)
    with pytest.raises(sd.ModelError, match="Connect 'gone'.*link_b 'nobody' is no link"):
        model.with_constraints(Connect("crank", "nobody", name="gone"))
    with pytest.raises(sd.ModelError, match="no moving joint named 'nojoint'"):
        model.with_constraints(Coupling("nojoint", "crank"))
