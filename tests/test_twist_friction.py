"""Torsional and rolling friction (MuJoCo's condim 4 and 6; issue 24): with the default cone a
spinning ball stops as the closed form says and a rolling ball slows as its closed form says;
the pyramidal cone's twist edges and the convex cone's twist dimensions are MuJoCo's (mj_step
over 1 s); every backend gives the same numbers; surfaces mix as MuJoCo's do."""
import numpy as np
import pytest

import screwdyn as sd
from screwdyn.model.impedance import Impedance
from screwdyn.sim import collision
from screwdyn.sim.surface import Surface, mix

G, R, MASS = 9.81, 0.1, 1.0
INERTIA = 0.4 * MASS * R * R  # a solid ball's


def _spinning_ball(condim, cone, torsion=0.02, rolling=0.002):
    scene = sd.Scene("spin")
    scene.add_object("ball", collision.sphere(R), mass=MASS, position=(0, 0, R),
                     surface=Surface(friction=0.8, condim=condim, torsion=torsion,
                                     rolling=rolling))
    return scene.build(cone=cone)


def _ball_file(tmp_path, condim, cone="pyramidal", friction="0.8 0.02 0.002"):
    path = tmp_path / "ball.xml"
    path.write_text(f"""<mujoco><option timestep="0.001" integrator="Euler" cone="{cone}"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1" condim="{condim}"
                   friction="{friction}"/>
    <body name="ball" pos="0 0 {R}"><freejoint/>
      <geom name="ball" type="sphere" size="{R}" mass="{MASS}" condim="{condim}"
            friction="{friction}"/></body>
  </worldbody></mujoco>""")
    return str(path)


def test_torsional_friction_stops_a_spinning_ball_as_the_closed_form_says():
    """A ball spun at 10 rad/s about the normal (condim 4, torsion 0.02 m, rigid contact, the
    default cone: Coulomb's disc for the sliding friction and the twist's own bound beside it)
    slows at torsion m g / I = 49.05 rad/s^2 exactly (the torque at its bound, torsion f_n)
    until the bound exceeds what the stabilisation asks, b w (w < 0.49 rad/s), then stops
    without turning back; it neither slides nor leaves its place, and its energy goes into
    the friction (the balance holds). With condim 3 it spins on, untouched."""
    model, contact, q0 = _spinning_ball(4, "elliptic")
    v0 = np.array([0, 0, 0, 0, 0, 10.0])
    traj = sd.simulate(model, q0, v0, None, 0.4, 1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    slowing = 0.02 * MASS * G / INERTIA
    expected = 10.0 - slowing * traj.t
    linear = expected > 0.5
    assert linear.sum() > 150
    np.testing.assert_allclose(traj.qd[linear, 5], expected[linear], rtol=0, atol=1e-12)
    assert traj.qd[:, 5].min() > -1e-12 and abs(traj.qd[-1, 5]) < 1e-6
    np.testing.assert_allclose(traj.q[:, :3], np.broadcast_to([0, 0, R], (len(traj.t), 3)),
                               atol=1e-12)
    assert traj.dissipated()[-1] == pytest.approx(0.5 * INERTIA * 100.0, rel=1e-6)
    assert traj.energy_drift() < 1e-3
    model, contact, q0 = _spinning_ball(3, "elliptic")
    traj = sd.simulate(model, q0, v0, None, 0.1, 1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.qd[:, 5], 10.0, rtol=0, atol=1e-12)


def test_rolling_friction_slows_a_rolling_ball_as_the_closed_form_says(tmp_path):
    """A ball rolling at 1 m/s without slipping (condim 6, rolling 0.002 m, rigid contact, the
    default cone) slows at 5 rolling g / (7 r) (the rolling torque at its bound, rolling f_n,
    the sliding friction what keeps it rolling): v(t) = v0 - a t at every step, on its
    radius; the same ball with condim 4 rolls on."""
    a = 5 * 0.002 * G / (7 * R)
    for condim, slowing in ((6, a), (4, 0.0)):
        scene = sd.Scene("roll")
        scene.add_robot(sd.load_mjcf(_ball_file(tmp_path, condim)))
        model, contact, q0 = scene.build(impedance=1.0)
        traj = sd.simulate(model, q0, [1.0, 0, 0, 0, 1.0 / R, 0], None, 1.0, 1e-3,
                           contact=contact, integrator="semi_implicit_euler")
        np.testing.assert_allclose(traj.qd[:, 0], 1.0 - slowing * traj.t, rtol=0, atol=1e-9)
        np.testing.assert_allclose(traj.qd[:, 4], traj.qd[:, 0] / R, rtol=0, atol=1e-9)
        np.testing.assert_allclose(traj.q[:, 2], R, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cone, condim, sweeps, bound", [
    ("pyramidal", 4, 100, 1e-8), ("pyramidal", 6, 100, 1e-8), ("convex", 4, 100, 1e-9),
    ("convex", 6, 1000, 1e-8)])
def test_twist_follows_mujoco(tmp_path, cone, condim, sweeps, bound):
    """A ball spun at 10 rad/s (and for condim 6 sent rolling and sliding) on MuJoCo's soft
    contact follows mj_step's velocities over 1 s. MuJoCo's pyramidal cone gives a point of
    condim 4 two more edges J_n +- torsion J_spin, of condim 6 two more a rolling axis, each
    pushing, never pulling, of the point's compliance (1.1e-9 and 6.6e-9 measured).
    ``cone="convex"`` is MuJoCo's elliptic cone of condim 4 and 6, |(f_t, mu f_w / c_w)| <=
    mu f_n, each twist row of MuJoCo's compliance R_w c_w^2 = R_t mu^2 (1.5e-10 measured;
    rolling, sliding and spinning at once its sweeps converge slowly: 1,000 of them against
    MuJoCo's Newton solver run to 1e-15, 1.5e-9; 100 sweeps leave 1.5e-7)."""
    mujoco = pytest.importorskip("mujoco")
    path = _ball_file(tmp_path, condim, "elliptic" if cone == "convex" else cone)
    m = mujoco.MjModel.from_xml_path(path)
    if sweeps > 100:
        m.opt.tolerance, m.opt.iterations, m.opt.ls_tolerance = 1e-15, 1000, 1e-12
    d = mujoco.MjData(m)
    d.qvel[:] = [0.1, -0.3, 0.0, 3.0, 1.0, 10.0] if condim == 6 else [0, 0, 0, 0, 0, 10.0]
    qd0, expected = d.qvel.copy(), [d.qvel.copy()]
    for _ in range(1000):
        mujoco.mj_step(m, d)
        expected.append(d.qvel.copy())
    scene = sd.Scene("ball")
    scene.add_robot(sd.load_mjcf(path))
    model, contact, q0 = scene.build(cone=cone, invweight0=True, margin=0.0,
                                     iterations=sweeps)
    traj = sd.simulate(model, q0, qd0, None, 1.0, 1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert np.ptp(np.array(expected)[:, 5]) > 9.0  # it stops spinning
    np.testing.assert_allclose(traj.qd, expected, rtol=0, atol=bound)


def test_every_backend_gives_the_same_twist():
    """The twist rows traced into native code and into JAX's loop give numpy's numbers, for
    every cone (a ball spinning, rolling and sliding: condim 6)."""
    pytest.importorskip("jax")
    for cone in ("elliptic", "convex", "pyramidal"):
        model, contact, q0 = _spinning_ball(6, cone)
        v0 = np.array([0.3, -0.2, 0, 2.0, 3.0, 10.0])
        runs = [sd.simulate(model, q0, v0, None, 0.05, 1e-3, contact=contact,
                            integrator="semi_implicit_euler", backend=backend).q
                for backend in ("numpy", "native", "jax")]
        assert np.ptp(runs[0][:, 3:6]) > 0.1
        for run in runs[1:]:
            np.testing.assert_allclose(run, runs[0], rtol=0, atol=1e-12)


def test_twist_rows_count_in_a_scenes_size():
    """``native_size`` (what ``LARGE_SCENE`` bounds) counts a third of a point's size more for
    each twist row: a free ball's one point moved by 6 coordinates is 6, 8 with condim 4, 12
    with condim 6."""
    for condim, size in ((3, 6), (4, 8), (6, 12)):
        model, contact, _ = _spinning_ball(condim, "elliptic")
        assert contact.resolve(model).native_size == size


def test_a_ground_contacts_points_take_its_torsion():
    """``RigidContact(torsion=, rolling=)`` gives every point of a ground contact its twist
    rows: a ball declared as a contact sphere on a model built in code stops spinning as the
    scene's ball does (the closed form's slowing)."""
    b = sd.ModelBuilder("ball")
    b.add_link("ball", mass=MASS, inertia=np.eye(3) * INERTIA)
    model = b.build(floating_base=True)
    contact = sd.RigidContact(mu=0.8, torsion=0.02,
                              points=[sd.ContactPoint("ball", (0, 0, 0), radius=R)])
    traj = sd.simulate(model, [0, 0, R, 0, 0, 0, 1.0], [0, 0, 0, 0, 0, 10.0], None, 0.1, 1e-3,
                       contact=contact, integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.qd[:, 5], 10.0 - 0.02 * MASS * G / INERTIA * traj.t,
                               rtol=0, atol=1e-12)


def test_surfaces_mix_their_twist_as_mujocos():
    """Of one priority, the pair's condim is the larger and so are its coefficients (MuJoCo's
    mj_contactParam); of two, the higher surface's; condim 3 gives none (the solver's,
    ``RigidContact.torsion``), condim 1 none at all; defaults are MuJoCo's (0.005, 0.0001).
    Negative coefficients: ValueError."""
    mu, ref, imp = 0.8, (0.02, 1.0), Impedance(1.0, 1.0)
    four = Surface(condim=4, torsion=0.03)
    assert mix(four, Surface(), mu, ref, imp).twist == (0.03, 0.0)
    assert mix(four, Surface(condim=6, torsion=0.01), mu, ref, imp).twist == (0.03, 0.0001)
    assert mix(Surface(), Surface(torsion=0.5), mu, ref, imp).twist is None
    assert mix(four, Surface(priority=1), mu, ref, imp).twist is None
    assert mix(four, Surface(condim=1, priority=-1), mu, ref, imp).twist == (0.03, 0.0)
    assert mix(Surface(condim=1), Surface(condim=1), mu, ref, imp).twist == (0.0, 0.0)
    assert Surface(condim=6).twist == (0.005, 0.0001) and Surface(condim=3).twist == (0, 0)
    for bad in ({"torsion": -0.1}, {"rolling": float("nan")}):
        with pytest.raises(ValueError, match="Surface.(torsion|rolling) must be"):
            Surface(**bad)
    with pytest.raises(ValueError, match="RigidContact.torsion must be"):
        sd.RigidContact(torsion=-1.0)


def test_an_mjcf_pairs_own_twist_is_read(tmp_path):
    """A <contact><pair> of condim 6 takes its friction's third and fourth numbers (spin,
    roll) as its twist, whatever its geoms say; ``build(mu=)`` keeps it, ``build(torsion=)``
    sets every pair's."""
    path = tmp_path / "pair.xml"
    path.write_text(f"""<mujoco><worldbody>
      <geom name="floor" type="plane" size="5 5 0.1"/>
      <body name="ball" pos="0 0 {R}"><freejoint/>
        <geom name="ball" type="sphere" size="{R}" mass="1"/></body></worldbody>
      <contact><pair geom1="ball" geom2="floor" condim="6"
                     friction="0.7 0.7 0.03 0.002 0.002"/></contact></mujoco>""")
    scene = sd.Scene("pair")
    scene.add_robot(sd.load_mjcf(str(path)))
    for options, twist in (({}, (0.03, 0.002)), ({"mu": 0.5}, (0.03, 0.002)),
                           ({"torsion": 0.01}, (0.01, 0.0))):
        model, contact, _ = scene.build(**options)
        resolved = contact.resolve(model)
        assert resolved.point_twist == (twist,)
        assert resolved.describe(resolved.params())["twist"] == [list(twist)]


ON_A_BOX = """<mujoco><option timestep="0.001" integrator="Euler" cone="{cone}"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.3" euler="3 4 5"><freejoint/>
      <geom type="box" size="0.3 0.27 0.2" condim="1" mass="10"/></body>
    <body name="ball" pos="0.05 0.03 0.9"><freejoint/>
      <geom type="sphere" size="0.15" priority="1" condim="6" friction=".7 .005 .005"
            mass="1"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("cone, bound", [("pyramidal", 1e-12), ("convex", 1e-8)])
def test_a_ball_dropped_spinning_on_a_free_box_follows_mujoco(tmp_path, cone, bound):
    """Two moving bodies: a ball of condim 6 and priority 1 (dm_control's quadruped's ball:
    its twist is the pair's) dropped spinning, rolling and sliding onto a free box lying on
    the floor, whose own condim is 1: the twist rows take both bodies' angular velocities.
    With 1,000 sweeps against MuJoCo's Newton solver run to 1e-15, mj_step's positions over
    1 s to 8.3e-15 (pyramidal) and 1.0e-9 (``cone="convex"``, MuJoCo's elliptic cone)."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "on_a_box.xml"
    path.write_text(ON_A_BOX.format(cone="elliptic" if cone == "convex" else cone))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    d = mujoco.MjData(m)
    d.qvel[6:] = [0.3, -0.2, 0.0, 3.0, 1.0, 10.0]
    qd0, expected = d.qvel.copy(), [d.qpos.copy()]
    for _ in range(1000):
        mujoco.mj_step(m, d)
        expected.append(d.qpos.copy())
    scene = sd.Scene("on a box")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone=cone, invweight0=True, margin=0.0, iterations=1000)
    resolved = contact.resolve(model)
    assert dict(zip((label.split("#")[0] for label in resolved.labels),
                    resolved.point_twist)) == {"box/box0|ball/sphere0": (0.005, 0.005),
                                               "box/box0|ground": (0.0, 0.0),
                                               "ball/sphere0|ground": (0.005, 0.005)}
    traj = sd.simulate(model, q0, qd0, None, 1.0, 1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert np.ptp(np.array(expected)[:, 9]) > 0.3  # the ball lands on the box
    np.testing.assert_allclose(traj.q, expected, rtol=0, atol=bound)
