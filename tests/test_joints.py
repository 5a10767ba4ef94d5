"""Every joint type (model/joints.py) in every algebra and algorithm: identities, the energy,
Pinocchio's corresponding joints, mimic coupling, limits, the configuration manifold."""
import math
import warnings

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf, erd_urdfs, joint_tree, pin_configuration, pinocchio_model, pinocchio_q
from screwdyn.model import joints as J

ALGEBRAS = ("spatial", "cga", "dq")
EVERY_TYPE = ["planar", "spherical", "helical", "revolute", J.MuJoCoFree(), "prismatic",
              J.Spherical(scalar_first=True), "continuous", "planar", "helical"]
PINOCCHIO_TYPES = ["planar", "spherical", "helical", "revolute", "prismatic", "continuous",
                   J.Spherical(scalar_first=True), "planar", "spherical", "helical"]


def _state(model, seed):
    rng = np.random.default_rng(seed)
    return (sd.random_configuration(model, rng), rng.normal(size=model.nv),
            rng.normal(size=model.nv))


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - b), initial=0.0) / max(1.0, np.max(np.abs(b), initial=0))


@pytest.fixture(scope="module", params=[0, 1])
def every_joint(request):
    return joint_tree(request.param, EVERY_TYPE, floating_base=request.param == 1)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_identities_for_every_joint_type(every_joint, algebra):
    """ID = M qdd + b, FD(ID) = qdd, M symmetric positive definite, C qd = b - g, dM/dt - 2C
    skew, kinetic energy = qd'M qd / 2, in every algebra, with every joint type in one tree."""
    model = every_joint
    q, qd, qdd = _state(model, 3)
    tau = sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra)
    M = sd.mass_matrix(model, q, algebra=algebra)
    b = sd.bias_forces(model, q, qd, algebra=algebra)
    assert _rel(M, M.T) < 1e-14 and np.linalg.eigvalsh(M).min() > 0
    assert _rel(M @ qdd + b, tau) < 1e-12
    assert _rel(sd.forward_dynamics(model, q, qd, tau, algebra=algebra), qdd) < 1e-10
    assert _rel(tau, sd.inverse_dynamics(model, q, qd, qdd)) < 1e-12  # the spatial algebra
    assert math.isclose(sd.kinetic_energy(model, q, qd), qd @ M @ qd / 2, rel_tol=1e-12)
    C = sd.coriolis_matrix(model, q, qd)
    assert _rel(C @ qd, b - sd.gravity_torques(model, q)) < 1e-12
    h = 1e-5
    dM = (sd.mass_matrix(model, sd.integrate(model, q, h * qd))
          - sd.mass_matrix(model, sd.integrate(model, q, -h * qd))) / (2 * h)
    assert np.abs((dM - 2 * C) + (dM - 2 * C).T).max() < 1e-6 * max(1.0, np.abs(dM).max())


def test_power_balance_from_the_energy(every_joint):
    """dE/dt along q(t) = q (+) (t qd + t^2 qdd / 2), qd(t) = qd + t qdd, by central finite
    differences of the kinetic and potential energies, equals the power qd . tau of the joint
    forces that inverse dynamics gives: the energy checks inverse dynamics for every joint
    type, their integration on the manifold included."""
    model = every_joint
    q, qd, qdd = _state(model, 4)
    tau = sd.inverse_dynamics(model, q, qd, qdd)

    def energy(s):
        qs = sd.integrate(model, q, s * qd + s * s / 2 * qdd)
        return sd.kinetic_energy(model, qs, qd + s * qdd) + sd.potential_energy(model, qs)

    h = 1e-4
    dE = (energy(h) - energy(-h)) / (2 * h)
    assert dE == pytest.approx(qd @ tau, rel=1e-7, abs=1e-7)
    # gravity torques are the derivative of the potential energy on the manifold
    g = sd.gravity_torques(model, q)
    for k in range(model.nv):
        e = np.eye(model.nv)[k]
        dV = (sd.potential_energy(model, sd.integrate(model, q, h * e))
              - sd.potential_energy(model, sd.integrate(model, q, -h * e))) / (2 * h)
        assert dV == pytest.approx(g[k], rel=1e-6, abs=1e-6)


def test_jacobian_is_the_velocity_of_the_link(every_joint):
    """J qd equals the finite-difference velocity of every link's origin and orientation."""
    model = every_joint
    q, qd, _ = _state(model, 5)
    h = 1e-6
    T = sd.forward_kinematics(model, q)
    Tp = sd.forward_kinematics(model, sd.integrate(model, q, h * qd))
    Tm = sd.forward_kinematics(model, sd.integrate(model, q, -h * qd))
    for link in model.link_names:
        k = model.link_index(link)
        J_w = sd.jacobian(model, q, link, frame="world")
        for algebra in ("cga", "dq"):
            assert _rel(sd.jacobian(model, q, link, algebra=algebra), J_w) < 1e-12
        v = (Tp[k, :3, 3] - Tm[k, :3, 3]) / (2 * h)
        Rdot = (Tp[k, :3, :3] - Tm[k, :3, :3]) / (2 * h)
        W = Rdot @ T[k, :3, :3].T  # [omega]x in world axes
        omega = np.array([W[2, 1], W[0, 2], W[1, 0]])
        assert np.abs(J_w @ qd - np.concatenate([v, omega])).max() < 1e-7


@pytest.mark.parametrize("seed, floating", [(0, False), (1, True), (2, False)])
def test_every_pinocchio_joint_type_agrees_with_pinocchio(seed, floating):
    """Planar (any normal), spherical (both quaternion orders), helical, revolute, continuous,
    prismatic joints and a free-flyer base against Pinocchio's JointModelPlanar, Spherical,
    HelicalUnaligned, RevoluteUnaligned, PrismaticUnaligned, FreeFlyer: RNEA, CRBA, ABA,
    frames, Jacobians, kinetic energy, to 1e-10."""
    pin = pytest.importorskip("pinocchio")
    model = joint_tree(seed, PINOCCHIO_TYPES, floating_base=floating)
    pm = pinocchio_model(model)
    data = pm.createData()
    assert (pm.nv, pm.nq) == (model.nv, model.nq + sum(
        isinstance(j, J.Planar) for j in model.joints))
    for k in range(3):
        q, qd, qdd = _state(model, 10 * seed + k)
        pq = pinocchio_q(model, q)
        tau = sd.inverse_dynamics(model, q, qd, qdd)
        assert _rel(tau, pin.rnea(pm, data, pq, qd, qdd)) < 1e-10
        M = pin.crba(pm, data, pq)
        assert _rel(sd.mass_matrix(model, q), np.triu(M) + np.triu(M, 1).T) < 1e-10
        assert _rel(sd.forward_dynamics(model, q, qd, tau), pin.aba(pm, data, pq, qd, tau)) < 1e-9
        pin.framesForwardKinematics(pm, data, pq)
        pin.computeJointJacobians(pm, data, pq)
        T = sd.forward_kinematics(model, q)
        for link in model.link_names:
            fid = pm.getFrameId(link)
            assert _rel(T[model.link_index(link)], data.oMf[fid].homogeneous) < 1e-12
            J_pin = pin.getFrameJacobian(pm, data, fid, pin.LOCAL_WORLD_ALIGNED)
            assert _rel(sd.jacobian(model, q, link), J_pin) < 1e-10
        assert math.isclose(sd.kinetic_energy(model, q, qd),
                            pin.computeKineticEnergy(pm, data, pq, qd), rel_tol=1e-10)


def test_integrate_and_difference_agree_with_pinocchio():
    """q (+) v and q1 (-) q0 for every Pinocchio joint type equal pinocchio.integrate and
    pinocchio.difference; difference inverts integrate. (Angles are real numbers here, not
    wrapped: a planar or continuous joint's difference is theta1 - theta0, Pinocchio's the
    shortest turn, so q1 stays within a half turn of q0.)"""
    pin = pytest.importorskip("pinocchio")
    model = joint_tree(3, PINOCCHIO_TYPES, floating_base=True)
    pm = pinocchio_model(model)
    data = pm.createData()
    rng = np.random.default_rng(0)
    for _ in range(5):
        q0 = sd.random_configuration(model, rng)
        q1 = sd.integrate(model, q0, rng.uniform(-1, 1, model.nv))
        v = rng.normal(size=model.nv)
        q = sd.integrate(model, q0, v)  # the same poses (a quaternion's sign may differ)
        pin.framesForwardKinematics(pm, data, pin.integrate(pm, pinocchio_q(model, q0), v))
        T = sd.forward_kinematics(model, q)
        for link in model.link_names:
            assert _rel(T[model.link_index(link)],
                        data.oMf[pm.getFrameId(link)].homogeneous) < 1e-12
        d = sd.difference(model, q0, q1)
        assert _rel(d, pin.difference(pm, pinocchio_q(model, q0), pinocchio_q(model, q1))) < 1e-10
        assert _rel(sd.integrate(model, q0, d), q1) < 1e-10  # up to the quaternion's sign
    small = 1e-9 * rng.normal(size=model.nv)  # the series near zero
    assert _rel(sd.difference(model, q0, sd.integrate(model, q0, small)), small) < 1e-6


def test_mujoco_free_joint_velocities_are_mujocos():
    """MuJoCo's free joint: v = (linear velocity of the origin in world axes, angular velocity
    in the body frame): the Jacobian maps v to those, integrate moves as MuJoCo's
    mj_integratePos."""
    mujoco = pytest.importorskip("mujoco")
    b = sd.ModelBuilder("mujoco_free")
    b.add_link("world")
    b.add_link("l0", mass=2.0, com=(0.1, 0.2, -0.1), inertia=np.diag([0.1, 0.2, 0.25]))
    b.add_link("l1", mass=1.0, com=(0.0, 0.0, 0.3), inertia=np.diag([0.05, 0.05, 0.02]))
    b.add_joint("free", J.MuJoCoFree(), "world", "l0")
    b.add_joint("hinge", "revolute", "l0", "l1", xyz=(0.2, 0, 0), axis=(0, 1, 0))
    model = b.build()
    q, qd, _ = _state(model, 1)
    body = model.link_index("l0")
    J_w = sd.jacobian(model, q, "l0", frame="world")
    J_l = sd.jacobian(model, q, "l0", frame="local")
    assert np.allclose((J_w @ qd)[:3], qd[:3], atol=1e-12)  # linear velocity, world axes
    assert np.allclose((J_l @ qd)[3:6], qd[3:6], atol=1e-12)  # angular velocity, body axes
    assert body >= 0
    xml = ('<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body></worldbody>'
           '</mujoco>')
    m = mujoco.MjModel.from_xml_string(xml)
    qpos = q[:7].copy()
    mujoco.mj_integratePos(m, qpos, qd[:6], 0.3)
    assert _rel(sd.integrate(model, q, 0.3 * qd)[:7], qpos) < 1e-12


@pytest.mark.parametrize("kind", ["spherical", "planar", "helical"])
def test_new_joint_types_simulate_with_energy_conserved(kind):
    """A passive pendulum on each new joint type keeps its energy with RK4 (the Lie-group
    integration of spherical and planar joints included)."""
    model = joint_tree(5, [kind, "revolute"])
    q0, qd0, _ = _state(model, 2)
    traj = sd.simulate(model, q0, 0.3 * qd0, None, t_final=1.0, dt=1e-3)
    assert traj.energy_drift() < 1e-6


@pytest.mark.parametrize("kind", ["spherical", "planar", "helical", J.MuJoCoFree()])
def test_derivatives_of_new_joint_types_match_finite_differences(kind):
    model = joint_tree(6, [kind, "revolute"])
    q, qd, qdd = _state(model, 3)
    d = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    h = 1e-6
    for k in range(model.nv):
        e = np.eye(model.nv)[k]
        fd = (sd.inverse_dynamics(model, sd.integrate(model, q, h * e), qd, qdd)
              - sd.inverse_dynamics(model, sd.integrate(model, q, -h * e), qd, qdd)) / (2 * h)
        assert np.abs(d.dq[:, k] - fd).max() < 1e-5 * max(1.0, np.abs(fd).max())
        fdv = (sd.inverse_dynamics(model, q, qd + h * e, qdd)
               - sd.inverse_dynamics(model, q, qd - h * e, qdd)) / (2 * h)
        assert np.abs(d.dqd[:, k] - fdv).max() < 1e-5 * max(1.0, np.abs(fdv).max())
    assert d.du.dtype == np.float64  # numpy in: float64, whatever JAX's x64 setting
    assert _rel(d.du, sd.mass_matrix(model, q)) < 1e-12


def test_jax_traces_every_joint_type():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    model = joint_tree(7, EVERY_TYPE)
    q, qd, qdd = _state(model, 1)
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    f = jax.jit(lambda q: sd.inverse_dynamics(model, q, jnp.asarray(qd), jnp.asarray(qdd)))
    assert _rel(np.asarray(f(jnp.asarray(q))), tau) < 1e-12
    batch = np.stack([_state(model, s)[0] for s in range(4)])
    out = jax.vmap(lambda q: sd.forward_dynamics(model, q, jnp.asarray(qd), jnp.asarray(tau),
                                                 algebra="dq"))(jnp.asarray(batch))
    assert out.shape == (4, model.nv) and np.all(np.isfinite(np.asarray(out)))


# -- the joint module itself -------------------------------------------------------------------
def test_unknown_joint_type_is_a_model_error_naming_the_joint():
    b = sd.ModelBuilder()
    b.add_link("a")
    with pytest.raises(sd.ModelError, match="joint 'j': unknown joint type 'universal'"):
        b.add_joint("j", "universal", "a", "a")
    with pytest.raises(sd.ModelError, match="zero joint plane normal"):
        b.add_joint("p", "planar", "a", "a", axis=(0, 0, 0))
    with pytest.raises(sd.ModelError, match="pitch"):
        b.add_joint("h", "helical", "a", "a", axis=(0, 0, 1), pitch=float("nan"))


@pytest.mark.parametrize("limits, match", [
    ({"lower": 1.0, "upper": -1.0}, "lower limit 1.0 > upper limit -1.0"),
    ({"effort": -1.0}, "negative effort limit"),
    ({"velocity": -2.0}, "negative velocity limit"),
    ({"lower": "low"}, "lower limit 'low' is not 1 number"),
    ({"upper": float("nan")}, "upper limit is not a number"),
    ({"stiffness": 1.0}, "unknown limit 'stiffness'"),
])
def test_malformed_limits_are_model_errors_naming_the_joint(limits, match):
    b = sd.ModelBuilder()
    b.add_link("a")
    b.add_link("b")
    with pytest.raises(sd.ModelError, match=f"joint 'elbow': {match}"):
        b.add_joint("elbow", "revolute", "a", "b", limits=limits)


def test_limits_on_the_model_and_random_configurations_inside_them():
    b = sd.ModelBuilder("limited")
    for name in ("a", "b", "c", "d"):
        b.add_link(name, mass=1.0, inertia=np.eye(3) * 0.01)
    b.add_joint("r", "revolute", "a", "b", axis=(0, 0, 1),
                limits={"lower": -0.5, "upper": 0.25, "velocity": 2.0, "effort": 10.0})
    b.add_joint("s", "spherical", "b", "c")
    b.add_joint("p", "prismatic", "c", "d", axis=(1, 0, 0), limits={"lower": 0.0, "upper": 0.1})
    model = b.build()
    inf = math.inf
    assert model.lower_position_limit.tolist() == [-0.5, -inf, -inf, -inf, -inf, 0.0]
    assert model.upper_position_limit.tolist() == [0.25, inf, inf, inf, inf, 0.1]
    assert model.velocity_limit.tolist() == [2.0, inf, inf, inf, inf]
    assert model.effort_limit.tolist() == [10.0, inf, inf, inf, inf]
    q = np.stack([sd.random_configuration(model, s) for s in range(200)])
    assert np.all(q[:, 0] >= -0.5) and np.all(q[:, 0] <= 0.25)
    assert np.all(q[:, 5] >= 0.0) and np.all(q[:, 5] <= 0.1)
    assert np.allclose(np.linalg.norm(q[:, 1:5], axis=1), 1.0)
    summary = model.summary()
    assert "[-0.5, 0.25]" in summary and "spherical" in summary


def test_a_quaternion_off_the_unit_sphere_is_its_normalised_rotation():
    """Documented: a spherical joint's q need not be unit; the rotation is the normalised one."""
    model = joint_tree(8, ["spherical", "revolute"])
    q, qd, qdd = _state(model, 1)
    scaled = q.copy()
    scaled[:4] *= 3.0
    assert _rel(sd.inverse_dynamics(model, scaled, qd, qdd),
                sd.inverse_dynamics(model, q, qd, qdd)) < 1e-13
    for algebra in ("cga", "dq"):
        assert _rel(sd.forward_kinematics(model, scaled, algebra=algebra),
                    sd.forward_kinematics(model, q)) < 1e-13


# -- mimic joints ------------------------------------------------------------------------------
MIMIC = """<robot name="mimic">
  <link name="base"/>
  <link name="a"><inertial><origin xyz="0.1 0 0.2"/><mass value="2"/>
    <inertia ixx="0.02" iyy="0.03" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><origin xyz="0 0.1 0.1"/><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="c"><inertial><origin xyz="0 0 0.1"/><mass value="0.5"/>
    <inertia ixx="0.002" iyy="0.002" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="d"><inertial><origin xyz="0.05 0 0"/><mass value="0.3"/>
    <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" effort="50" velocity="3"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="30" velocity="3"/></joint>
  <joint name="j3" type="revolute"><parent link="b"/><child link="c"/><origin xyz="0 0.2 0.2"/>
    <axis xyz="1 0 0"/><limit lower="-4" upper="4" effort="30" velocity="3"/>
    <mimic joint="j2" multiplier="-1.5" offset="0.3"/></joint>
  <joint name="j4" type="prismatic"><parent link="a"/><child link="d"/><origin xyz="0.2 0 0"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.1" effort="20" velocity="1"/>
    <mimic joint="j1" multiplier="0.02"/></joint>
</robot>"""


def test_mimic_joints_couple_as_pinocchio():
    """mimic="couple": q_mimic = multiplier q_source + offset, fewer DoF, the coupled joints'
    forces add up on the source: RNEA, CRBA, ABA and frames equal Pinocchio's JointModelMimic
    model (buildModel(..., mimic=True))."""
    pin = pytest.importorskip("pinocchio")
    coupled = sd.load_urdf(MIMIC, mimic="couple", joint_order="name")
    free = sd.load_urdf(MIMIC, joint_order="name")
    assert (coupled.nq, coupled.nv, free.nv) == (2, 2, 4)
    assert coupled.joint_names == ("j1", "j2") and free.joint_names == ("j1", "j2", "j3", "j4")
    pm = pin.buildModelFromXML(MIMIC, mimic=True)
    assert (pm.nq, pm.nv) == (2, 2)
    data = pm.createData()
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd, qdd = rng.uniform(-1, 1, 2), rng.normal(size=2), rng.normal(size=2)
        tau = sd.inverse_dynamics(coupled, q, qd, qdd)
        assert _rel(tau, pin.rnea(pm, data, q, qd, qdd)) < 1e-10
        M = pin.crba(pm, data, q)
        assert _rel(sd.mass_matrix(coupled, q), np.triu(M) + np.triu(M, 1).T) < 1e-10
        assert _rel(sd.forward_dynamics(coupled, q, qd, tau), qdd) < 1e-10
        pin.framesForwardKinematics(pm, data, q)
        T = sd.forward_kinematics(coupled, q)
        for link in coupled.link_names:
            assert _rel(T[coupled.link_index(link)],
                        data.oMf[pm.getFrameId(link)].homogeneous) < 1e-12
        # the coupled model is the free one on the constraint q3 = -1.5 q2 + 0.3, q4 = 0.02 q1
        q_full = np.array([q[0], q[1], -1.5 * q[1] + 0.3, 0.02 * q[0]])
        G = np.array([[1, 0], [0, 1], [0, -1.5], [0.02, 0]])
        assert _rel(tau, G.T @ sd.inverse_dynamics(free, q_full, G @ qd, G @ qdd)) < 1e-12
        J = sd.jacobian(coupled, q, "c")
        assert _rel(J, sd.jacobian(free, q_full, "c") @ G) < 1e-12
    assert "mimic: j3 = -1.5 * j2 + 0.3 (coupled)" in coupled.summary()


def test_panda_finger_mimic_couples():
    model = sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"), mimic="couple")
    assert model.nv == 8 and "panda_finger_joint2" not in model.joint_names
    q = sd.random_configuration(model, 0)
    assert q.shape == (8,) and np.all(np.isfinite(sd.forward_dynamics(model, q, np.zeros(8),
                                                                       np.zeros(8))))


def test_a_mimic_of_a_missing_joint_is_an_error_when_coupling():
    text = MIMIC.replace('<mimic joint="j1" multiplier="0.02"/>', '<mimic joint="nowhere"/>')
    with pytest.raises(sd.ModelError, match='joint name="j4"> <mimic>: mimicked joint '
                                            "'nowhere' does not exist"):
        sd.load_urdf(text, mimic="couple")
    with pytest.warns(UserWarning, match="nowhere"):  # independent joints: loads, as Pinocchio
        assert sd.load_urdf(text).nv == 4


def test_a_mimic_cycle_is_named():
    text = MIMIC.replace('<mimic joint="j2" multiplier="-1.5" offset="0.3"/>',
                         '<mimic joint="j4"/>').replace('<mimic joint="j1" multiplier="0.02"/>',
                                                        '<mimic joint="j3"/>')
    with pytest.raises(sd.ModelError, match="cycle"):
        sd.load_urdf(text, mimic="couple")


# -- limits against Pinocchio on real files ------------------------------------------------------
@pytest.mark.skipif(not erd_urdfs(), reason="example-robot-data is not installed")
def test_limits_equal_pinocchios_on_every_example_robot():
    """lowerPositionLimit, upperPositionLimit, velocityLimit and effortLimit of every joint both
    define (revolute and prismatic: all four; continuous: velocity and effort)."""
    pin = pytest.importorskip("pinocchio")
    import io
    from contextlib import redirect_stderr

    checked = 0
    for path in erd_urdfs():
        with redirect_stderr(io.StringIO()):
            try:
                pm = pin.buildModelFromUrdf(path)
            except (ValueError, RuntimeError):
                continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sd.load_urdf(path, joint_order="name")
        for b, qs, vs in zip(model.active_bodies, model.q_slices, model.v_slices):
            joint = pm.joints[pm.getJointId(b.joint)]
            pv = slice(joint.idx_v, joint.idx_v + joint.nv)
            assert np.array_equal(model.velocity_limit[vs], pm.velocityLimit[pv]), b.joint
            assert np.array_equal(model.effort_limit[vs], pm.effortLimit[pv]), b.joint
            if isinstance(b.joint_model, J.Continuous):
                assert np.all(np.isinf(model.lower_position_limit[qs]))
                continue
            pq = slice(joint.idx_q, joint.idx_q + joint.nq)
            assert np.array_equal(model.lower_position_limit[qs], pm.lowerPositionLimit[pq])
            assert np.array_equal(model.upper_position_limit[qs], pm.upperPositionLimit[pq])
            checked += 1
    assert checked > 500


def test_derivatives_in_the_tangent_space_equal_pinocchios():
    """dtau/dq in the tangent space of q (a free-flyer base, planar, spherical, helical joints)
    equals Pinocchio's computeRNEADerivatives; the forward-dynamics ones computeABADerivatives."""
    pin = pytest.importorskip("pinocchio")
    model = joint_tree(9, PINOCCHIO_TYPES[:3], floating_base=True)
    pm = pinocchio_model(model)
    data = pm.createData()
    q, qd, qdd = _state(model, 4)
    pq = pinocchio_q(model, q)
    rnea = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    pin.computeRNEADerivatives(pm, data, pq, qd, qdd)
    assert _rel(rnea.dq, data.dtau_dq) < 1e-9 and _rel(rnea.dqd, data.dtau_dv) < 1e-9
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    aba = sd.dynamics_derivatives(model, q, qd, tau=tau)
    pin.computeABADerivatives(pm, data, pq, qd, tau)
    assert _rel(aba.dq, data.ddq_dq) < 1e-8 and _rel(aba.dqd, data.ddq_dv) < 1e-8


def test_singular_mass_matrix_names_the_real_cause():
    """Mass but no inertia about the motion: the error says so (not "no mass")."""
    b = sd.ModelBuilder("point_masses")
    b.add_link("world")
    b.add_link("a", mass=1.0, com=(0, 0, -1))
    b.add_link("c", mass=2.0)
    b.add_joint("ball", "spherical", "world", "a")
    b.add_joint("hinge", "revolute", "a", "c", xyz=(0, 0, -1), axis=(0, 0, 1))
    model = b.build()
    with pytest.raises(sd.ModelError, match="joint 'hinge' \\(revolute\\) moves a subtree of 2 kg "
                                            "that has no inertia about its axis"):
        sd.forward_dynamics(model, model.neutral, np.zeros(4), np.zeros(4))
    b = sd.ModelBuilder("floating_point_mass")
    b.add_link("body", mass=3.0)
    model = b.build(floating_base=True)
    with pytest.raises(sd.ModelError, match="joint 'root_joint' \\(free\\) moves a subtree of 3 kg "
                                            "that has no inertia about the direction"):
        sd.forward_dynamics(model, model.neutral, np.zeros(6), np.zeros(6))


def test_a_coupled_model_simulates_and_compiles():
    """Mimic-coupled models in the simulator (the compiled rollout) and under jax.jit: the
    passive motion keeps its energy, and the coupled joint follows its source."""
    jax = pytest.importorskip("jax")
    model = sd.load_urdf(MIMIC, mimic="couple")
    traj = sd.simulate(model, np.array([0.3, -0.4]), np.array([0.5, 1.0]), None, t_final=0.5,
                       dt=1e-3)
    assert traj.q.shape[-1] == 2 and traj.energy_drift() < 1e-6
    from screwdyn._backend import jax_float64

    with jax_float64():
        import jax.numpy as jnp

        q = jnp.array([0.3, -0.4])
        f = jax.jit(lambda q: sd.forward_dynamics(model, q, jnp.zeros(2), jnp.zeros(2)))
        assert _rel(np.asarray(f(q)), sd.forward_dynamics(model, np.asarray(q), np.zeros(2),
                                                          np.zeros(2))) < 1e-12


def test_difference_is_differentiable_at_zero_rotation():
    """jax.jacfwd of q1 (-) q0 through q0 (+) v at v = 0 on a free joint is the identity (the
    rotation log's square root was differentiated at zero: NaN)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from screwdyn.model.configuration import integrate_arrays

    b = sd.ModelBuilder("body")
    b.add_link("body", mass=1.0, inertia=np.eye(3))
    model = b.build(floating_base=True)
    jax.config.update("jax_enable_x64", True)  # as tests/test_jax.py sets it
    q = jnp.asarray(model.neutral)
    J = jax.jacfwd(lambda v: sd.difference(model, q, integrate_arrays(jnp, model, q, v)))(
        jnp.zeros(6))
    np.testing.assert_allclose(np.asarray(J), np.eye(6), atol=1e-12)
