"""1 s trajectories of ``sd.simulate`` against ``mujoco.mj_step`` (issue 24 item 4), at the same
integrator (MuJoCo's default semi-implicit Euler, or its RK4) and the same time step.

The solvers differ: MuJoCo's constraints and contacts are soft (solimp: a regularisation of
(1 - d) / d of the apparent inertia, so a contact at rest sits inside the ground), screwdyn's
are hard, held by the stabilised KKT system (equalities) or by projected Gauss-Seidel
(``RigidContact``). Both use the same ``solref`` stabilisation (time constant, damping ratio).
So the trajectories agree in what does not depend on the solver, and the tolerances below are
the measured differences (this machine, MuJoCo 4.0) with a margin of 2-5x.

Equality constraints, no contact (MuJoCo's made nearly hard as in test_mjcf_constraints.py:
solimp 0.9999, contacts, limits, springs, dampers and actuators off; energy by
``<flag energy="enable"/>``, mj_energyPos + mj_energyVel, compared as E(t) - E(0): MuJoCo's
potential energy also counts bodies welded to the world, a constant).
Columns: the largest violation, MuJoCo / screwdyn; the largest difference of E(t) - E(0), of
the energy exchanged; the final poses' largest difference (and the motion's range):

| scene, integrator | violation | energy | final pose |
|---|---|---|---|
| four-bar closed by <connect>, Euler | 2.06e-3 / 2.06e-3 m | 1.5e-4 | 3.9e-4 rad (4.7) |
| four-bar, RK4 | 3.0e-6 / 5.2e-8 m | 1.4e-4 | 3.4e-4 rad |
| pendulums, quadratic <joint> polycoef, Euler | 7.6e-3 / 8.5e-4 rad | 9.7e-4 | 4.3e-3 rad (2.5) |
| the same, RK4 | 8.5e-3 / 1.1e-8 rad | 9.8e-4 | 4.3e-3 rad |
| ball-jointed arm, site <connect>, Euler | 2.37e-3 / 2.37e-3 m | 1.9e-5 | 3.2e-5 (5.8) |
| dm_control manipulator, <tendon> equality, Euler | 8.7e-6 / 2e-18 | 2.7e-7 | 5.6e-5 rad (20) |

- With semi-implicit Euler the violation is the integrator's (first order: the positions move
  with the updated velocities), the same in both to 0.2%; with RK4 screwdyn's stays at 1e-8
  and MuJoCo's is its softness, (1 - 0.9999) of the constraint forces' effect.
- The joint coupling's larger differences are MuJoCo's: it leaves dJ/dt qd (here
  poly''(x) x'^2, a nonlinear polycoef's curvature) out of a joint equality's reference
  acceleration (it subtracts it for connect and weld), so its stabilisation, not the constraint,
  holds the curvature term, at a violation of about poly'' qd^2 timeconst^2 (8e-3 rad), which
  moves the pendulums by 4e-3 rad and the energy by 1e-3 of what they exchange. With a linear
  coupling MuJoCo's violation falls to its softness's 9.5e-7 (checked below), and the curved
  one's is that estimate, 8.7e-3 rad, within 3%.
- Energy: semi-implicit Euler does not conserve it (it oscillates by 8% of the exchange on the
  four-bar) but both integrate the same equations, so E(t) agrees to 1.5e-4 of the exchange.

Contact (MuJoCo's default soft contact, elliptic cones, impratio 10, solref 0.02 1 on the
floor and the body: MuJoCo averages the two geoms' solref, so both carry the same; screwdyn
``RigidContact(mu, timeconst=0.02, dampratio)`` with the box's 8 corners, the sphere as one
``ContactPoint``), dt 1 ms, semi-implicit Euler:

| run | MuJoCo | screwdyn |
|---|---|---|
| box (0.2 x 0.2 x 0.1 m, 1 kg, mu 0.5) from 2 m/s: slide | 0.40701 m | 0.40697 m |
| time to slow to 0.1 m/s / to stop (1 mm/s) | 0.388 / 0.437 s | 0.388 / 0.435 s |
| resting height of the centre | 0.049892 m (108 um inside) | 0.05 (to 1e-6) |
| pitching while it slides (quaternion x, y) | 2.7e-3 (it rocks) | < 1e-9 |
| box from (1.5, 1) m/s, 4 rad/s: end x, y; yaw | 0.2835, 0.1855 m; 0.608 | 0.2976, 0.1820; 0.543 |
| sphere (r 0.1 m) from 1 m, solref 0.02 1: deepest (mm) | 71.39 | 71.49 |
| its rebound speed out of the ground (m/s) / rest (mm) | 0.527 / 99.633 | 0.529 / 100.000 |
| dampratio 0.3: first / second apex above contact (mm) | 158.78 / 27.1 | 158.33 / 30.2 |

- Sliding straight, the friction is mu times the weight in both: the slide agrees to 1e-4 of
  it (Coulomb's v^2 / (2 mu g): 0.40775 m). Below a few cm/s the stabilisation's damping
  (b = 2 / timeconst), not the cone, stops the box in both, within 2 ms of each other.
- MuJoCo's soft contact sinks (solimp 0.9..0.95: 108 um for the box, 0.37 mm for the sphere)
  and lets the box rock on its front edge; screwdyn's rests at the surface.
- The spinning slide depends on how the weight is shared among the four corners, which rigid
  mechanics leaves undetermined (the "twist" (+ - + -) mode of the four normal forces): MuJoCo's
  compliance picks one, screwdyn's warm-started Gauss-Seidel another (measured at 0.1 s: a
  twist of 0.12 N on a mean 2.45 N). MuJoCo itself spreads over 0.281..0.295 m in x and
  0.41..0.69 rad in yaw across impratio 1..1000, solref 0.002..0.02 and dt 1e-3..1e-4, so the
  tolerance there is that spread: 2.5 cm and 0.15 rad; the stop time agrees to 10 ms.
- A bounce at the same damping ratio leaves at the same speed (0.3%); at the second, slower
  impact MuJoCo's impedance (gravity leaks through (1 - d) of it while the ball is in contact)
  costs it 10% more of the apex.
"""
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd

mujoco = pytest.importorskip("mujoco")
from test_mjcf import MODELS  # noqa: E402
from test_mjcf_constraints import FOUR_BAR, PENDULUM_PIN, _hard  # noqa: E402
from conftest import MUJOCO_SOLIMP, as_mujoco_models_it, bundled_mjcf  # noqa: E402

T_FINAL = 1.0

PENDULUMS = """<mujoco model="coupled_pendulums">
  <compiler angle="radian"/>
  <default><joint type="hinge" axis="0 1 0"/><geom type="capsule" size="0.02"/></default>
  <worldbody>
    <body name="left"><joint name="left"/><geom fromto="0 0 0 0 0 -0.4"/>
      <geom type="sphere" size="0.05" pos="0 0 -0.4"/></body>
    <body name="right" pos="0.5 0 0"><joint name="right"/><geom fromto="0 0 0 0.2 0 -0.3"/></body>
  </worldbody>
  <equality><joint joint1="right" joint2="left" polycoef="0 -0.8 {quadratic} 0 0"/></equality>
</mujoco>"""

MANIPULATOR = [p for p in MODELS if os.path.basename(p) == "manipulator.xml"]


def _pendulums(quadratic=0.3):
    return PENDULUMS.format(quadratic=quadratic)


def _compile(xml=None, path=None, integrator="semi_implicit_euler"):
    """MuJoCo's model, its equalities nearly hard and nothing else acting, energy on, the
    integrator asked for."""
    m = mujoco.MjModel.from_xml_string(xml) if xml else mujoco.MjModel.from_xml_path(path)
    _hard(m)
    m.opt.tolerance, m.opt.iterations = 1e-10, 100
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    m.opt.integrator = (mujoco.mjtIntegrator.mjINT_RK4 if integrator == "rk4"
                        else mujoco.mjtIntegrator.mjINT_EULER)
    return m


def _mujoco_constrained(m, q0, qd0):
    """mj_step for T_FINAL: qpos (T+1, nq), energy (T+1,), max |efc_pos| of the equality rows
    (T+1,), qvel (T+1, nv), at every step."""
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q0, qd0
    steps = int(round(T_FINAL / m.opt.timestep))
    qpos, energy, violation, qvel = [], [], [], []
    for k in range(steps + 1):
        if k:
            mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)  # the energy and efc_pos of this state
        qpos.append(d.qpos.copy())
        qvel.append(d.qvel.copy())
        energy.append(d.energy.sum())
        violation.append(np.abs(d.efc_pos[:d.ne]).max())
    return np.array(qpos), np.array(energy), np.array(violation), np.array(qvel)


def _null_space_velocity(model, q, rng, scale=2.0):
    J = np.asarray(sd.constraint_jacobian(model, q))
    _, s, Vt = np.linalg.svd(J)
    rank = int(np.sum(s > 1e-9 * s[0]))
    qd = Vt[rank:].T @ rng.normal(size=model.nv - rank)
    return scale * qd / np.abs(qd).max()


def _start(name, m, model):
    """(q0, qd0) on the constraints."""
    if name == "four_bar":  # the loop is closed at qpos0 (the anchor is placed there)
        return m.qpos0.copy(), np.zeros(m.nv)
    if name == "pendulums":  # right = -0.8 left + 0.3 left^2
        return np.array([1.2, -0.8 * 1.2 + 0.3 * 1.2 ** 2]), np.zeros(m.nv)
    if name == "site_pin":  # the tip is off the pin at qpos0
        return np.asarray(sd.constraints.project(model, m.qpos0)), np.zeros(m.nv)
    # manipulator: its arm stands upright (an equilibrium): thrown along the fingers' coupling
    return m.qpos0.copy(), _null_space_velocity(model, m.qpos0, np.random.default_rng(1))


# (scene, integrator): tolerances (violation: the larger of the two, m or rad; energy: of the
# energy exchanged; pose: final max |q_mujoco - q_screwdyn|); measured values in the docstring
CASES = {
    ("four_bar", "semi_implicit_euler"): dict(violation=5e-3, energy=5e-4, pose=1.5e-3),
    ("four_bar", "rk4"): dict(violation=1e-5, energy=5e-4, pose=1.5e-3),
    ("pendulums", "semi_implicit_euler"): dict(violation=2e-2, energy=3e-3, pose=1e-2),
    ("pendulums", "rk4"): dict(violation=2e-2, energy=3e-3, pose=1e-2),
    ("site_pin", "semi_implicit_euler"): dict(violation=5e-3, energy=1e-4, pose=1.5e-4),
    ("manipulator", "semi_implicit_euler"): dict(violation=5e-5, energy=1e-5, pose=3e-4),
}


@pytest.mark.parametrize("name,integrator", list(CASES), ids=[f"{n}-{i}" for n, i in CASES])
def test_constrained_trajectory_follows_mujoco(name, integrator):
    """1 s from rest (the manipulator: thrown) on the constraints: both stay on them, the
    energies move alike, the final poses agree (the table in the module docstring)."""
    tol = CASES[name, integrator]
    if name == "manipulator":
        if not MANIPULATOR:
            pytest.skip("dm_control is not installed")
        m = _compile(path=MANIPULATOR[0], integrator=integrator)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.InertiaWarning)
            model = sd.load_mjcf(MANIPULATOR[0])
    else:
        xml = {"four_bar": FOUR_BAR, "pendulums": _pendulums(), "site_pin": PENDULUM_PIN}[name]
        m = _compile(xml, integrator=integrator)
        model = sd.from_mujoco(m)
    q0, qd0 = _start(name, m, model)
    assert np.abs(np.asarray(sd.constraint_residual(model, q0))).max() < 1e-12
    qpos, energy, mj_violation, _ = _mujoco_constrained(m, q0, qd0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ConstraintWarning)  # the four-bar's rank-2 rows
        traj = sd.simulate(model, q0, qd0, None, T_FINAL, m.opt.timestep, integrator=integrator)
    assert traj.q.shape == qpos.shape
    violation = np.array([np.abs(np.asarray(sd.constraint_residual(model, q))).max()
                          for q in traj.q])
    # on the constraints, both
    assert mj_violation.max() < tol["violation"] and violation.max() < tol["violation"]
    if integrator == "semi_implicit_euler" and name in ("four_bar", "site_pin"):
        # the integrator's own violation, the same in both (0.2%)
        assert violation.max() == pytest.approx(mj_violation.max(), rel=0.02)
    if integrator == "rk4" and name != "pendulums":
        assert violation.max() < 1e-7  # hard: only the integrator's truncation
    # the energies move alike
    ours = traj.kinetic + traj.potential
    exchanged = np.ptp(traj.potential)
    difference = np.abs((energy - energy[0]) - (ours - ours[0])).max() / exchanged
    assert difference < tol["energy"]
    if integrator == "rk4":  # and screwdyn's is conserved
        assert np.ptp(ours) / exchanged < 1e-5
    # the same motion: the final poses (quaternions of ball joints in MuJoCo's order, w first)
    motion = np.ptp(qpos, axis=0).max()
    assert motion > 0.4
    final = np.abs(qpos[-1] - traj.q[-1]).max()
    assert final < tol["pose"]
    print(f"{name} {integrator}: violation MuJoCo {mj_violation.max():.2g} screwdyn "
          f"{violation.max():.2g}; energy {difference:.2g} of {exchanged:.3g} J; final pose "
          f"{final:.2g} (motion {motion:.3g})")


@pytest.mark.parametrize("damped", [False, True], ids=["undamped", "damped"])
@pytest.mark.parametrize("name", ["four_bar", "site_pin", "manipulator"])
def test_soft_constrained_trajectory_is_mujocos(name, damped):
    """With soft_equalities=True (MuJoCo's solimp and approximate inverse weights), 1 s of
    semi-implicit Euler equals mj_step's Euler to 1e-9 (4e-12 measured, the manipulator's
    tendon coupling included), on numpy and native code: the constraints are MuJoCo's, the
    same violation (5e-4, 2e-3, 4e-3 m or rad) and the same motion, not only close to it.
    Damped (0.05 N m s/rad on every joint, joint_damping=True), alike: both integrate the
    damping implicitly after finding the constraint forces without it (MuJoCo's Euler)."""
    if name == "manipulator":
        if not MANIPULATOR:
            pytest.skip("dm_control is not installed")
        m = _compile(path=MANIPULATOR[0])
    else:
        m = _compile({"four_bar": FOUR_BAR, "site_pin": PENDULUM_PIN}[name])
    m.eq_solimp[:] = MUJOCO_SOLIMP  # _compile made them nearly hard
    if damped:
        m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_DAMPER)
        m.dof_damping[:] = 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        model = sd.from_mujoco(m, soft_equalities=True, joint_damping=damped)
    q0, qd0 = _start(name, m, model)
    qpos, _, violation, _ = _mujoco_constrained(m, q0, qd0)
    assert violation.max() > 1e-4  # soft: MuJoCo's constraints give
    for backend in ("numpy", "native"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.ConstraintWarning)
            traj = sd.simulate(model, q0, qd0, None, T_FINAL, m.opt.timestep, backend=backend,
                               integrator="semi_implicit_euler")
        np.testing.assert_allclose(traj.q, qpos, rtol=0, atol=1e-9, err_msg=backend)


def test_linear_joint_coupling_is_held_by_mujoco_too():
    """The pendulums' larger violation in MuJoCo is the dJ/dt qd it leaves out of a joint
    equality: with a linear polycoef (no curvature term) it holds the coupling to 1e-6 (RK4);
    with the quadratic one its stabilisation holds the missing poly''(x) x'^2 at a violation of
    poly'' x'^2 timeconst^2 (critically damped: the static offset of k = 1 / timeconst^2)."""
    m = _compile(_pendulums(quadratic=0.0), integrator="rk4")
    _, _, violation, _ = _mujoco_constrained(m, [1.2, -0.96], np.zeros(2))
    assert violation.max() < 3e-6  # 9.5e-7 measured
    curved = _compile(_pendulums(), integrator="rk4")
    _, _, violation, qvel = _mujoco_constrained(curved, [1.2, -0.8 * 1.2 + 0.3 * 1.44],
                                                np.zeros(2))
    estimate = 2 * 0.3 * np.max(qvel[:, 0] ** 2) * 0.02 ** 2
    assert violation.max() == pytest.approx(estimate, rel=0.1)  # 8.5e-3 and 8.7e-3


# -- contact ----------------------------------------------------------------------------------
MU, DT = 0.5, 1e-3
SCENE = """<mujoco model="{name}">
  <option timestep="{dt}" cone="elliptic" impratio="10"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" friction="{mu} 0.005 0.0001" solref="{solref}"/>
    <body name="{name}" pos="{pos}"><freejoint name="free"/>
      <geom type="{shape}" size="{size}" mass="1" friction="{mu} 0.005 0.0001" solref="{solref}"/>
    </body>
  </worldbody></mujoco>"""
BOX = dict(name="box", pos="0 0 0.05", shape="box", size="0.1 0.1 0.05")  # 0.2 x 0.2 x 0.1 m
SPHERE = dict(name="ball", pos="0 0 1", shape="sphere", size="0.1")
CORNERS = [(sx * 0.1, sy * 0.1, sz * 0.05) for sx in (-1, 1) for sy in (-1, 1)
           for sz in (-1, 1)]


def _mujoco_contact(body, qvel0, solref="0.02 1"):
    """MuJoCo's scene (its default soft contact) and mj_step's qpos, qvel (T+1, .)."""
    m = mujoco.MjModel.from_xml_string(SCENE.format(mu=MU, dt=DT, solref=solref, **body))
    d = mujoco.MjData(m)
    d.qvel[:] = qvel0
    qpos, qvel = [d.qpos.copy()], [d.qvel.copy()]
    for _ in range(int(round(T_FINAL / DT))):
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
        qvel.append(d.qvel.copy())
    return m, np.array(qpos), np.array(qvel)


def _stopped(t, speed, below):
    """The time after which ``speed`` stays below ``below``."""
    moving = np.flatnonzero(speed >= below)
    return t[moving[-1] + 1]


def _yaw(q):
    return 2 * np.arctan2(q[..., 6], q[..., 3])


@pytest.mark.parametrize("qvel0", [[2.0, 0, 0, 0, 0, 0], [1.5, 1.0, 0, 0, 0, 4.0]],
                         ids=["straight", "spinning"])
def test_sliding_box_follows_mujoco(qvel0):
    """The box launched along the ground: slide distance, time to stop, resting height (the
    module docstring's table)."""
    m, qpos, qvel = _mujoco_contact(BOX, qvel0)
    model = sd.from_mujoco(m)
    contact = sd.RigidContact(mu=MU, timeconst=0.02, dampratio=1, points={"box": CORNERS})
    traj = sd.simulate(model, qpos[0], qvel0, None, T_FINAL, DT, contact=contact,
                       integrator="semi_implicit_euler")
    t = traj.t
    assert np.allclose(t, np.arange(len(qpos)) * DT)
    speed_mj, speed = np.linalg.norm(qvel[:, :2], axis=1), np.linalg.norm(traj.qd[:, :2], axis=1)
    stop_mj, stop = _stopped(t, speed_mj, 1e-3), _stopped(t, speed, 1e-3)
    # at rest: MuJoCo's box inside the ground (solimp), screwdyn's on it
    assert 50e-6 < 0.05 - qpos[-1, 2] < 200e-6
    assert abs(traj.q[-1, 2] - 0.05) < 1e-6
    assert np.abs(traj.qd[-1]).max() < 1e-6 and np.abs(qvel[-1]).max() < 1e-3
    # MuJoCo's box rocks on its soft front edge while it slides; screwdyn's does not tilt
    assert np.abs(qpos[:, 4:6]).max() > 1e-3 and np.abs(traj.q[:, 4:6]).max() < 1e-8
    print(f"slide: MuJoCo {qpos[-1, :2]} yaw {_yaw(qpos[-1]):.4f} stops at {stop_mj:.3f} s; "
          f"screwdyn {traj.q[-1, :2]} yaw {_yaw(traj.q[-1]):.4f} at {stop:.3f} s")
    if qvel0[5] == 0:
        # Coulomb's mu m g in both: the same distance to 1e-4 of it, and of v^2 / (2 mu g)
        assert traj.q[-1, 0] == pytest.approx(qpos[-1, 0], rel=5e-4)
        assert traj.q[-1, 0] == pytest.approx(4.0 / (2 * MU * 9.81), rel=3e-3)
        assert np.abs(traj.q[:, 1]).max() < 1e-6 and np.abs(qpos[:, 1]).max() < 1e-6
        assert np.abs(traj.q[:, 0] - qpos[:, 0]).max() < 1e-3  # all along
        assert _stopped(t, speed, 0.1) == pytest.approx(_stopped(t, speed_mj, 0.1), abs=3e-3)
        assert stop == pytest.approx(stop_mj, abs=6e-3)
    else:
        # the corners' share of the weight is the solvers' (see the docstring): MuJoCo's own
        # spread over its parameters
        assert np.abs(traj.q[-1, :2] - qpos[-1, :2]).max() < 2.5e-2
        assert abs(_yaw(traj.q[-1]) - _yaw(qpos[-1])) < 0.15
        assert stop == pytest.approx(stop_mj, abs=1.5e-2)


def _landings(t, z):
    return np.array([t[i] for i in range(1, len(z)) if z[i] < 0.1 <= z[i - 1]])


def _apexes(z, vz):
    """Heights above contact (the centre above its radius) where the ball turns down in the
    air."""
    return np.array([z[i] - 0.1 for i in range(1, len(z))
                     if vz[i - 1] > 0 >= vz[i] and z[i] > 0.1])


@pytest.mark.parametrize("dampratio", [1.0, 0.3], ids=["landing", "bouncing"])
def test_dropped_sphere_follows_mujoco(dampratio):
    """The 1 kg sphere of 0.1 m dropped from 1 m (centre height): the same fall, the same
    impact, the same rebound at the same damping ratio (the module docstring's table)."""
    m, qpos, qvel = _mujoco_contact(SPHERE, np.zeros(6), solref=f"0.02 {dampratio}")
    model = sd.from_mujoco(m)
    contact = sd.RigidContact(mu=MU, timeconst=0.02, dampratio=dampratio,
                              points=[sd.ContactPoint("ball", (0, 0, 0), 0.1)])
    traj = sd.simulate(model, qpos[0], np.zeros(6), None, T_FINAL, DT, contact=contact,
                       integrator="semi_implicit_euler")
    z_mj, z = qpos[:, 2], traj.q[:, 2]
    land = int(np.argmax(z < 0.1))
    # the fall: the same integrator, the same free flight, to rounding
    assert land == int(np.argmax(z_mj < 0.1)) and _close(z[:land + 1], z_mj[:land + 1])
    impact = traj.qd[land, 2]
    assert impact == pytest.approx(qvel[land, 2], rel=1e-9)
    # the impact: both sink (timeconst 0.02 s at 4.2 m/s: 29 mm at dampratio 1, 16 mm at 0.3,
    # the stabilisation's spring), within 0.1 mm of each other (measured 0.04 mm)
    assert abs(z.min() - z_mj.min()) < 2e-4 and 0.06 < z.min() < 0.09
    # the rebound speed
    assert traj.qd[:, 2].max() == pytest.approx(qvel[:, 2].max(), rel=1e-2)
    if dampratio == 1.0:  # no bounce in either; rest: MuJoCo 0.37 mm inside, screwdyn on it
        assert len(_apexes(z, traj.qd[:, 2])) == 0 and len(_apexes(z_mj, qvel[:, 2])) == 0
        assert abs(z[-1] - 0.1) < 1e-6
        assert 0.2e-3 < 0.1 - z_mj[-1] < 0.6e-3
    else:
        apex, apex_mj = _apexes(z, traj.qd[:, 2]), _apexes(z_mj, qvel[:, 2])
        assert len(apex) == len(apex_mj) == 2
        assert apex[0] == pytest.approx(apex_mj[0], rel=1e-2)  # 0.3% measured
        assert apex[1] == pytest.approx(apex_mj[1], rel=0.25)  # 11%: MuJoCo's impedance
        landings, landings_mj = _landings(traj.t, z), _landings(traj.t, z_mj)
        assert landings[1] == pytest.approx(landings_mj[1], abs=3e-3)
        print(f"apexes MuJoCo {apex_mj}, screwdyn {apex}")


def _close(a, b):
    return np.abs(a - b).max() < 1e-12


def _stepped(m, d, steps):
    """(steps + 1, nq): mj_step's qpos, ``steps`` steps of ``m`` from ``d``'s state."""
    qpos = [d.qpos.copy()]
    for _ in range(steps):
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
    return np.array(qpos)


@pytest.mark.parametrize("package,name,iterations,atol", [
    ("gymnasium", "ant", 200, 1e-9), ("gymnasium", "half_cheetah", 200, 1e-9),
    ("gymnasium", "walker2d_v5", 200, 1e-9), ("dm_control", "cheetah", 200, 1e-9),
    ("dm_control", "hopper", 200, 1e-9), ("dm_control", "manipulator", 200, 1e-8),
    pytest.param("dm_control", "stacker", 1000, 1e-7, marks=pytest.mark.slow),
    pytest.param("dm_control", "humanoid", 1000, 1e-7, marks=pytest.mark.slow)])
def test_mujocos_models_as_mujoco_models_them(package, name, iterations, atol):
    """A bundled robot falling onto its floor and its stops (no control), 1 s of semi-implicit
    Euler at 1 ms, equals mj_step's Euler to 1e-9 (8e-12 measured: the ant; 4e-12 the dm
    hopper; 1e-14 the cheetahs and the walker), given what MuJoCo models: the file's soft
    contacts (each pair's solref, solimp and its two geoms' margins added), its pyramidal cone
    (cone="pyramidal", the edges along MuJoCo's contact frames: a capsule standing on the
    floor included), MuJoCo's approximate inverse weights (invweight0=True), a contact or a
    limit entering the solve where MuJoCo's does (margin=0), its joints' solreflimit and
    solimplimit (RigidLimits.from_mjcf), damping, stiffness and armature, the damping
    implicit after the constraint forces (MuJoCo's Euler), 200 sweeps.

    dm_control's manipulator and stacker ask for MuJoCo's elliptic cone (cone="convex": each
    contact's normal and friction one convex problem): the manipulator's peg lands on its
    slot's box and its ball on the floor, equal to 1e-8 (7e-10 measured); the stacker's
    four boxes land on its walls, the floor and each other, equal to 1e-7 with 1,000 sweeps
    (4.5e-8 measured, 9e-10 at 1 s; 200 leave two sliding corners of one box 2e-5 apart:
    projected Gauss-Seidel's convergence, where MuJoCo's Newton solver converges in a few
    steps).

    dm_control's humanoid falls, lands on its feet (two capsules each, two contacts a
    capsule), bends its knees onto their limits and folds: equal to 1e-7 with 1,000 sweeps
    (5.3e-8 measured; 200 leave its eight foot contacts on two bodies 3e-6 apart at the
    landing). Its bodies have up to three joints, so MuJoCo's parent filter is between its
    bodies, not between a link and the one before it: before that was so, its arms pressed
    on its torso and it left mj_step's by 0.8 rad."""
    m, run = as_mujoco_models_it(package, name, iterations)
    qpos = _stepped(m, mujoco.MjData(m), 1000)
    traj = sd.simulate(run["model"], run["q0"], t_final=1.0, dt=1e-3, contact=run["contact"],
                       joint_limits=run["joint_limits"], joint_friction=run["joint_friction"],
                       integrator="semi_implicit_euler")
    assert np.ptp(qpos, axis=0).max() > 0.05  # it moves: lands, bends, settles
    np.testing.assert_allclose(traj.q, qpos, rtol=0, atol=atol)


@pytest.mark.slow
def test_quadrupeds_coupled_legs_land_as_mujocos_at_another_step():
    """dm_control's quadruped, whose legs are coupled by four soft tendon equalities of
    solref 0.005 s in a file of 5 ms steps, lands on its four toes at 1 ms as mj_step does at
    1 ms, to 2e-9 over 0.65 s (3e-10 measured); then the ball dropped onto its back lands on
    its ellipsoid torso, bounces off, and the torso settles on the floor (its ellipsoid on the
    plane): to 1e-4 over 1 s (1.7e-5 measured; the ball's condim 6: its torsional and
    rolling friction, the pyramid's twist edges, converge slowly: 1,000 sweeps against
    MuJoCo's Newton solver run to 1e-15, where 200 sweeps and MuJoCo's default tolerance leave
    7.9e-4; the differences of the ellipsoid's normal, 1e-6, grow with the ball's spin).
    MuJoCo's refsafe makes a time constant at least
    2 steps of the step it runs: 0.005 s here, where the file's 5 ms would make it 0.01 s;
    taken at the file's step, the legs leave mj_step's by 1e-4 rad or more in the first 30 ms
    of contact (2.4e-3 measured)."""
    path = bundled_mjcf("dm_control", "quadruped")
    if path is None:
        pytest.skip("dm_control is not installed")
    m = mujoco.MjModel.from_xml_path(path)
    assert m.opt.timestep == 0.005 and np.all(m.eq_solref[:, 0] == 0.005)
    m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION  # its servos: no control
    ball = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "ball")
    assert m.geom_condim[ball] == 6
    m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    qpos = _stepped(m, mujoco.MjData(m), 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations in the file, MuJoCo's own
        robot = sd.load_mjcf(path, joint_damping=True, joint_springs=True,
                             joint_friction=True, soft_equalities=True)
    assert [c.timeconst for c in robot.constraints] == [0.005] * 4
    assert all(c.refsafe for c in robot.constraints)
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
    runs = []
    for model, t_final in ((robot, 1.0), (robot.at_step(0.005), 0.15)):  # the step's, the file's
        scene = sd.Scene("quadruped")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its height field
            scene.add_robot(model)
            built, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                             iterations=1000)
        runs.append(sd.simulate(built, q0, t_final=t_final, dt=1e-3, contact=contact,
                                joint_limits=limits, integrator="semi_implicit_euler").q)
    assert np.ptp(qpos[:, 2]) > 0.2  # it falls onto its toes and bends its legs
    assert qpos[:, -5].min() < 0.7 and qpos[-1, -5] > 0.8  # the ball lands on it, bounces off
    np.testing.assert_allclose(runs[0][:651], qpos[:651], rtol=0, atol=2e-9)
    np.testing.assert_allclose(runs[0], qpos, rtol=0, atol=1e-4)
    assert np.abs(runs[1][:130] - qpos[:130]).max() > 1e-4


ON_ELLIPSOID = """<mujoco><option timestep="0.001" integrator="Euler"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="shell" pos="0 0 0.5" euler="10 20 30"><freejoint/>
      <geom type="ellipsoid" size="0.3 0.27 0.2" condim="1" mass="10"/></body>
    <body name="drop" pos="0.05 0.03 1.1" euler="30 40 0"><freejoint/>
      <geom {shape} condim="3" friction="0.7" mass="1"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("shape", ['type="sphere" size="0.15"', 'type="capsule" size="0.1 0.15"'],
                         ids=["sphere", "capsule"])
def test_bodies_on_a_free_ellipsoid_follow_mujoco(tmp_path, shape):
    """A free ellipsoid falls onto the floor (its support point: MuJoCo's own contact) and a
    sphere or a capsule dropped on it bounces and rolls off it (the least signed distance of
    the centre or the segment, one contact, as MuJoCo's general convex solver gives): 1 s
    of mj_step to 2e-5 (2.3e-6 and 3.4e-6 measured). The contacts are MuJoCo's to 1e-10 m in
    depth, but its solver's normal on the curved surface is good to ~1e-6 (ours is exact:
    test_collision), which moves each bounce by about that much."""
    path = tmp_path / "ellipsoid.xml"
    path.write_text(ON_ELLIPSOID.format(shape=shape))
    m = mujoco.MjModel.from_xml_path(str(path))
    qpos = _stepped(m, mujoco.MjData(m), 1000)
    assert qpos[:, 9].min() < 0.5 and qpos[:, 2].min() < 0.21  # it lands on it, it on the floor
    scene = sd.Scene("ellipsoid")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                     iterations=200)
    kinds = {tuple(sorted(x.shape.kind for x in (a, b) if x is not None))
             for a, _, b, _ in contact.resolve(model).pairs}  # the ground's: (kind,)
    dropped = "sphere" if "sphere" in shape else "capsule"
    assert ("ellipsoid",) in kinds and tuple(sorted(("ellipsoid", dropped))) in kinds
    traj = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.q, qpos, rtol=0, atol=2e-5)


@pytest.mark.parametrize("shape,bound", [('type="ellipsoid" size="0.15 0.1 0.08"', 1e-6),
                                         ('type="box" size="0.12 0.1 0.08"', 1e-5),
                                         ('type="cylinder" size="0.1 0.08"', 1e-6)],
                         ids=["ellipsoid", "box", "cylinder"])
def test_solids_on_a_free_ellipsoid_follow_mujoco(tmp_path, shape, bound):
    """An ellipsoid, a box or a cylinder dropped on a free ellipsoid that falls on the floor:
    their contact is the direction of least overlap (one contact, as MuJoCo's general convex
    solver gives). Against mj_step with that solver run to 1e-12 (ccd_tolerance; 1,000
    iterations), 1 s to 1e-6, the box to 1e-5 (1.3e-7, 2.0e-6, 6.5e-8 measured); MuJoCo at
    its default tolerance (1e-6) leaves its own tight run by 1.2e-4, 9.3e-3 and 2.6e-3."""
    path = tmp_path / "ellipsoid.xml"
    path.write_text(ON_ELLIPSOID.format(shape=shape))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.ccd_tolerance, m.opt.ccd_iterations = 1e-12, 1000
    qpos = _stepped(m, mujoco.MjData(m), 1000)
    assert qpos[:, 9].min() < 0.45  # it lands on the ellipsoid
    scene = sd.Scene("ellipsoid")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                     iterations=200)
    kinds = {tuple(sorted(x.shape.kind for x in (a, b) if x is not None))
             for a, _, b, _ in contact.resolve(model).pairs}
    dropped = shape.split('"')[1]
    assert tuple(sorted(("ellipsoid", dropped))) in kinds
    traj = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.q, qpos, rtol=0, atol=bound)


REFSAFE_BALL = """<mujoco><option timestep="{file_dt}" integrator="Euler">{flag}</option>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1" solref="0.002 1"/>
    <body name="ball" pos="0 0 0.3"><freejoint/>
      <geom type="sphere" size="0.1" mass="1" solref="{solref} 0.8"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("file_dt,dt,flag,solref", [
    (0.001, 0.004, "", 0.002), (0.001, 0.004, '<flag refsafe="disable"/>', 0.02),
    (0.01, 0.001, "", 0.002)], ids=["longer_step", "refsafe_disabled", "shorter_step"])
def test_contact_refsafe_takes_the_simulations_step(tmp_path, file_dt, dt, flag, solref):
    """A ball thrown onto a floor whose pair mixes two geoms' solrefs (0.002 s and the
    ball's): MuJoCo makes the mixed time constant at least 2 steps of the step it runs
    (refsafe), whatever the file's timestep. Scene.build takes refsafe from the file (on,
    unless ``<flag refsafe="disable"/>``), and the run at another step than the file's is
    mj_step's at that step to 1e-10 m over 1 s (1,000 sweeps; 3e-13 measured): at 4 ms the
    pair's 0.002 s becomes 0.008 s (without refsafe, a time constant shorter than the step,
    the run warns that dt is too large and the ball bounces off, metres away), with refsafe
    disabled its mixed 0.011 s stays, and at 1 ms in a file of 10 ms the pair keeps its
    0.002 s."""
    path = tmp_path / "ball.xml"
    path.write_text(REFSAFE_BALL.format(file_dt=file_dt, flag=flag, solref=solref))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.timestep = dt
    d = mujoco.MjData(m)
    d.qvel[0] = 0.5
    qpos = _stepped(m, d, int(round(1.0 / dt)))
    assert qpos[:, 2].min() < 0.1  # it lands
    scene = sd.Scene("ball")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                     iterations=1000)
    assert contact.solver.refsafe == (not flag)
    qd0 = [0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    traj = sd.simulate(model, q0, qd0, None, 1.0, dt, contact=contact,
                       integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.q, qpos, rtol=0, atol=1e-10)
    if file_dt < dt and not flag:
        _, unsafe, _ = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                   iterations=1000, refsafe=False)
        with pytest.warns(UserWarning, match="dt = 0.004 s is too large for the stiffness"):
            off = sd.simulate(model, q0, qd0, None, 1.0, dt, contact=unsafe,
                              integrator="semi_implicit_euler", energy_limit=None)
        assert np.abs(off.q - qpos).max() > 0.1
