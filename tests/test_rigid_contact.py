"""Rigid ground contact solved with the dynamics (issue 24 item 2): ``RigidContact`` against
Coulomb's closed forms (a sliding box, a box on a slope below and above its friction angle), a
box at rest that does not drift, a bounce with the restitution one sets, ANYmal dropped under PD
at 1 and 2 ms steps, the same numbers on every backend, and MuJoCo's own slide."""
import math
import os
import sys
from dataclasses import replace

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import collision

from conftest import MUJOCO_SOLIMP, bundled_mjcf, mujoco_impedance, soft_sink

G, MU, SPEED, HALF = 9.81, 0.5, 2.0, 0.1
CORNERS = [(sx * HALF, sy * HALF, sz * HALF) for sx in (-1, 1) for sy in (-1, 1)
           for sz in (-1, 1)]


def _box(mass=1.0):
    """A free 0.2 m cube (its eight corners the contact points)."""
    b = sd.ModelBuilder("cube")
    b.add_link("cube", mass=mass, inertia=np.eye(3) * mass * (2 * (2 * HALF) ** 2) / 12)
    return b.build(floating_base=True)


def _contact(**kw):
    return sd.RigidContact(**{"mu": MU, "points": {"cube": CORNERS}, **kw})


REST = np.array([0, 0, HALF, 0, 0, 0, 1.0])


def test_sliding_box_stops_where_coulomb_says():
    """From 2 m/s on the ground with mu = 0.5: it slides v^2 / (2 mu g) = 0.4077 m (the
    penalty GroundContact: 2.6% long), decelerating at mu g."""
    traj = sd.simulate(_box(), REST, [SPEED, 0, 0, 0, 0, 0], t_final=1.0, dt=1e-3,
                       contact=_contact(), integrator="semi_implicit_euler")
    distance = traj.q[-1, 0]
    assert distance == pytest.approx(SPEED ** 2 / (2 * MU * G), rel=5e-3)
    # it decelerates at mu g down to 0.1 m/s (below mu g / b = 5 cm/s the stabilisation's
    # damping b = 2 / timeconst, not the cone, stops it, within a few timeconst / 2)
    fast = np.flatnonzero(traj.qd[:, 0] > 0.1)
    assert traj.t[fast[-1]] == pytest.approx((SPEED - 0.1) / (MU * G), abs=2e-3)
    assert np.abs(traj.qd[traj.t > 0.5, 0]).max() < 1e-3
    # sliding, the friction is mu times the weight: the deceleration is mu g (once the tilt
    # the friction gives the box at the start, 0.2% of the normal force, has died out)
    slide = (traj.t > 0.15) & (traj.t < 0.35)
    assert np.abs(traj.qdd[slide, 0] + MU * G).max() < 1e-4 * G
    assert np.abs(traj.q[:, 2] - HALF).max() < 1e-4  # it neither sinks nor hops
    # sideways: the Gauss-Seidel sweep visits the corners in order, so a finite number of
    # sweeps leaves a small asymmetry (measured 14 um over the 0.41 m slide at 30 sweeps)
    assert np.abs(traj.q[:, 1]).max() < 1e-4


def test_box_at_rest_does_not_drift():
    """10 s at rest on the ground: no creep, no sinking, no rocking; the normal forces carry
    the weight."""
    traj = sd.simulate(_box(), REST, t_final=10.0, dt=1e-3, contact=_contact(),
                       integrator="semi_implicit_euler", record_contact_forces=True)
    # the first steps settle the forces from the warm start's zero (the sweeps not yet
    # converged on the four redundant corners: a few micrometres sideways, 62 um down, 2e-5
    # rad of tilt), then nothing moves: no creep, no sinking, no rocking over 1..10 s
    assert np.abs(traj.q[:, :2]).max() < 1e-5
    assert np.abs(traj.q[:, 2] - HALF).max() < 1e-4
    settled = traj.t >= 1.0
    assert np.abs(traj.q[settled, :3] - traj.q[settled][0, :3]).max() < 1e-12
    assert np.abs(traj.q[settled, 2] - HALF).max() < 1e-9
    assert np.abs(traj.q[:, 3:6]).max() < 1e-4  # rocking in the first steps, then none
    assert np.abs(traj.q[settled, 3:6] - traj.q[settled][0, 3:6]).max() < 1e-12
    assert traj.contact_force[-1, :, 2].sum() == pytest.approx(G, rel=1e-9)


@pytest.mark.parametrize("degrees", [0.0, 30.0, 45.0, 60.0])
def test_a_bar_slides_along_its_velocity(degrees):
    """A 0.6 x 0.1 x 0.1 m bar sent along the ground at 2 m/s, at an angle to its long axis:
    Coulomb's friction opposes the sliding, so it slides straight, without turning, and stops
    after v^2 / (2 mu g) (its eight corners' tangents are coupled and unequal: a step that
    differed between them slid it off at 62 deg when sent at 45, 16% too far)."""
    half = np.array([0.3, 0.05, 0.05])
    b = sd.ModelBuilder("bar")
    b.add_link("bar", mass=1.0, inertia=np.diag([half[[1, 2]] @ half[[1, 2]],
                                                 half[[0, 2]] @ half[[0, 2]],
                                                 half[[0, 1]] @ half[[0, 1]]]) / 3)
    corners = [tuple(half * (sx, sy, sz)) for sx in (-1, 1) for sy in (-1, 1)
               for sz in (-1, 1)]
    a = np.radians(degrees)
    traj = sd.simulate(b.build(floating_base=True), [0, 0, half[2], 0, 0, 0, 1],
                       [SPEED * np.cos(a), SPEED * np.sin(a), 0, 0, 0, 0], t_final=1.0,
                       dt=1e-3, contact=sd.RigidContact(mu=MU, points={"bar": corners}),
                       integrator="semi_implicit_euler")
    x, y = traj.q[-1, :2]
    assert np.degrees(np.arctan2(y, x)) == pytest.approx(degrees, abs=1e-9)
    assert np.hypot(x, y) == pytest.approx(SPEED ** 2 / (2 * MU * G), rel=5e-3)
    assert np.abs(traj.q[:, 3:6]).max() < 1e-9  # no turning, no tipping


@pytest.mark.parametrize("degrees", [20.0, 30.0])
def test_box_on_a_slope(degrees):
    """Gravity tilted by the slope's angle (the plane stays z = 0): below the friction angle
    (atan 0.5 = 26.6 degrees) it stands still, above it it slides at g (sin - mu cos)."""
    a = np.radians(degrees)
    gravity = (G * np.sin(a), 0.0, -G * np.cos(a))
    traj = sd.simulate(_box(), REST, t_final=2.0, dt=1e-3, contact=_contact(),
                       integrator="semi_implicit_euler", gravity=gravity)
    if degrees < 26.5:  # 50 um of slip while the first steps' forces settle, then no creep
        assert np.abs(traj.q[:, 0]).max() < 1e-4
        settled = traj.t >= 0.5
        assert np.abs(traj.q[settled, 0] - traj.q[settled][0, 0]).max() < 1e-12
    else:
        late = traj.t > 0.2
        expected = G * (np.sin(a) - MU * np.cos(a))
        assert np.abs(traj.qdd[late, 0] - expected).max() < 1e-6 * expected


def _sphere(radius=0.1):
    b = sd.ModelBuilder("ball")
    b.add_link("ball", mass=1.0, inertia=np.eye(3) * 0.4 * radius ** 2)
    return b.build(floating_base=True)


@pytest.mark.parametrize("restitution", [0.05, 0.3, 0.7])
def test_bounce_has_the_restitution_one_sets(restitution):
    """A ball dropped from 0.5 m (impact at 3.13 m/s) leaves the ground at e times that
    speed (gravity during the 10 ms contact adds about 1%)."""
    contact = sd.RigidContact(restitution=restitution, timeconst=0.005,
                              points=[sd.ContactPoint("ball", (0, 0, 0), 0.1)])
    traj = sd.simulate(_sphere(), [0, 0, 0.6, 0, 0, 0, 1], t_final=0.5, dt=1e-4,
                       contact=contact, integrator="rk4")
    vz = traj.qd[:, 2]
    impact = -vz[:np.argmax(vz > 0)].min()
    assert impact == pytest.approx(np.sqrt(2 * G * 0.5), rel=1e-3)
    assert vz.max() == pytest.approx(restitution * impact, rel=0.03)


def test_every_backend_and_batches_agree():
    model, contact = _box(), _contact(iterations=10)
    q0 = np.stack([REST, REST + [0, 0, 0.05, 0, 0, 0, 0]])
    qd0 = np.array([[SPEED, 0, 0, 0, 0, 0], [1.0, 0.5, 0, 0.3, 0, 0]])
    runs = {b: sd.simulate(model, q0, qd0, t_final=0.05, dt=1e-3, contact=contact, backend=b,
                           integrator="semi_implicit_euler") for b in ("native", "jax")}
    numpy = sd.simulate(model, q0, qd0, t_final=0.05, dt=1e-3, contact=contact,
                        backend="numpy", integrator="semi_implicit_euler")
    for b, traj in runs.items():
        assert traj.meta["backend"] == b
        np.testing.assert_allclose(traj.q, numpy.q, atol=1e-10)
    one = sd.simulate(model, q0[1], qd0[1], t_final=0.05, dt=1e-3, contact=contact,
                      integrator="semi_implicit_euler")
    np.testing.assert_allclose(one.q, runs["native"].q[1], atol=1e-12)


def test_slide_agrees_with_mujoco():
    """MuJoCo's own box (examples/contact_validation.py's scene: 0.2 x 0.2 x 0.1 m, mu 0.5,
    its default soft contact, elliptic cones) slides the same distance within 1%."""
    pytest.importorskip("mujoco")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
    import contact_validation as scenes

    qpos = scenes.mujoco_rollout(scenes.scene_file(scenes.BOX), [SPEED, 0, 0, 0, 0, 0], 1.0)
    model = scenes.box()
    contact = sd.RigidContact(mu=MU)
    q0 = np.r_[0, 0, 0.05, 0, 0, 0, 1.0]
    traj = sd.simulate(model, q0, [SPEED, 0, 0, 0, 0, 0], t_final=1.0, dt=1e-3,
                       contact=contact, integrator="semi_implicit_euler")
    assert traj.q[-1, 0] == pytest.approx(qpos[-1, 0] - qpos[0, 0], rel=0.01)


BALL = """<mujoco><option timestep="0.001" integrator="Euler"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1" solimp="0.9 0.9 0.001"/>
    <body name="ball" pos="0 0 0.3"><freejoint/>
      <geom type="sphere" size="0.1" mass="1" solimp="0.9 0.9 0.001"/></body>
  </worldbody></mujoco>"""


def _mujoco_heights(path, samples=2001):
    """The ball's height (qpos[2]) at each of ``samples`` steps of mj_step from the file's
    initial state (the first: before any step)."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    z = []
    for _ in range(samples):
        z.append(d.qpos[2])
        mujoco.mj_step(m, d)
    return z


def test_impedance_is_mujocos_soft_contact(tmp_path):
    """A ball dropped from 0.3 m with impedance 0.9 is MuJoCo's ball with solimp
    "0.9 0.9 0.001" (a constant impedance) to 1e-11 m over 2 s, its fall, its impact and its
    rest: it sags (1 - d) g timeconst^2 = 0.392 mm into the ground, where the rigid contact
    (d = 1) holds it on its radius."""
    path = tmp_path / "ball.xml"
    path.write_text(BALL)
    z = _mujoco_heights(path)
    scene = sd.Scene("ball")
    scene.add_robot(sd.load_mjcf(str(path)))
    for impedance, sag in ((0.9, 0.1 * G * 0.02 ** 2), (1.0, 0.0)):
        model, contact, q0 = scene.build(impedance=impedance)
        traj = sd.simulate(model, q0, t_final=2.0, dt=1e-3, contact=contact,
                           integrator="semi_implicit_euler")
        assert 0.1 - traj.q[-1, 2] == pytest.approx(sag, abs=1e-11)
        if impedance < 1:
            np.testing.assert_allclose(traj.q[:, 2], z, atol=1e-11)
    assert traj.energy_drift() < 5e-3


@pytest.mark.parametrize("solimp", [None, (0.8, 0.99, 0.005, 0.3, 3.0)])
def test_an_impedance_that_grows_with_depth_is_mujocos(tmp_path, solimp):
    """MuJoCo's impedance rises with the penetration, from solimp's dmin to dmax over its
    width (a sigmoid of its midpoint and power). A ball dropped from 0.3 m with MuJoCo's
    default solimp (0.9, 0.95, 0.001, 0.5, 2), or (0.8, 0.99, 0.005, 0.3, 3), is mj_step's to
    1e-9 m over 2 s, its fall, its impact and its rest: the file's geoms' solimp read by
    Scene.build, and RigidContact(impedance=solimp) on the ground the same. At rest it sinks
    the depth where the compliance holds its weight (``conftest.soft_sink``, to 1e-9 m:
    0.367 mm with the default, where a constant 0.9 sinks 0.392 mm). JAX and native code (the
    sigmoid traced) equal numpy."""
    text = BALL.replace(' solimp="0.9 0.9 0.001"', "")
    if solimp is not None:
        given = f'solimp="{" ".join(map(str, solimp))}"'
        text = text.replace('mass="1"', f'mass="1" {given}')
        text = text.replace('size="5 5 0.1"', f'size="5 5 0.1" {given}')
    path = tmp_path / "ball.xml"
    path.write_text(text)
    z = _mujoco_heights(path)
    given = solimp or (0.9, 0.95, 0.001, 0.5, 2.0)
    sink = soft_sink(G, 0.02, given)
    model = sd.load_mjcf(str(path))
    scene = sd.Scene("ball")
    scene.add_robot(model)
    scene_model, scene_contact, q0 = scene.build()
    ground = sd.RigidContact(impedance=given, points=[sd.ContactPoint("ball", radius=0.1)])
    runs = {}
    for name, (mdl, contact) in {"scene": (scene_model, scene_contact),
                                 "ground": (model, ground)}.items():
        for backend in ("numpy", "native", "jax"):
            t_final = 2.0 if backend != "jax" else 0.3
            runs[name, backend] = sd.simulate(mdl, q0, t_final=t_final, dt=1e-3,
                                              contact=contact, backend=backend,
                                              integrator="semi_implicit_euler").q[:, 2]
    for (name, backend), q in runs.items():
        np.testing.assert_allclose(q, z[:len(q)], atol=1e-9, err_msg=f"{name}, {backend}")
        np.testing.assert_allclose(q, runs[name, "numpy"][:len(q)], atol=1e-12)
    assert 0.1 - runs["scene", "numpy"][-1] == pytest.approx(sink, abs=1e-9)
    assert scene_contact.resolve(scene_model).describe(
        scene_contact.resolve(scene_model).params())["impedance"] == list(given)


def _mj_qpos(m, qpos=None, qvel=None, force=None, steps=1000):
    """mj_step's qpos (steps + 1, nq) of MuJoCo's model m from qpos, qvel (default its
    qpos0 and rest) under the joint forces ``force`` (qfrc_applied), the first before any
    step."""
    import mujoco

    d = mujoco.MjData(m)
    for value, field in ((qpos, d.qpos), (qvel, d.qvel), (force, d.qfrc_applied)):
        if value is not None:
            field[:len(value)] = value
    out = [d.qpos.copy()]
    for _ in range(steps):
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
    return np.array(out)


PUCK = """<mujoco><option timestep="0.001" integrator="Euler" cone="elliptic" impratio="{ratio}"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1" friction="0.5"/>
    <body name="puck" pos="0 0 0.1">
      <joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="1" friction="0.5"/></body>
  </worldbody></mujoco>"""


def _pushed_puck(tmp_path, impratio, push):
    """(scene, contact, q0, controller, mj_step's qpos (1001, 3)): PUCK's scene with the
    file's impratio, the puck at its soft rest depth (``soft_sink``), pushed along x by
    ``push`` (N) for 1 s, and MuJoCo's run of the same."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "puck.xml"
    path.write_text(PUCK.format(ratio=impratio))
    q0 = np.array([0.0, 0.0, -soft_sink(G)])
    expected = _mj_qpos(mujoco.MjModel.from_xml_path(str(path)), q0, force=[push])
    scene = sd.Scene("puck")
    scene.add_robot(sd.load_mjcf(str(path)))
    tau = np.array([push, 0.0, 0.0])
    return scene, scene.build()[1], q0, lambda t, q, qd: tau, expected


@pytest.mark.parametrize("impratio", [1.0, 10.0])
def test_a_soft_contacts_friction_creeps_as_mujocos(tmp_path, impratio):
    """A soft contact's friction is soft too, as MuJoCo's (its tangential rows' compliance the
    normal's over ``impratio``, elliptic cones): a 1 kg puck on three slides, at its soft rest
    depth on the floor, pushed along x by 2 N (below mu m g = 4.9 N) sticks and creeps at the
    velocity where the compliance holds the push, v = (1 - d) / d / impratio (F / m) / b
    (b = 2 / (dmax timeconst); d the impedance at the rest depth), to 1e-9 relative; its
    motion is mj_step's (the file's impratio, 1 or 10) to 1e-9 m over 1 s, on numpy, native
    code and JAX; RigidContact(impratio=...) on the ground is the same; impratio=inf is rigid
    friction: the puck does not move (on the ground, and in the scene rebuilt with it: its
    native program is not the soft friction's)."""
    scene, contact, q0, push, expected = _pushed_puck(tmp_path, impratio, 2.0)
    model = scene.build()[0]
    assert contact.solver.impratio == impratio  # the file's
    ground = sd.RigidContact(mu=0.5, impedance=MUJOCO_SOLIMP, impratio=impratio,
                             points=[sd.ContactPoint("puck", radius=0.1)])
    runs = {}
    for name, c in (("scene", contact), ("ground", ground)):
        for backend in ("numpy", "native", "jax"):
            t_final = 1.0 if backend != "jax" else 0.2
            runs[name, backend] = traj = sd.simulate(
                model, q0, None, push, t_final, 1e-3, contact=c, backend=backend,
                integrator="semi_implicit_euler")
            np.testing.assert_allclose(traj.q, expected[:len(traj.q)], rtol=0, atol=1e-9,
                                       err_msg=f"{name}, {backend}")
    sink = -q0[2]
    impedance = mujoco_impedance(sink, MUJOCO_SOLIMP)
    creep = (1 - impedance) / impedance / impratio * 2.0 / (2 / (MUJOCO_SOLIMP[1] * 0.02))
    assert runs["scene", "numpy"].qd[-1, 0] == pytest.approx(creep, rel=1e-9)
    for rigid in (replace(ground, impratio=math.inf), scene.build(impratio=math.inf)[1]):
        held = sd.simulate(model, q0, None, push, 1.0, 1e-3, contact=rigid, backend="native",
                           integrator="semi_implicit_euler")
        assert np.abs(held.q[:, 0]).max() < 1e-12


def test_a_soft_contact_slides_as_coulomb_says(tmp_path):
    """Pushed by 6 N (above mu m g = 4.9 N), the soft puck slides at Coulomb's (F - mu m g) / m
    and stays at its rest depth, on every backend. MuJoCo's convex soft cone lifts a sliding
    body (its puck leaves the floor by up to 0.39 mm and slides 1% faster at 1 s): the two
    agree within 2% in speed; with cone="convex" (MuJoCo's elliptic cone) the puck lifts and
    slides as mj_step's, to 1e-9 m over 1 s."""
    scene, contact, q0, push, expected = _pushed_puck(tmp_path, 1.0, 6.0)
    model, speeds = scene.build()[0], {}
    for backend in ("numpy", "native", "jax"):
        traj = sd.simulate(model, q0, None, push, 1.0 if backend != "jax" else 0.2, 1e-3,
                           contact=contact, backend=backend, integrator="semi_implicit_euler")
        np.testing.assert_allclose(np.diff(traj.qd[:, 0]), (6.0 - MU * G) * 1e-3, rtol=1e-9,
                                   err_msg=backend)
        np.testing.assert_allclose(traj.q[:, 2], q0[2], rtol=0, atol=1e-12, err_msg=backend)
        speeds[backend] = traj.qd[-1, 0]
    assert speeds["numpy"] == pytest.approx(6.0 - MU * G, rel=1e-9)  # 1.095 m/s at 1 s
    assert 1e-4 < expected[:, 2].max() < 1e-3  # MuJoCo's lifts off the floor: 0.39 mm
    mujoco_speed = (expected[-1, 0] - expected[-2, 0]) / 1e-3  # semi-implicit Euler: qd
    assert mujoco_speed == pytest.approx(speeds["numpy"], rel=0.02)  # 1.106 m/s
    # MuJoCo's cone itself (cone="convex"; margin 0: its puck leaves the solve once apart)
    lifted = sd.simulate(model, q0, None, push, 1.0, 1e-3,
                         contact=scene.build(cone="convex", margin=0.0)[1],
                         integrator="semi_implicit_euler")
    np.testing.assert_allclose(lifted.q, expected, rtol=0, atol=1e-9)


#: (impratio, push (N) along x and y, whether the pyramid's puck slides, the disc's):
#: friction holds mu m g = 4.9 N in every direction in the elliptic cone; the pyramid's
#: rhombus |f_x| + |f_y| <= mu f_n holds 4.9 N along x, 3.47 N along the diagonal
PUSHES = {"sticks": (1.0, (2.0, 0.6), False, False),
          "sticks-impratio10": (10.0, (2.0, 0.6), False, False),
          "slides": (1.0, (6.0, 1.8), True, True),
          "x-sticks": (1.0, (3.92, 0.0), False, False),
          "diagonal-slides": (1.0, (2.77, 2.77), True, False)}


@pytest.mark.parametrize("case", list(PUSHES))
def test_mujocos_pyramidal_cone_is_mujocos(tmp_path, case):
    """MuJoCo's default friction cone, pyramidal (``RigidContact.cone``,
    ``Scene.build(cone="pyramidal")``; elliptic by default): four edges J_n +- mu J_t, each
    pushing, never pulling, of compliance 2 mu^2 / impratio (1 - d) / d A_e0. The puck rests at
    the depth where four edges carry its weight, soft_sink(g mu^2 (1 + mu^2) / (2 impratio))
    (MuJoCo's, to 1e-9 m; pushed gently, too); pushed it creeps or slides as mj_step's to
    1e-9 m over 1 s (the 1,000 sweeps the stiffer impratio 10 needs to converge; 0.2 s on
    numpy and JAX), on numpy, native code and JAX. Its friction lies in the rhombus
    |f_x| + |f_y| <= mu f_n: pushed by 0.8 mu m g it sticks along x and slides along the
    diagonal, where the elliptic cone (the scene's default) holds it in every direction."""
    impratio, push, slides, slides_in_disc = PUSHES[case]
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "puck.xml"
    path.write_text(PUCK.format(ratio=impratio).replace('cone="elliptic"', 'cone="pyramidal"'))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    rest = soft_sink(G * MU ** 2 * (1 + MU ** 2) / (2 * impratio))
    q0 = np.array([0.0, 0.0, -rest])
    expected = _mj_qpos(m, q0, force=push)
    scene = sd.Scene("puck")
    scene.add_robot(sd.load_mjcf(str(path)))
    # margin 0: MuJoCo's (its puck, lifted by the sliding, leaves the solve once apart)
    model, contact, _ = scene.build(iterations=1000 if impratio > 1 else 100, cone="pyramidal",
                                    margin=0.0)
    assert scene.build()[1].solver.cone == "elliptic"  # whatever the file says
    tau = np.array([push[0], push[1], 0.0])
    for backend in ("numpy", "native", "jax"):
        traj = sd.simulate(model, q0, None, lambda t, q, qd: tau, 1.0 if backend == "native"
                           else 0.2, 1e-3, contact=contact, backend=backend,
                           integrator="semi_implicit_euler")
        np.testing.assert_allclose(traj.q, expected[:len(traj.q)], rtol=0, atol=1e-9,
                                   err_msg=backend)
    moved = np.hypot(*expected[-1, :2])
    assert (moved > 0.1) == slides and (moved < 0.01) != slides, moved
    if case.startswith("sticks"):  # pushed gently: its four edges push, at its rest depth
        assert expected[-1, 2] == pytest.approx(-rest, abs=1e-9)
    elliptic = sd.simulate(model, q0, None, lambda t, q, qd: tau, 1.0, 1e-3,
                           contact=scene.build()[1], integrator="semi_implicit_euler")
    assert np.abs(elliptic.q[-1] - expected[-1]).max() > 1e-5
    assert (np.hypot(*elliptic.q[-1, :2]) > 0.1) == slides_in_disc


CUBE = """<mujoco><option timestep="0.001" integrator="Euler" cone="elliptic"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="cube" pos="0 0 0.12"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body></worldbody></mujoco>"""


def test_mujocos_inverse_weights_rest_a_cube_as_mujocos(tmp_path):
    """A 1 kg cube dropped 2 cm onto the floor, MuJoCo's default soft contact, rests on its four
    corners. With the exact A_jj (the default) a corner's is 4 / m, four times a ball's, and the
    cube sinks as a ball does, soft_sink(g): 0.367 mm. With invweight0=True the compliance
    scales MuJoCo's approximation (the body's body_invweight0, 1 / m) and the cube sinks as
    MuJoCo's does, soft_sink(g / 4): 0.108 mm, to 1e-9 m, and its fall and landing are
    mj_step's to 1e-7 m (200 sweeps), on numpy and native code."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "cube.xml"
    path.write_text(CUBE)
    expected = _mj_qpos(mujoco.MjModel.from_xml_path(str(path)))
    scene = sd.Scene("cube")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, exact, q0 = scene.build()
    traj = sd.simulate(model, q0, None, None, 1.0, 1e-3, contact=exact,
                       integrator="semi_implicit_euler")
    assert 0.1 - traj.q[-1, 2] == pytest.approx(soft_sink(G), abs=1e-9)
    _, approximate, _ = scene.build(invweight0=True, iterations=200)
    for backend in ("numpy", "native"):
        traj = sd.simulate(model, q0, None, None, 1.0, 1e-3, contact=approximate,
                           backend=backend, integrator="semi_implicit_euler")
        assert 0.1 - traj.q[-1, 2] == pytest.approx(soft_sink(G / 4), abs=1e-9)
        assert traj.q[-1, 2] == pytest.approx(expected[-1, 2], abs=1e-9)
        np.testing.assert_allclose(traj.q[:, :3], expected[:, :3], rtol=0, atol=1e-7,
                                   err_msg=backend)
    assert 0.1 - expected[-1, 2] == pytest.approx(1.08e-4, abs=1e-6)


PAIR = """<mujoco><option timestep="0.001" integrator="Euler" cone="elliptic"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="a" pos="0 0 0.12"><joint name="ja" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="1"/></body>
    <body name="b" pos="1 0 1"><joint name="jb" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.05" mass="2" contype="0" conaffinity="0"/></body>
  </worldbody>
  <equality><joint joint1="jb" joint2="ja" solimp="0.8 0.95 0.01 0.5 2"/></equality>
</mujoco>"""


def test_soft_equality_and_contact_are_mujocos(tmp_path):
    """A ball dropped 2 cm onto the floor carries a second body through a soft joint equality
    (jb = ja, MuJoCo's solimp sigmoid): the contact's rows act through the soft equality
    (``solve_rows`` eliminates its rows exactly, A_eq + R_eq). With the file's soft equality
    (soft_equalities=True) and MuJoCo's inverse weights for the contact (invweight0=True),
    the fall, the landing and the rest are mj_step's to 1e-9 m (1.2e-11 measured) on numpy,
    native code and JAX; the coupling gives by MuJoCo's 2.8 mm at rest (the hard one by
    nothing)."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "pair.xml"
    path.write_text(PAIR)
    expected = _mj_qpos(mujoco.MjModel.from_xml_path(str(path)))
    scene = sd.Scene("pair")
    scene.add_robot(sd.load_mjcf(str(path), soft_equalities=True))
    model, contact, q0 = scene.build(invweight0=True)
    for backend in ("numpy", "native", "jax"):
        traj = sd.simulate(model, q0, None, None, 1.0, 1e-3, contact=contact, backend=backend,
                           integrator="semi_implicit_euler")
        np.testing.assert_allclose(traj.q, expected, rtol=0, atol=1e-9, err_msg=backend)
    assert expected[-1, 0] - expected[-1, 1] == pytest.approx(2.77e-3, abs=1e-5)
    hard = sd.Scene("pair")
    hard.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = hard.build(invweight0=True)
    traj = sd.simulate(model, q0, None, None, 1.0, 1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert abs(traj.q[-1, 0] - traj.q[-1, 1]) < 1e-9


THROWN = """<mujoco><option timestep="0.001" integrator="Euler" cone="pyramidal"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1" friction="{mu}"/>
    <body name="thrown" pos="0 0 0.2" euler="0 {tilt} 0"><freejoint/>
      <geom type="{shape}" size="{size}" mass="1" friction="{mu}"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("shape,size,tilt,mu", [("box", "0.1 0.1 0.1", 0, 1.0),
                                                ("capsule", "0.05 0.2", 80, 0.7),
                                                ("capsule", "0.05 0.1", 0, 0.7)],
                         ids=["cube", "capsule", "standing capsule"])
def test_bodies_thrown_on_mujocos_pyramid_are_mujocos(tmp_path, shape, size, tilt, mu):
    """A cube, and a capsule tilted 80 deg (one end lands first), dropped 10 cm and thrown
    along the floor (0.5, 0.2 m/s, spinning at 1 rad/s about z, rolling at 0.3 rad/s) onto
    MuJoCo's pyramidal cone, its default solimp and its inverse weights (invweight0=True: the
    edges' compliance on (1 + mu^2) / m), margin 0 as MuJoCo's: they land, slide, turn and
    stop as mj_step's to 1e-12 m over 1 s (1,000 sweeps; 3e-16 measured), the cube's four
    corners sharing their load as MuJoCo shares it, the capsule's edges along its axis
    (MuJoCo's plane-capsule contact frame: the pyramid turns with the capsule); a capsule
    landing upright on its end (its axis along the normal: MuJoCo's frame then takes x)
    alike."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "thrown.xml"
    path.write_text(THROWN.format(shape=shape, size=size, tilt=tilt, mu=mu))
    qd0 = np.array([0.5, 0.2, 0.0, 0.3, 0.0, 1.0])
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    expected = _mj_qpos(m, qvel=qd0)
    scene = sd.Scene("thrown")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, iterations=1000,
                                     margin=0.0)
    traj = sd.simulate(model, q0, qd0, None, 1.0, 1e-3, contact=contact, backend="native",
                       integrator="semi_implicit_euler")
    assert np.ptp(expected[:, 0]) > 0.03  # it slides
    np.testing.assert_allclose(traj.q, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape,size,tilt,mu", [("box", "0.1 0.1 0.1", 0, 1.0),
                                                ("capsule", "0.05 0.2", 80, 0.7),
                                                ("box", "0.1 0.05 0.02", 30, 0.3)],
                         ids=["cube", "capsule", "tilted plate"])
def test_bodies_thrown_on_mujocos_elliptic_cone_are_mujocos(tmp_path, shape, size, tilt, mu):
    """MuJoCo's elliptic cone (``cone="convex"``: each point's normal and friction found
    together, one convex problem, as MuJoCo's Newton solver finds them): a cube, a capsule
    tilted 80 deg and a plate tilted 30 deg, dropped 10 cm and thrown along the floor as on
    the pyramid, land, slide, turn and stop as mj_step's with the file's cone="elliptic" to
    1e-10 m over 1 s (1,000 sweeps; 1e-13 to 3e-11 measured). screwdyn's own elliptic cone
    (Coulomb's law, the normal found as without friction) leaves it."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "thrown.xml"
    path.write_text(THROWN.format(shape=shape, size=size, tilt=tilt, mu=mu)
                    .replace('cone="pyramidal"', 'cone="elliptic"'))
    qd0 = np.array([0.5, 0.2, 0.0, 0.3, 0.0, 1.0])
    m = mujoco.MjModel.from_xml_path(str(path))
    assert m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    expected = _mj_qpos(m, qvel=qd0)
    scene = sd.Scene("thrown")
    scene.add_robot(sd.load_mjcf(str(path)))
    runs = {}
    for cone in ("convex", "elliptic"):
        model, contact, q0 = scene.build(cone=cone, invweight0=True, iterations=1000,
                                         margin=0.0)
        runs[cone] = sd.simulate(model, q0, qd0, None, 1.0, 1e-3, contact=contact,
                                 backend="native", integrator="semi_implicit_euler").q
    assert np.ptp(expected[:, 0]) > 0.07  # it slides
    np.testing.assert_allclose(runs["convex"], expected, rtol=0, atol=1e-10)
    print(f"Coulomb's elliptic cone: {np.abs(runs['elliptic'] - expected).max():.2e} m apart")
    assert np.abs(runs["elliptic"] - expected).max() > 5e-6


def test_the_convex_cone_is_the_same_on_every_backend(tmp_path):
    """``cone="convex"``'s sweeps (each point's block: its unconstrained minimiser where it
    sticks, else projected-gradient steps within the cone) give the same run on numpy, JAX
    and native code (to 1e-9 m over 0.1 s: the plate's landing on a corner, an edge, then
    sliding on a face), in a scene and on the ground (``RigidContact(cone="convex")``)."""
    path = tmp_path / "thrown.xml"
    path.write_text(THROWN.format(shape="box", size="0.1 0.05 0.02", tilt=30, mu=0.3))
    scene = sd.Scene("thrown")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone="convex", iterations=50, margin=0.0)
    q0 = q0.copy()
    q0[2] = 0.08  # it lands within 0.1 s
    qd0 = np.array([0.5, 0.2, -1.0, 0.3, 0.0, 1.0])
    corners = [(x, y, z) for x in (-0.1, 0.1) for y in (-0.05, 0.05) for z in (-0.02, 0.02)]
    ground = sd.RigidContact(mu=0.3, cone="convex", iterations=50, margin=0.0,
                             impedance=MUJOCO_SOLIMP, points={"thrown": corners})
    runs = {}
    for name, c in (("scene", contact), ("ground", ground)):
        for backend in ("numpy", "native", "jax"):
            runs[name, backend] = sd.simulate(model, q0, qd0, None, 0.1, 1e-3, contact=c,
                                              backend=backend,
                                              integrator="semi_implicit_euler").q
    assert runs["scene", "native"][:, 2].min() < 0.02  # it lands
    for (name, backend), q in runs.items():
        np.testing.assert_allclose(q, runs[name, "native"], rtol=0, atol=1e-9,
                                   err_msg=f"{name}, {backend}")


def test_a_capsule_standing_on_a_wall_of_normal_x_has_friction_on_the_pyramid():
    """A capsule standing on a wall whose normal is x (its axis along x, gravity towards the
    wall), thrown along it: MuJoCo's frame would take x, the normal itself (no tangent); the
    pyramid's takes y there. Its run is finite, the same on numpy, native code and JAX, and
    slides as the elliptic cone's does (to 0.1 mm at 60 ms, where it tips over)."""
    scene = sd.Scene("wall", gravity=(-9.81, 0.0, 0.0))
    s = np.sin(np.pi / 4)
    scene.add_object("capsule", collision.capsule(0.05, 0.1), mass=1.0, position=(0.16, 0, 0.5),
                     quaternion=(0.0, s, 0.0, s))
    scene.add_shape("world", collision.plane(), rotation=np.array([[0.0, 0.0, 1.0],
                                                                   [0.0, 1.0, 0.0],
                                                                   [-1.0, 0.0, 0.0]]),
                    name="wall")
    runs = {}
    for cone in ("pyramidal", "elliptic"):
        model, contact, q0 = scene.build(ground=False, cone=cone, impedance=0.9, mu=0.5)
        for backend in ("numpy", "native", "jax"):
            runs[cone, backend] = sd.simulate(model, q0, [0, 0.3, 0, 0, 0, 0], None, 0.1, 1e-3,
                                              contact=contact, backend=backend,
                                              integrator="semi_implicit_euler").q
    assert all(np.isfinite(q).all() for q in runs.values())
    for backend in ("numpy", "jax"):
        np.testing.assert_allclose(runs["pyramidal", backend], runs["pyramidal", "native"],
                                   rtol=0, atol=1e-9)
    pyramid, disc = runs["pyramidal", "native"][60], runs["elliptic", "native"][60]
    assert pyramid[1] == pytest.approx(disc[1], abs=1e-4)
    assert pyramid[1] < 0.3 * 0.06 - 1e-4  # friction slowed it


def test_inverse_weights_are_mujocos():
    """body_inverse_weights at qpos0 equals MuJoCo's body_invweight0 (its mean translational
    and rotational diagonals of J M^-1 J^T at each body's centre of mass; 1 / mass for a body
    that only slides) on bundled models, to 1e-12 relative, for every body that is one body in
    both (MuJoCo keeps a body welded to its parent without a joint; screwdyn merges it: an
    MJCF scene takes MuJoCo's own numbers for those, from the file); dof_inverse_weights
    equals MuJoCo's dof_invweight0 for every joint (the diagonal of M^-1; 1 / mass for the
    pusher's sliding object and goal, whose armature MuJoCo leaves out there)."""
    mujoco = pytest.importorskip("mujoco")
    from screwdyn.sim.inverse_weights import body_inverse_weights, dof_inverse_weights

    paths = [bundled_mjcf("dm_control", name)
             for name in ("cartpole", "acrobot", "cheetah", "finger", "point_mass")]
    paths += [bundled_mjcf("gymnasium", name)
              for name in ("ant", "hopper", "humanoid", "inverted_double_pendulum", "pusher")]
    paths = [p for p in paths if p is not None]
    if not paths:
        pytest.skip("neither dm_control nor gymnasium is installed")
    compared = 0
    for path in paths:
        m = mujoco.MjModel.from_xml_path(path)
        model = sd.load_mjcf(path)
        ours = body_inverse_weights(model)
        for b, body in enumerate(model.bodies):
            i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body.link)
            if i < 0 or m.body_mass[i] != pytest.approx(body.mass, rel=1e-12):
                continue  # a chain of joints in one MuJoCo body, or a merged one
            np.testing.assert_allclose(ours[b], m.body_invweight0[i], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{path}: {body.link}")
            compared += 1
        dofs = dof_inverse_weights(model)
        for name, v in zip(model.joint_names, model.v_slices):
            j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
            first = m.jnt_dofadr[j]
            np.testing.assert_allclose(dofs[v], m.dof_invweight0[first:first + v.stop - v.start],
                                       rtol=1e-12, err_msg=f"{path}: {name}")
    assert compared >= 20


def test_impedance_scales_a_pairs_own_solref(tmp_path):
    """A ball and floor with their own solref (0.01 s): rigid, then soft (impedance 0.9),
    then rigid and soft again from the same scene: each run rests (1 - d) g 0.01^2 into the
    floor (the pair's own gains scaled by 1 / d, MuJoCo's, are constants of the compiled
    program: a soft run must not reuse a rigid run's)."""
    path = tmp_path / "own.xml"
    path.write_text(BALL.replace('solimp="0.9 0.9 0.001"', 'solref="0.01 1"'))
    scene = sd.Scene("own")
    scene.add_robot(sd.load_mjcf(str(path)))
    for impedance in (1.0, 0.9, 1.0, 0.9):
        model, contact, q0 = scene.build(impedance=impedance)
        traj = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                           integrator="semi_implicit_euler")
        assert 0.1 - traj.q[-1, 2] == pytest.approx((1 - impedance) * G * 0.01 ** 2,
                                                    abs=1e-11)


def test_bad_input_is_refused_or_said():
    for kw, match in (({"mu": -0.1}, "mu"), ({"restitution": 1.5}, "restitution"),
                      ({"iterations": 0}, "iterations"), ({"timeconst": 0.0}, "timeconst"),
                      ({"normal": (0, 0, 0)}, "normal"), ({"impedance": 0.0}, "impedance"),
                      ({"impratio": 0.0}, "impratio"), ({"impratio": float("nan")}, "impratio"),
                      ({"impratio": "ten"}, "impratio"), ({"invweight0": 1}, "invweight0"),
                      ({"impedance": 1.5}, "impedance"), ({"impedance": True}, "impedance"),
                      ({"cone": "square"}, r"RigidContact.cone must be one of \('elliptic', "
                                           r"'pyramidal', 'convex'\)")):
        with pytest.raises(ValueError, match=match):
            sd.RigidContact(**kw)
    with pytest.warns(sd.PenetrationWarning, match="'cube.*3 cm inside"):
        sd.simulate(_box(), REST - [0, 0, 0.03, 0, 0, 0, 0], t_final=0.01, dt=1e-3,
                    contact=_contact())


def _tied_rods():
    """Two rods (0.4 m, 1 kg, about parallel y axes, hinges 0.5 m above the ground) tied by a
    Coupling, q_b = q_a (``test_contact_with_equality_constraints``)."""
    b = sd.ModelBuilder("pair")
    b.add_link("base")
    for name, y in (("a", 0.0), ("b", 0.3)):
        b.add_link(name, mass=1.0, com=(0.2, 0, 0), inertia=np.diag([1e-4, 0.0134, 0.0134]))
        b.add_joint(f"j{name}", "revolute", "base", name, xyz=(0, y, 0.5), axis=(0, 1, 0))
    tied = b.build().with_constraints(sd.constraints.Coupling("jb", "ja", name="tie"))
    return tied


def test_contact_with_equality_constraints():
    """Two rods (0.4 m, about parallel y axes, hinges 0.5 m above the ground) tied by a
    Coupling (q_b = q_a); rod a's tip touches a ground at z = 0.2 m: the tied pair falls, rod
    a's tip lands, and the pair rests there, the tie held, at the angle where the tip is on the
    ground: 0.4 sin q = 0.3. Frictionless, so that the resting force is unique (with friction
    the rod is statically indeterminate; at mu = 0.8 it jams, Painleve's paradox: see the
    contact guide's limits)."""
    tied = _tied_rods()
    contact = sd.RigidContact(mu=0.0, points=[sd.ContactPoint("a", (0.4, 0, 0))], height=0.2)
    traj = sd.simulate(tied, [0.2, 0.2], t_final=3.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler", record_contact_forces=True)
    assert np.abs(traj.q[:, 0] - traj.q[:, 1]).max() < 1e-6  # the tie holds throughout
    assert traj.q[-1, 0] == pytest.approx(np.arcsin(0.3 / 0.4), abs=1e-6)
    assert np.abs(traj.qd[-1]).max() < 1e-6
    # at rest the ground carries what the hinges do not: the moment balance about the hinges,
    # F 0.4 cos q = 2 m g 0.2 cos q, F = m g
    assert traj.contact_force[-1, 0] == pytest.approx([0, 0, 9.81], rel=1e-6, abs=1e-9)


def test_a_frictionless_pyramid_is_its_normal_row():
    """A frictionless point (mu = 0, MuJoCo's condim 1) of a pyramidal cone keeps its normal
    row alone (four edges J_n would be one row four times): the tied rods of
    ``test_contact_with_equality_constraints`` fall and rest as with the elliptic cone, to
    1e-12 rad, soft (the normal's compliance, not the edges') and rigid."""
    tied = _tied_rods()
    for impedance in (1.0, 0.9):
        runs = [sd.simulate(tied, [0.2, 0.2], t_final=1.0, dt=1e-3, integrator=
                            "semi_implicit_euler", contact=sd.RigidContact(
                                mu=0.0, cone=cone, impedance=impedance, height=0.2,
                                points=[sd.ContactPoint("a", (0.4, 0, 0))])).q
                for cone in ("elliptic", "pyramidal")]
        np.testing.assert_allclose(runs[1], runs[0], rtol=0, atol=1e-12)


def _anymal():
    from conftest import erd_robots_dir

    if erd_robots_dir() is None:
        pytest.skip("example-robot-data is not installed")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
    import contact_validation as scenes

    return scenes


def _drop(scenes, dt, integrator):
    from screwdyn import controllers

    model = scenes.anymal()
    feet = [name for name in model.link_names if name.endswith("FOOT")]
    contact = sd.RigidContact(mu=0.8, links=feet)
    q0 = scenes.anymal_standing_pose(model, contact)
    stand = q0.copy()
    q0[2] += 0.6
    pd = controllers.JointPD(model, kp=300.0, kd=10.0, q_ref=stand)
    return stand, sd.simulate(model, q0, None, pd, 3.0, dt, contact=contact,
                              integrator=integrator)


@pytest.mark.parametrize("dt", [2e-3])
def test_anymal_dropped_under_pd_lands_and_stands(dt):
    """ANYmal dropped from 0.6 m above its standing pose, joint PD (kp 300, kd 10) holding it:
    it lands, stands and comes to rest at 2 ms steps (the penalty contact needs 0.2 ms)."""
    scenes = _anymal()
    stand, traj = _drop(scenes, dt, "semi_implicit_euler")
    assert np.isfinite(traj.q).all()
    assert 0.4 < traj.q[-1, 2] < stand[2]  # standing, knees bent by the weight
    assert np.abs(traj.qd[-1]).max() < 1e-2
    assert np.abs(traj.q[-1, :2] - stand[:2]).max() < 0.05  # landed where it fell


@pytest.mark.slow
@pytest.mark.parametrize("dt", [1e-3, 2e-3])
@pytest.mark.parametrize("integrator", ["semi_implicit_euler", "rk4"])
def test_anymal_drop_every_step_and_integrator(dt, integrator):
    scenes = _anymal()
    stand, traj = _drop(scenes, dt, integrator)
    assert 0.4 < traj.q[-1, 2] < stand[2]
    assert np.abs(traj.qd[-1]).max() < 1e-2
    assert traj.energy_drift() < 0.05
