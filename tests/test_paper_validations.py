"""The branched-robot paper's validations, as the examples reproduce them (shorter runs): the 24-DoF
robot of 8 subsystems against Pinocchio's RNEA, the 30-DoF mobile manipulator of 3 subsystems
against Pinocchio's ABA integrated step by step (and with a black box fed from its F/T log), and
the wrench-driven pose controller. The numbers the README's tables report are asserted here."""
import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf

pytest.importorskip("pinocchio")
import branched_24dof as branched  # noqa: E402  (the examples, see conftest)
import mobile_manipulator_30dof as mobile  # noqa: E402
import wrench_pose_controller as controller  # noqa: E402


def test_24dof_robot_of_8_subsystems_is_as_accurate_as_pinocchios_rnea():
    robot = branched.build(erd_urdf)
    error, scale = branched.accuracy(robot, states=100, urdf=erd_urdf)
    assert scale > 100 and error < 1e-12 * scale


@pytest.fixture(scope="module")
def mobile_run(tmp_path_factory):
    return mobile.run(duration=0.1, dt=2e-3, urdf=erd_urdf,
                      log_path=tmp_path_factory.mktemp("log") / "left_shoulder.csv")


def test_30dof_mobile_manipulator_against_pinocchio_aba_step_by_step(mobile_run):
    out = mobile_run
    assert (out["robot"].nv, len(out["robot"].subsystems)) == (30, 3)
    assert out["torque_error"] < 1e-12 * out["torque_scale"]  # composed ID vs Pinocchio RNEA
    assert out["motion_error"] < 1e-12  # sd.simulate(assembly) vs Pinocchio's ABA loop
    assert out["tracking_error"] < 1e-2  # the controller does track the reference


def test_30dof_mobile_manipulator_with_its_left_arm_a_black_box_fed_from_sensor_data(mobile_run):
    out = mobile_run
    assert out["log_path"].read_text().startswith("t,fx,fy,fz,tx,ty,tz")
    assert len(out["log"]) == len(out["times"])
    assert out["boxed"].q.shape[-1] == 17  # base and torso; the left arm is the black box
    assert out["black_box_torque_error"] < 1e-12 * out["torque_scale"]
    assert out["black_box_error"] < 1e-12


def test_wrench_driven_pose_controller_commands_its_wrench_through_the_composed_model():
    """The controller's joint forces are b(q, qd) + J^T F + (null-space damping), with b and J
    from the flat model (independent of the composition), and it tracks the pose."""
    out = controller.run(duration=0.06, dt=2e-3, urdf=erd_urdf)
    law, robot, traj = out["controller"], out["robot"], out["traj"]
    flat = robot.configuration_model
    q, qd = traj.q[5], traj.qd[5]
    F, _, J, _, _ = law.wrench(traj.t[5], q, qd)
    J_flat = sd.jacobian(flat, q, law.tool, frame="local")
    assert np.abs(J - J_flat).max() < 1e-12
    tau = law(traj.t[5], q, qd)
    null = tau - sd.bias_forces(flat, q, qd) - J_flat.T @ F  # what is left: the damping's part
    M = sd.mass_matrix(flat, q)
    assert np.abs(J_flat @ np.linalg.solve(M, null)).max() < 1e-9  # no acceleration of the task
    assert out["position_error"].max() < 1e-3 and out["rotation_error"].max() < 0.1  # m, deg
