"""Assemblies are robots: forward dynamics across the connection points (O(n), black boxes as known
wrenches), the mass matrix, the energies, sd.simulate on an assembly, JAX; against the flat
model, Pinocchio and closed forms."""
import numpy as np
import pytest

import screwdyn as sd
import branched_24dof as branched  # the examples, see conftest
from conftest import erd_urdf, random_state
from pinocchio_reference import PinocchioState, pinocchio_assembly
from screwdyn.composition import Assembly, BlackBox, WrenchLog

ALGEBRAS = ["dq", "spatial", "cga"]


def _rel(a, b):
    return np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300)


@pytest.fixture(scope="module")
def robot24():
    return branched.build(erd_urdf)


@pytest.fixture(scope="module")
def trees():
    """Floating-base subsystems, subsystems on links welded to another's base, base links riding
    on moving parents."""
    from test_composition import _two_trees

    return _two_trees()


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_forward_dynamics_across_connection_points_equals_flat_aba(robot24, trees, algebra):
    for robot in (robot24, trees):
        flat = robot.to_model()
        q, qd, tau = random_state(flat, 3, batch=(2, 3))
        gravity = [0.4, -1.0, -9.5]
        expected = sd.forward_dynamics(flat, q, qd, tau, gravity=gravity)
        qdd = robot.forward_dynamics(q, qd, tau, gravity=gravity, algebra=algebra)
        assert qdd.shape == (2, 3, flat.nv)
        assert _rel(qdd, expected) < 1e-12
        assert _rel(robot.inverse_dynamics(q, qd, qdd, gravity=gravity, algebra=algebra),
                    tau) < 1e-11  # ID(FD(tau)) = tau


def test_forward_dynamics_with_a_black_box_is_a_known_wrench(robot24):
    """The right gripper as a measured black box: forward dynamics of the other 21 joints equals
    Pinocchio's ABA of the robot without the gripper, under the external wrench the black box
    exerts on the flange (``fext`` on the UR5's last joint)."""
    pin = pytest.importorskip("pinocchio")
    wrench = np.array([3.0, -2.0, -15.0, 0.4, 0.1, -0.3])  # on the flange, at the point
    boxed = robot24.replaced("right_gripper", BlackBox(wrench))
    bare = robot24.copy()
    bare.detach("right_gripper")
    ur5 = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    reference = pinocchio_assembly(pin, bare, {"left_arm": ur5, "right_arm": ur5})
    data, state = reference.createData(), PinocchioState(pin, reference, bare.to_model())
    point = reference.frames[reference.getFrameId("right_arm/tool0")]
    at_point = point.placement * pin.SE3(robot24["right_gripper"].placement)
    for seed in range(3):
        q, qd, tau = random_state(bare.to_model(), seed)
        fext = [pin.Force.Zero() for _ in range(reference.njoints)]
        fext[point.parentJoint] = at_point.act(pin.Force(wrench))
        a = pin.aba(reference, data, state.q(q), state.v(qd), state.v(tau), fext)
        assert _rel(boxed.forward_dynamics(q, qd, tau), a[state.order]) < 1e-12
    callable_box = robot24.replaced("right_gripper", BlackBox(lambda V, A: 0 * V))
    with pytest.raises(sd.ModelError, match="black box 'right_gripper'.*twist derivative, which "
                                            "forward dynamics solves for"):
        callable_box.forward_dynamics(q, qd, tau)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_mass_matrix_and_energies_across_connection_points(robot24, trees, algebra):
    for robot in (robot24, trees):
        flat = robot.to_model()
        q, qd, _ = random_state(flat, 4, batch=(3,))
        M = robot.mass_matrix(q, algebra=algebra)
        assert _rel(M, sd.mass_matrix(flat, q)) < 1e-12
        assert _rel(robot.kinetic_energy(q, qd, algebra=algebra),
                    0.5 * np.einsum("bi,bij,bj->b", qd, M, qd)) < 1e-12
        assert _rel(robot.potential_energy(q, algebra=algebra), sd.potential_energy(flat, q)) \
            < 1e-12
    # a black box adds no inertia: M is that of the subsystems with models
    boxed = robot24.replaced("right_gripper", BlackBox(np.zeros(6)))
    bare = robot24.copy()
    bare.detach("right_gripper")
    q, _, _ = random_state(bare.to_model(), 5, batch=(2,))
    assert _rel(boxed.mass_matrix(q, algebra=algebra), sd.mass_matrix(bare.to_model(), q)) \
        < 1e-12


def test_simulate_an_assembly_as_its_flat_model(trees):
    flat = trees.to_model()
    q0 = sd.random_configuration(flat, 3)
    a = sd.simulate(trees, q0, None, None, 0.02, 1e-3, backend="numpy")
    b = sd.simulate(flat, q0, None, None, 0.02, 1e-3, backend="numpy")
    assert a.q.shape == b.q.shape and np.abs(a.q - b.q).max() < 1e-12
    assert np.abs(a.energy - b.energy).max() < 1e-9
    assert a.meta["backend"] == "numpy" and a.model.nv == flat.nv


def test_solved_limits_and_friction_need_the_flat_model(trees):
    """RigidLimits and RigidFriction are rows solved with a Model's dynamics: on an assembly,
    a ValueError that says to simulate its to_model()."""
    q0 = sd.random_configuration(trees.to_model(), 3)
    for kw, what in (({"joint_limits": sd.RigidLimits()}, "RigidLimits are"),
                     ({"joint_friction": sd.RigidFriction()}, "RigidFriction is")):
        with pytest.raises(ValueError, match=f"{what} solved with a Model's dynamics: "
                                             r"simulate assembly.to_model\(\)"):
            sd.simulate(trees, q0, None, None, 0.01, 1e-3, backend="numpy", **kw)


def test_simulate_with_a_black_box_driven_by_a_log(robot24, tmp_path):
    """A lidar whose spin is a black box known by a logged wrench: the simulation of the rest,
    under that wrench, equals the simulation of the rest under the same wrench as an external
    load (the flat model's f_ext, constant between the log's samples here)."""
    wrench = np.array([1.0, -2.0, -8.0, 0.3, 0.2, 0.1])
    T = np.linspace(0.0, 0.05, 6)
    WrenchLog(T, np.tile(wrench, (6, 1))).save(tmp_path / "lidar.csv")
    robot = Assembly(branched.torso(), name="torso")
    robot.attach(branched.lidar(), parent="torso", link="chest", name="lidar")
    boxed = robot.replaced("lidar", BlackBox(WrenchLog.load(tmp_path / "lidar.csv")))
    torso = Assembly(branched.torso(), name="torso").to_model()
    chest = torso.link_index("torso/chest")
    f_ext = np.zeros((torso.nlinks, 6))
    # the wrench at the point, moved into the chest frame: what the lidar puts on the chest
    point = sd.dq.from_matrix(np.reshape(robot["lidar"].mount, (4, 4)))
    f_ext[chest] = sd.dq.Ad(point, wrench)
    q0 = np.array([0.3, -0.2])
    a = sd.simulate(boxed, q0, None, None, 0.04, 1e-3, integrator="semi_implicit_euler",
                    backend="numpy")
    flat = sd.forward_dynamics(torso, a.q, a.qd, np.zeros(2), f_ext=f_ext)
    assert np.abs(a.qdd - flat).max() < 1e-12
    with pytest.raises(sd.SimulationError, match="covers t = 0 to 0.05 s"):
        sd.simulate(boxed, q0, None, None, 0.1, 1e-3, integrator="semi_implicit_euler",
                    backend="numpy")


def test_jax_traces_assemblies_and_simulates_them(robot24):
    """jax.jit of the composed inverse and forward dynamics equals numpy, and the compiled
    simulation of a small assembly equals the numpy one."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    robot = Assembly(branched.torso(), name="torso")
    robot.attach(branched.lidar(), parent="torso", link="chest", name="lidar")
    robot.attach(branched.camera(), parent="lidar", link="rotor", name="camera")
    q, qd, qdd = random_state(robot.to_model(), 6, batch=(3,))
    jq, jqd, jqdd = (jax.numpy.asarray(x) for x in (q, qd, qdd))
    tau = jax.jit(robot.inverse_dynamics)(jq, jqd, jqdd)  # dual quaternions, the paper's W_i
    assert isinstance(tau, jax.Array)
    assert _rel(np.asarray(tau), robot.inverse_dynamics(q, qd, qdd)) < 1e-12
    fd = jax.jit(lambda *a: robot.forward_dynamics(*a, algebra="spatial"))(jq, jqd, jqdd)
    assert _rel(np.asarray(fd), robot.forward_dynamics(q, qd, qdd)) < 1e-12
    a = sd.simulate(robot, q[0], None, None, 0.02, 2e-3, backend="jax")
    b = sd.simulate(robot, q[0], None, None, 0.02, 2e-3, backend="numpy")
    assert a.meta["backend"] == "jax" and np.abs(a.q - b.q).max() < 1e-12
