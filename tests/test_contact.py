"""Ground contact, joint limits, joint friction and external wrenches in the simulation: contact
points from collision geometry (against MuJoCo's own kinematics), the contact force law and its
wrenches (against J^T F), the energy balance, backends, batches and algebras, gradients, and bad
input. The long physical validations (sliding box, slope, drop, quadruped, MuJoCo) are in
test_contact_validation.py (slow tier)."""
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import ContactPoint, GroundContact, SimulationError, contact_points, simulate
from screwdyn.sim.contact import cone

G = 9.81


# -- models ---------------------------------------------------------------------------------
def ball(mass=1.0, radius=0.1):
    b = sd.ModelBuilder("ball")
    b.add_link("ball", mass=mass, inertia=np.eye(3) * 0.4 * mass * radius ** 2)
    return b.build(floating_base=True)


BALL = [ContactPoint("ball", radius=0.1)]

URDF = """<robot name="shapes">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0"
    ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0.1 0 0" rpy="0.3 -0.2 0.5"/><geometry><box size="0.2 0.4 0.1"/>
    </geometry></collision>
    <collision><origin xyz="0 0 -0.2"/><geometry><sphere radius="0.05"/></geometry></collision>
  </link>
  <link name="arm"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0"
    ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 -0.25" rpy="0 1.5707963 0"/><geometry>
      <cylinder radius="0.04" length="0.5"/></geometry></collision>
    <collision><geometry><capsule radius="0.03" length="0.2"/></geometry></collision>
    <collision><geometry><mesh filename="arm.stl"/></geometry></collision>
  </link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="3"/></joint>
</robot>"""


@pytest.fixture
def shapes(tmp_path):
    path = tmp_path / "shapes.urdf"
    path.write_text(URDF)
    return sd.load_urdf(str(path), floating_base=True)


def rpy_matrix(rpy):
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", rpy).as_matrix()  # URDF: fixed axes x, y, z


# -- contact points ---------------------------------------------------------------------------
def test_urdf_collision_geometry_gives_contact_points(shapes):
    with pytest.warns(UserWarning, match=r"collision mesh geometry on 1 link\(s\) \(arm\)"):
        points = contact_points(shapes, rim_points=6)
    assert len(points) == 8 + 1 + 12 + 2
    base, arm = shapes.link_index("base"), shapes.link_index("arm")
    labels = list(points.labels)
    # the box's corners: its half-extents rotated by the origin's rpy, then moved by its xyz
    corners = points.center[[i for i, l in enumerate(labels) if l.startswith("base box")]]
    R = rpy_matrix([0.3, -0.2, 0.5])
    expected = [R @ (np.array([sx, sy, sz]) * [0.1, 0.2, 0.05]) + [0.1, 0, 0]
                for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    np.testing.assert_allclose(corners, expected, atol=1e-12)
    sphere = labels.index("base sphere")
    assert points.link[sphere] == base and points.radius[sphere] == 0.05
    np.testing.assert_allclose(points.center[sphere], [0, 0, -0.2])
    # the cylinder (along its z, length 0.5, radius 0.04): rims at z = -0.25 and 0.25 in its
    # own frame, six points on each
    rim = points.center[[i for i, l in enumerate(labels) if l.startswith("arm cylinder")]]
    local = (rim - [0, 0, -0.25]) @ rpy_matrix([0, 1.5707963, 0])
    np.testing.assert_allclose(np.sort(local[:, 2]), [-0.25] * 6 + [0.25] * 6, atol=1e-12)
    np.testing.assert_allclose(np.hypot(local[:, 0], local[:, 1]), 0.04, atol=1e-12)
    caps = [i for i, l in enumerate(labels) if l.startswith("arm capsule")]
    np.testing.assert_allclose(points.center[caps], [[0, 0, -0.1], [0, 0, 0.1]])
    assert np.all(points.radius[caps] == 0.03) and np.all(points.link[caps] == arm)
    with pytest.warns(UserWarning, match="mesh"):
        only_arm = contact_points(shapes, links=["arm"], rim_points=6)
    assert set(only_arm.link) == {arm}


def test_mjcf_geoms_agree_with_mujocos_own_kinematics(tmp_path):
    mujoco = pytest.importorskip("mujoco")
    xml = """<mujoco model="geoms"><worldbody>
      <geom type="plane" size="1 1 0.1"/>
      <body name="torso" pos="0.1 0.2 0.8" euler="10 20 30"><freejoint/>
        <geom type="box" size="0.1 0.2 0.05" pos="0.05 0 0" euler="5 0 40"/>
        <geom type="sphere" size="0.02" contype="0" conaffinity="0"/>
        <body name="leg" pos="0 0 -0.2"><joint name="hip" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.1 0 -0.3" size="0.03"/>
          <geom type="cylinder" size="0.05 0.02" pos="0 0.1 0"/>
          <geom type="sphere" size="0.04" pos="0.1 0 -0.3"/>
        </body></body></worldbody></mujoco>"""
    path = tmp_path / "geoms.xml"
    path.write_text(xml)
    model = sd.load_mjcf(str(path))
    points = contact_points(model, rim_points=4)
    # the visual-only sphere (contype = conaffinity = 0) and the floor plane give no points
    assert len(points) == 8 + 2 + 8 + 1
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    d.qpos[:] = np.r_[0.3, -0.1, 0.9, rng.normal(size=4) / 2 + [1, 0, 0, 0], 0.7]
    d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
    mujoco.mj_forward(m, d)
    T = sd.forward_kinematics(model, d.qpos)
    world = np.einsum("pij,pj->pi", T[points.link, :3, :3], points.center) + T[points.link, :3, 3]
    expected = []  # each geom's points in the world from MuJoCo's geom_xpos and geom_xmat
    for g in range(m.ngeom):
        kind, size = m.geom_type[g], m.geom_size[g]
        pos, R = d.geom_xpos[g], d.geom_xmat[g].reshape(3, 3)
        if kind == mujoco.mjtGeom.mjGEOM_BOX:
            expected += [pos + R @ (np.array([a, b, c]) * size) for a in (-1, 1) for b in (-1, 1)
                         for c in (-1, 1)]
        elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
            expected += [pos + R @ [0, 0, s * size[1]] for s in (-1, 1)]
        elif kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
            expected += [pos + R @ [size[0] * np.cos(a), size[0] * np.sin(a), s * size[1]]
                         for s in (-1, 1) for a in np.arange(4) * np.pi / 2]
        elif kind == mujoco.mjtGeom.mjGEOM_SPHERE and m.geom_contype[g]:
            expected.append(pos)
    np.testing.assert_allclose(world, expected, atol=1e-12)


def test_a_model_without_collision_geometry_is_a_clear_error(tmp_path):
    with pytest.raises(sd.ModelError, match=r"built in code.*points=\{"):
        contact_points(ball())
    mesh_only = tmp_path / "m.urdf"
    mesh_only.write_text('<robot name="m"><link name="a"><inertial><mass value="1"/><inertia '
                         'ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial><collision>'
                         '<geometry><mesh filename="a.stl"/></geometry></collision></link>'
                         '</robot>')
    model = sd.load_urdf(str(mesh_only), floating_base=True)
    with pytest.warns(UserWarning, match="mesh"), pytest.raises(sd.ModelError,
                                                                match="declare contact points"):
        simulate(model, model.neutral, None, None, 0.01, 1e-3, contact=GroundContact())
    with pytest.raises(sd.ModelError, match="no link named 'foot'"):
        contact_points(ball(), points={"foot": [(0, 0, 0)]})


@pytest.mark.parametrize("bad, match", [
    (dict(mu=-0.1), "mu must be >= 0"), (dict(stiffness=0.0), "stiffness must be positive"),
    (dict(stiffness=-5.0), "stiffness must be positive"),
    (dict(tangential_stiffness=float("nan")), "tangential_stiffness"),
    (dict(dissipation=-1.0), "dissipation must be >= 0"), (dict(normal=(0, 0, 0)), "normal"),
    (dict(height="low"), "height must be a finite number"), (dict(sink=0), "sink")])
def test_bad_contact_parameters_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        GroundContact(**bad)


def test_bad_declared_points_are_refused():
    with pytest.raises(ValueError, match="position must be 3 finite numbers"):
        contact_points(ball(), points=[ContactPoint("ball", (0, 0))])
    with pytest.raises(ValueError, match="radius must be >= 0"):
        contact_points(ball(), points=[ContactPoint("ball", radius=-1)])
    with pytest.raises(ValueError, match="expected a ContactPoint"):
        contact_points(ball(), points=[("ball", (0, 0, 0))])


# -- the force law ------------------------------------------------------------------------
def floating_tree():
    from conftest import random_tree

    return random_tree(5, n=6, floating_base=True)


def test_contact_wrenches_act_as_jacobian_transpose_forces():
    """The link-frame wrenches the contact hands to forward dynamics move the robot as the
    point forces would: M (qdd_with - qdd_without) = sum_p J_p^T F_p, with J_p the Jacobian of
    the material point under the contact (from sd.jacobian); and the contact power F . v equals
    the wrenches' power on the link twists."""
    model = floating_tree()
    rng = np.random.default_rng(3)
    q = sd.random_configuration(model, 4)
    qd = rng.normal(size=model.nv)
    links = [1, 3, 5, 6]
    points = [ContactPoint(model.link_names[l], tuple(rng.normal(size=3) * 0.2),
                           radius=float(r)) for l, r in zip(links, (0.0, 0.05, 0.0, 0.1))]
    T = sd.forward_kinematics(model, q)
    heights = [(T[l, :3, :3] @ p.position + T[l, :3, 3])[2] - p.radius
               for l, p in zip(links, points)]
    ground = GroundContact(mu=0.7, points=points, height=float(np.median(heights)),
                           normal=(0.1, -0.2, 1.0))
    contact = ground.resolve(model)
    p = contact.params()
    V = sd.link_velocities(model, q, qd)
    point, depth = contact.positions(np, p, T[None])[:2]
    assert 0 < np.sum(depth > 0) < len(points)  # some points touch, others do not
    springs = contact.initial_state(np, p, T[None])
    n = p["normal"]
    loaded = rng.normal(size=point.shape) * 1e-4  # springs loaded in every tangent direction
    springs["delta"] = loaded - (loaded @ n)[..., None] * n
    f_ext, force = contact.forces(np, p, T[None], V[None], springs)
    assert np.all(force[0][depth[0] <= 0] == 0)
    generalized = np.zeros(model.nv)
    for i, (l, pt) in enumerate(zip(links, points)):
        J = sd.jacobian(model, q, l, frame="world")
        r = point[0, i] - T[l, :3, 3]
        Jp = J[:3] - np.cross(r, J[3:].T).T
        generalized += Jp.T @ force[0, i]
    tau = rng.normal(size=model.nv)
    M = sd.mass_matrix(model, q)
    change = sd.forward_dynamics(model, q, qd, tau, f_ext=f_ext[0]) \
        - sd.forward_dynamics(model, q, qd, tau)
    np.testing.assert_allclose(M @ change, generalized, atol=1e-9)
    # power: F . v of the material points equals the wrenches on the link twists
    v = contact.velocities(np, V[None], *contact.positions(np, p, T[None])[2:4])
    np.testing.assert_allclose(np.sum(force * v), np.sum(f_ext[0] * V), rtol=1e-12)


def test_hunt_crossley_normal_force_and_the_friction_cone():
    model = ball()
    ground = GroundContact(mu=0.5, stiffness=1e4, dissipation=2.0, points=BALL)
    contact = ground.resolve(model)
    p = contact.params()
    for z, vz, vx, slip in ((0.099, -0.2, 0.0, 0.0), (0.098, 0.3, 0.0, 0.0),
                            (0.099, 0.6, 0.0, 0.0), (0.1005, -1.0, 0.0, 0.0),
                            (0.099, 0.0, 0.0, 2e-5), (0.099, 0.0, 0.0, 1e-3),
                            (0.099, 0.0, 0.7, 0.0)):
        q = np.array([[0, 0, z, 0, 0, 0, 1.0]])
        qd = np.array([[vx, 0, vz, 0, 0, 0]])
        T = sd.forward_kinematics(model, q)
        springs = contact.initial_state(np, p, T)
        springs["delta"] = np.array([[[slip, 0.0, 0.0]]])  # the point slipped by this
        _, force = contact.forces(np, p, T, sd.link_velocities(model, q, qd), springs)
        d = max(0.1 - z, 0.0)
        normal = 1e4 * d * max(0.0, 1 + 2.0 * (-vz))  # F_n = k d (1 + c d')
        assert force[0, 0, 2] == pytest.approx(normal, abs=1e-12)
        trial = -(2.5e3 * slip + 2.0 * 1e4 * d * vx)  # -(k_t delta + c k d v_t)
        assert force[0, 0, 0] == pytest.approx(np.clip(trial, -0.5 * normal, 0.5 * normal),
                                               abs=1e-12)


def test_cone_has_finite_gradients_everywhere():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    gradient = jax.jit(jax.grad(lambda x, l: jnp.sum(cone(jnp, x, l)), argnums=(0, 1)))
    for x, limit in (([0.0, 0.0], 1.0), ([3.0, 4.0], 1.0), ([0.3, 0.4], 1.0), ([1.0, 0], 0.0)):
        g = gradient(jnp.array(x), limit)
        assert all(np.all(np.isfinite(np.asarray(a))) for a in g)
    np.testing.assert_allclose(cone(np, np.array([3.0, 4.0]), 1.0), [0.6, 0.8])
    np.testing.assert_allclose(cone(np, np.array([0.3, 0.4]), 1.0), [0.3, 0.4])


# -- simulations (short, numpy) ------------------------------------------------------------------
def test_ball_bounces_and_the_energy_balance_closes():
    """A ball thrown down onto the ground: it bounces back lower, and T + V + elastic +
    dissipated stays constant to the integrator's accuracy (RK4: the error falls ~ dt^2 or
    faster as dt halves, through the non-smooth impact)."""
    errors = []
    for dt in (2e-3, 1e-3):
        traj = simulate(ball(), [0, 0, 0.11, 0, 0, 0, 1], [0, 0, -2.0, 0, 0, 0], None, 0.06, dt,
                        contact=GroundContact(points=BALL), backend="numpy")
        z, vz = traj.q[:, 2], traj.qd[:, 2]
        assert z.min() < 0.1 and vz[-1] > 0  # it touched and is on its way up again
        assert 0.1 < vz[-1] / 2.0 < 0.9  # ... slower than it came (restitution < 1)
        assert traj.dissipated()[-1] > 0.1 * 0.5 * 2.0 ** 2  # the impact took energy
        assert np.all(np.diff(traj.dissipated()) >= -1e-12)
        errors.append(traj.energy_drift())
    assert errors[1] < 1e-4 and errors[0] / errors[1] > 3.5


def test_a_box_on_a_slope_sticks_below_and_slides_above_the_friction_angle(tmp_path):
    """Below the friction angle the stick-slip springs hold a box elastically (it rings about
    its anchors, within a few times the springs' deflection); above it, it slides down. (The 5 s
    creep and the sliding acceleration are measured in the slow validation tier.)"""
    model = box_model(tmp_path)
    for degrees, sticks in ((15, True), (35, False)):  # tan: 0.27 and 0.70 against mu = 0.5
        angle = np.radians(degrees)
        ground = GroundContact(mu=0.5, normal=(-np.sin(angle), 0, np.cos(angle)))
        traj = simulate(model, resting_box(angle), None, None, 0.15, 1e-3, contact=ground,
                        backend="numpy", integrator="semi_implicit_euler")
        along = traj.q[:, :3] @ np.array([np.cos(angle), 0, np.sin(angle)])
        k_t = 0.25 * G / 0.75e-3  # the default stick spring of each of the four corners
        deflection = G * np.sin(angle) / 4 / k_t
        if sticks:
            assert np.abs(along).max() < 3 * deflection  # (the box also rocks a little)
        else:
            assert along[-1] < -20 * deflection
        assert traj.energy_drift() < 1e-2  # semi-implicit Euler: first order


def box_model(tmp_path, mass=1.0, size=(0.2, 0.2, 0.1)):
    a, b, c = size
    path = tmp_path / "box.urdf"
    path.write_text(f"""<robot name="box"><link name="box"><inertial><mass value="{mass}"/>
        <inertia ixx="{mass * (b * b + c * c) / 12}" iyy="{mass * (a * a + c * c) / 12}"
        izz="{mass * (a * a + b * b) / 12}" ixy="0" ixz="0" iyz="0"/></inertial>
        <collision><geometry><box size="{a} {b} {c}"/></geometry></collision></link></robot>""")
    return sd.load_urdf(str(path), floating_base=True)


def resting_box(angle, half_height=0.05, sink=0.75e-3 / 4):
    """q of a box resting on a plane through the origin tilted by ``angle`` about y (its four
    bottom corners pressed in by the rest sink of the default stiffness)."""
    n = np.array([-np.sin(angle), 0, np.cos(angle)])
    quat = [0, -np.sin(angle / 2), 0, np.cos(angle / 2)]  # rotation -angle about y: z -> n
    return np.r_[n * (half_height - sink * np.cos(angle)), quat]


def test_a_pushed_ball_rolls_without_loading_its_stick_spring():
    """A horizontal push on a resting ball's centre: it rolls without slipping (its contact point
    at rest), accelerating at 5/7 F/m, and the stick spring under it holds only the rolling
    friction 2/7 F: the push's work goes into kinetic energy, none is dissipated."""
    model = ball()
    force = 3.0

    def push(t, q, qd):
        xp = sd._backend.namespace(q)
        R = sd.forward_kinematics(model, q)[..., 0, :3, :3]
        local = xp.einsum("...ji,j->...i", R, xp.asarray([force, 0.0, 0.0]))  # R^T F
        return xp.concatenate([local, 0 * local], axis=-1)[..., None, :]

    rest = 0.1 - 0.75e-3  # the default sink of a 1 kg ball
    traj = simulate(model, [0, 0, rest, 0, 0, 0, 1], None, None, 0.3, 1e-3, external=push,
                    contact=GroundContact(points=BALL), backend="numpy")
    late = traj.t > 0.1  # past the stick spring's first ringing (17 Hz, damping ratio 0.16)
    accel = np.polyfit(traj.t[late], traj.q[late, 0], 2)[0] * 2
    assert accel == pytest.approx(5 / 7 * force, rel=2e-3)
    # no slip: the distance rolled is the angle turned times the radius (to the stick spring's
    # elastic ringing, tens of micrometres)
    rolled = traj.q[-1, 0] - traj.q[late, 0][0]
    turned = np.trapezoid(traj.qd[late, 4], traj.t[late])  # w_y: body and world y agree
    assert turned * 0.1 == pytest.approx(rolled, abs=1e-4) and rolled > 0.05
    assert abs(traj.dissipated()[-1]) < 1e-3 * traj.work()[-1]
    k_t = 0.25 * G / 0.75e-3
    assert traj.elastic[-1] - traj.elastic[0] == pytest.approx((2 / 7 * force) ** 2 / (2 * k_t),
                                                               rel=0.05)


def test_contact_in_every_algebra_and_in_batches():
    q0 = np.array([[0, 0, 0.105, 0, 0, 0, 1], [0.2, 0, 0.102, 0, 0, 0, 1]])
    qd0 = np.array([[0.5, 0, -1.0, 0, 3.0, 0], [0, 0.2, -0.5, 1.0, 0, 0]])
    contact = GroundContact(points=BALL, mu=0.3)
    runs = {a: simulate(ball(), q0, qd0, None, 0.03, 1e-3, contact=contact, algebra=a,
                        backend="numpy") for a in ("spatial", "cga", "dq")}
    for a in ("cga", "dq"):
        np.testing.assert_allclose(runs[a].q, runs["spatial"].q, atol=1e-12)
    one = simulate(ball(), q0[1], qd0[1], None, 0.03, 1e-3, contact=contact, backend="numpy")
    np.testing.assert_allclose(runs["spatial"][1].q, one.q, atol=1e-13)
    assert np.ptp(runs["spatial"].qd[0, :, 0]) > 0.01  # friction acted on the sliding ball


# -- joints and external wrenches ---------------------------------------------------------------
def pendulum(limits=None, coulomb=0.0):
    b = sd.ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("bob", mass=1.0, com=(0, 0, -1.0))
    b.add_joint("hinge", "revolute", "base", "bob", axis=(0, 1, 0), coulomb=coulomb,
                limits=limits)
    return b.build()


def test_joint_limits_stop_a_joint_within_the_spring_overshoot():
    model = pendulum(limits={"lower": -0.3, "upper": 0.3, "effort": 10, "velocity": 5})
    free = simulate(model, [0.0], [3.0], None, 0.15, 1e-3, backend="numpy")
    assert free.q.max() > 0.4  # without limits it swings through
    held = simulate(model, [0.0], [3.0], None, 0.15, 1e-3, joint_limits=True, backend="numpy")
    # energy at the limit: v^2 = 9 - 2 g (1 - cos 0.3) / 1; an undamped spring k = I w^2 would
    # stop it within v / w, the critically damped one within less
    v = np.sqrt(9.0 - 2 * G * (1 - np.cos(0.3)))
    omega = 2 * np.pi * 50
    overshoot = held.q.max() - 0.3
    assert 0 < overshoot < v / omega
    assert held.dissipated()[-1] > 0.5 * 0.5 * v ** 2  # the limit's damper took the impact
    assert held.meta["joint_limits"] == {"frequency": 50.0, "damping_ratio": 1.0}
    # the damper acts from the moment the limit is crossed: a step across that instant is
    # first order, so the energy balance converges as dt (and is exact without the impact)
    finer = simulate(model, [0.0], [3.0], None, 0.15, 5e-4, joint_limits=True, backend="numpy")
    assert held.energy_drift() < 0.03 and finer.energy_drift() < held.energy_drift() / 1.8


def test_stick_slip_joint_friction_holds_below_and_slides_above_the_coulomb_force():
    """A pendulum at 0.5 rad needs 9.81 sin(0.5) = 4.70 N m to stay: Coulomb friction of 6 N m
    holds it with no creep (the sign model of forward dynamics cannot); 3 N m lets it go:
    once its stick spring has loaded (a few ms of pre-sliding) it slides with q'' = -g sin q + 3
    exactly, dissipating 3 N m times the angle it slides through."""
    held = simulate(pendulum(coulomb=6.0), [0.5], None, None, 0.4, 1e-3, backend="numpy")
    assert np.abs(held.q[-1] - 0.5) < 1e-3  # elastic deflection of the stick spring only
    assert np.ptp(held.q[200:]) < 1e-7  # ... and no creep once settled
    sign = simulate(pendulum(coulomb=6.0), [0.5], None, None, 0.4, 1e-3, backend="numpy",
                    joint_friction=sd.JointFriction(model="sign"))
    assert np.abs(sign.qd[200:]).max() > 1e-3  # the sign model chatters around rest
    slides = simulate(pendulum(coulomb=3.0), [0.5], None, None, 0.4, 1e-3, backend="numpy")
    travelled = np.sum(np.abs(np.diff(slides.q[:, 0])))
    assert travelled > 0.1 and np.all(slides.qd[1:, 0] < 0)  # one way: Coulomb is constant
    sliding = slides.t > 0.02
    np.testing.assert_allclose(slides.qdd[sliding, 0], -G * np.sin(slides.q[sliding, 0]) + 3.0,
                               atol=1e-9)
    assert slides.dissipated()[-1] == pytest.approx(3.0 * travelled, rel=2e-3)


def test_external_wrench_pushes_a_free_body_as_newton_says():
    model = ball(mass=2.0)
    force = np.array([3.0, -1.0, 2.0])  # N, world frame, at the centre of mass

    def push(t, q, qd):
        xp = sd._backend.namespace(q)
        R = sd.forward_kinematics(model, q)[..., 0, :3, :3]
        local = xp.einsum("...ji,j->...i", R, force)  # R^T F
        return xp.concatenate([local, 0 * local], axis=-1)[..., None, :]

    qd0 = np.array([0, 0, 0, 1.0, 2.0, -1.0])  # spinning: the body frame turns
    traj = simulate(model, [0, 0, 0, 0, 0, 0, 1], qd0, None, 0.2, 1e-3, external=push,
                    gravity=(0, 0, 0), backend="numpy")
    t = traj.t[:, None]
    np.testing.assert_allclose(traj.q[:, :3], force * t ** 2 / (2 * 2.0), atol=1e-12)
    # the work of the push is all kinetic energy beyond the spin
    np.testing.assert_allclose(traj.work()[-1], np.dot(force, force) * 0.2 ** 2 / (2 * 2.0),
                               rtol=1e-9)
    assert traj.energy_drift() < 1e-9


def test_external_wrench_of_the_wrong_shape_fails_with_the_step():
    with pytest.raises(SimulationError, match=r"step 0.*external.*expected \(\.\.\., 1, 6\)"):
        simulate(ball(), [0, 0, 1, 0, 0, 0, 1], None, None, 0.01, 1e-3, backend="numpy",
                 external=lambda t, q, qd: np.zeros(6))


# -- compiled rollouts: equal to numpy, differentiable ------------------------------------------
def test_compiled_contact_rollout_equals_numpy_and_records_forces():
    pytest.importorskip("jax")
    q0, qd0 = [0, 0, 0.105, 0, 0, 0, 1], [0.5, 0, -1.0, 0, 3.0, 0]
    runs = [simulate(ball(), q0, qd0, None, 0.03, 1e-3, contact=GroundContact(points=BALL),
                     backend=b, record_contact_forces=True) for b in ("numpy", "jax")]
    assert runs[1].meta["backend"] == "jax"
    for name in ("q", "qd", "elastic", "work_passive", "contact_force"):
        np.testing.assert_allclose(getattr(runs[0], name), getattr(runs[1], name),
                                   rtol=1e-11, atol=1e-11, err_msg=name)
    force = runs[1].contact_force[:, 0]  # (T, 3)
    assert force[:, 2].max() > 10 and np.all(force[:, 2] >= 0)


def test_gradients_through_a_contact_rollout_are_finite():
    """jax.grad of where a puck ends up after sliding on the ground, with respect to its initial
    state and the friction coefficient: finite, and equal to central differences."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from screwdyn.sim import rollout
    from screwdyn.sim.loop_jax import x64

    b = sd.ModelBuilder("puck")  # moves in x and z on two prismatic joints: a quick compile
    b.add_link("world")
    b.add_link("carriage")
    b.add_link("puck", mass=1.0, inertia=np.eye(3) * 4e-3)
    b.add_joint("x", "prismatic", "world", "carriage", axis=(1, 0, 0))
    b.add_joint("z", "prismatic", "carriage", "puck", axis=(0, 0, 1))
    model = b.build()
    with x64():
        def final_x(state, mu):
            qs, _ = rollout(model, state[:2], state[2:], None, 40, 1e-3,
                            contact=GroundContact(points=[ContactPoint("puck", radius=0.1)],
                                                  mu=mu), integrator="semi_implicit_euler")
            return qs[-1, 0]

        state = jnp.array([0.0, 0.102, 1.0, -0.5])  # 2 mm above the ground, moving down
        _, (g_state, g_mu) = jax.jit(jax.value_and_grad(final_x, argnums=(0, 1)))(state, 0.3)
        assert np.all(np.isfinite(np.asarray(g_state))) and np.isfinite(float(g_mu))
        assert float(g_mu) < 0  # more friction, less sliding
        f = jax.jit(final_x)
        h = 1e-6
        fd = (f(state, 0.3 + h) - f(state, 0.3 - h)) / (2 * h)
        assert float(g_mu) == pytest.approx(float(fd), rel=1e-4)
        fd_vz = (f(state.at[3].add(h), 0.3) - f(state.at[3].add(-h), 0.3)) / (2 * h)
        assert float(g_state[3]) == pytest.approx(float(fd_vz), rel=1e-4, abs=1e-8)


def test_command_simulates_contact_and_joint_limits(tmp_path, capsys):
    from screwdyn.cli import main

    urdf = tmp_path / "box.urdf"
    box_model(tmp_path)  # writes box.urdf: a 1 kg box with a collision box
    out = tmp_path / "t.npz"
    assert main(["simulate", str(urdf), "--floating-base", "--contact", "--mu", "0.4",
                 "--joint-limits", "--duration", "0.05", "--backend", "numpy", "--quiet",
                 "--no-compile-cache", "--q0", "0", "0", "0.0498", "0", "0", "0", "1",
                 "--qd0", "1", "0", "0", "0", "0", "0", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "contact      ground plane, 8 contact points, mu = 0.4" in text
    traj = sd.Trajectory.load(out)
    assert traj.meta["contact"]["mu"] == 0.4 and traj.qd[-1, 0] < 1.0  # friction slowed it


def test_native_rollouts_of_contact_limits_friction_and_pushes_equal_numpy(tmp_path):
    """The native backend (the same step traced into machine code) against the numpy backend on
    every force the settings add: a ball bouncing and sliding (RK4, contact forces recorded), a
    box sliding down a slope (semi-implicit Euler, four corners' stick-slip springs), a joint
    hitting its limits, stick-slip joint friction, an external push; and a batch of boxes equal,
    bit for bit, to each box alone."""
    angle = np.radians(35)
    slope = GroundContact(mu=0.5, normal=(-np.sin(angle), 0, np.cos(angle)))
    model = ball(mass=2.0)

    def push(t, q, qd):
        xp = sd._backend.namespace(q)
        R = sd.forward_kinematics(model, q)[..., 0, :3, :3]
        local = xp.einsum("...ji,j->...i", R, xp.asarray([3.0, -1.0, 2.0]))  # R^T F
        return xp.concatenate([local, 0 * local], axis=-1)[..., None, :]

    limited = pendulum(limits={"lower": -0.3, "upper": 0.3, "effort": 10, "velocity": 5})
    box = box_model(tmp_path)
    cases = [(ball(), [0, 0, 0.105, 0, 0, 0, 1], [0.5, 0, -1.0, 0, 3.0, 0],
              dict(contact=GroundContact(points=BALL, mu=0.3), record_contact_forces=True)),
             (box, resting_box(angle), None,
              dict(contact=slope, integrator="semi_implicit_euler")),
             (limited, [[0.0], [0.1]], [[3.0], [-2.5]], dict(joint_limits=True)),
             (pendulum(coulomb=3.0), [[0.5], [0.2]], None, {}),
             (model, [0, 0, 0.3, 0, 0, 0, 1], [0, 0, 0, 1.0, 2.0, -1.0],
              dict(external=push, contact=GroundContact(points=BALL)))]
    for m, q0, qd0, kw in cases:
        runs = [simulate(m, q0, qd0, None, 0.1, 1e-3, backend=b, **kw)
                for b in ("numpy", "native")]
        assert runs[1].meta["backend"] == "native"
        for name in ("q", "qd", "qdd", "elastic", "work_in", "work_passive", "contact_force"):
            if getattr(runs[0], name) is not None:
                np.testing.assert_allclose(getattr(runs[1], name), getattr(runs[0], name),
                                           rtol=1e-10, atol=1e-10, err_msg=f"{m.name} {name}")
    assert abs(runs[0].work_in[-1]) > 0.01  # the push did work (against the fall: negative)
    # the box slid (the slope is steeper than its friction angle): the native run shows it
    boxes = np.stack([resting_box(angle), resting_box(angle) + [0.01, 0, 0, 0, 0, 0, 0]])
    batch = simulate(box, boxes, None, None, 0.1, 1e-3, contact=slope,
                     integrator="semi_implicit_euler", backend="native")
    along = batch.q[..., :3] @ np.array([np.cos(angle), 0, np.sin(angle)])
    assert np.all(along[:, -1] - along[:, 0] < -1e-3)
    for i in range(2):
        one = simulate(box, boxes[i], None, None, 0.1, 1e-3, contact=slope,
                       integrator="semi_implicit_euler", backend="native")
        for name in ("q", "qd", "elastic", "work_passive"):
            assert np.array_equal(getattr(batch[i], name), getattr(one, name)), name


def test_auto_backend_is_native_for_contact_and_falls_back_for_numpy_only_code():
    from screwdyn.execution import plan

    traj = simulate(ball(), [0, 0, 0.105, 0, 0, 0, 1], None, None, 0.01, 1e-3,
                    contact=GroundContact(points=BALL))
    assert traj.meta["backend"] == ("native" if plan.native_enabled() else "jax")

    def numpy_only(t, q, qd):
        return np.zeros((1, 6)) if float(np.asarray(q).ravel()[2]) > 0 else np.ones((1, 6))

    with pytest.raises(ValueError, match="backend='native': the external wrench function "
                                         "cannot be traced"):
        simulate(ball(), [0, 0, 0.105, 0, 0, 0, 1], None, None, 0.01, 1e-3, backend="native",
                 contact=GroundContact(points=BALL), external=lambda t, q, qd: numpy_only(
                     t, q, qd)[None])
