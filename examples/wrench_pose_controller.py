"""A wrench-driven pose controller on the 30-DoF mobile manipulator (the branched-robot paper's
third validation): a task-space controller that commands a wrench at the right gripper and gets
the joint forces that realize it from the composed model.

The commanded wrench enters the model as a subsystem would: a ``BlackBox`` at the gripper's tool
frame exerts -F on the arm, and the composed inverse dynamics at zero acceleration (every
subsystem's W_i, the command arriving at its connection point like a successor's wrench) gives

    tau = W(q, qd, qdd = 0; -F at the tool frame) = b(q, qd) + J^T F

(Coriolis, centrifugal and gravity forces compensated, the wrench F applied at the tool). F is
Khatib's operational-space law in the tool frame, every term from the composed model:

    F = Lambda (A_d + Kd (V_d - V) + Kp e - dJ/dt qd),   Lambda = (J M^-1 J^T)^-1

with e the position error and the rotation vector of R^T R_d, V the tool frame's twist and
dJ/dt qd its twist derivative at qdd = 0 without gravity (``connection_points``), M the composed
mass matrix; the 24 redundant degrees of freedom get joint damping, projected into the task's
null space (dynamically consistent) so that it does not disturb the wrench. The gripper tracks a circle
while the whole robot (base included) moves; ``sd.simulate`` runs the assembly (forward dynamics
across its connection points). Writes docs/wrench_pose_controller.png.

Run: python examples/wrench_pose_controller.py   (needs example-robot-data and matplotlib)
"""
import pathlib

import numpy as np
from scipy.spatial.transform import Rotation

import screwdyn as sd
from mobile_manipulator_30dof import build, example_robot_data
from screwdyn.composition import BlackBox

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
TOOL = "r_gripper_tool_frame"


def circle(p0, R0, radius=0.08, period=2.0, ramp=0.5):
    """A desired pose: the tool's start position moving on a vertical circle in the world's
    y-z plane, its speed ramping up over ``ramp`` seconds, its start orientation held; returns
    p, R, v, w, dv/dt (world) at t."""
    w = 2 * np.pi / period

    def at(t):
        angle = w * t * t / (2 * ramp) if t < ramp else w * (t - ramp / 2)
        rate = w * t / ramp if t < ramp else w
        accel = w / ramp if t < ramp else 0.0
        p = p0 + radius * np.array([0.0, np.sin(angle), np.cos(angle) - 1.0])
        v = radius * rate * np.array([0.0, np.cos(angle), -np.sin(angle)])
        a = radius * (accel * np.array([0.0, np.cos(angle), -np.sin(angle)])
                      - rate * rate * np.array([0.0, np.sin(angle), np.cos(angle)]))
        return p, R0, v, np.zeros(3), a

    return at


class WrenchPoseController:
    """tau(t, q, qd) for the plant ``robot``: the operational-space law of the module, with every
    dynamic quantity from the composed model (see the module)."""

    def __init__(self, robot, target, kp=100.0, kd=20.0, damping=2.0):
        self.robot = robot
        self.model = robot.copy()
        self.command = BlackBox(np.zeros(6), name="command")
        self.model.attach(self.command, parent="torso", link=TOOL)
        self.tool = robot.configuration_model.link_index(f"torso/{TOOL}")
        self.target, self.kp, self.kd = target, kp, kd
        self.D = 2 * damping * np.diag(robot.mass_matrix(np.zeros(robot.nq)))  # about 2 w M_ii
        self.zero = np.zeros(robot.nv)

    def wrench(self, t, q, qd):
        """The commanded wrench F (tool frame, [force; torque]), with Lambda, J and M^-1 for the
        null-space projection."""
        point = self.model.connection_points(q, qd, self.zero, gravity=np.zeros(3))["command"]
        R, p = point.pose[:3, :3], point.pose[:3, 3]
        V, bias = point.twist, point.twist_derivative  # bias = dJ/dt qd (no gravity, qdd = 0)
        p_d, R_d, v_d, w_d, a_d = self.target(t)
        error = np.concatenate([R.T @ (p_d - p), Rotation.from_matrix(R.T @ R_d).as_rotvec()])
        V_d = np.concatenate([R.T @ v_d, R.T @ w_d])
        A_d = np.concatenate([R.T @ a_d - np.cross(V[3:], R.T @ v_d), np.zeros(3)])
        J = sd.jacobian(self.robot.configuration_model, q, self.tool, frame="local")
        M_inv_JT = np.linalg.solve(self.robot.mass_matrix(q), J.T)
        Lambda = np.linalg.inv(J @ M_inv_JT)
        F = Lambda @ (A_d + self.kd * (V_d - V) + self.kp * error - bias)
        return F, error, J, Lambda, M_inv_JT

    def __call__(self, t, q, qd):
        F, _, J, Lambda, M_inv_JT = self.wrench(t, q, qd)
        self.command.wrench = -F  # what the tool frame's "successor" exerts on the arm
        tau = self.model.inverse_dynamics(q, qd, self.zero)  # b(q, qd) + J^T F
        damping = -self.D * qd
        return tau + damping - J.T @ (Lambda @ (M_inv_JT.T @ damping))  # its null-space part


def run(duration=2.0, dt=2e-3, urdf=example_robot_data):
    """Simulate the tracking; returns the trajectory, the tool's path, the desired path and the
    errors (position, rotation) over time."""
    robot = build(urdf)
    q0 = np.zeros(robot.nq)
    q0[robot.joint_names.index("torso/r_elbow_flex_joint")] = -1.2
    q0[robot.joint_names.index("torso/r_shoulder_lift_joint")] = 0.4
    tool = robot.configuration_model.link_index(f"torso/{TOOL}")
    T0 = sd.forward_kinematics(robot.configuration_model, q0)[tool]
    target = circle(T0[:3, 3], T0[:3, :3])
    controller = WrenchPoseController(robot, target)
    traj = sd.simulate(robot, q0, None, controller, duration, dt,
                       integrator="semi_implicit_euler", backend="numpy")
    path = sd.forward_kinematics(robot.configuration_model, traj.q)[:, tool, :3, 3]
    desired = np.array([target(t)[0] for t in traj.t])
    frames = sd.forward_kinematics(robot.configuration_model, traj.q)[:, tool, :3, :3]
    rotation = np.degrees(np.linalg.norm(Rotation.from_matrix(
        np.swapaxes(frames, -1, -2) @ T0[:3, :3]).as_rotvec(), axis=-1))
    return {"robot": robot, "traj": traj, "path": path, "desired": desired,
            "position_error": np.linalg.norm(path - desired, axis=-1), "rotation_error": rotation,
            "controller": controller}


def figure(out, docs=DOCS):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = out["traj"].t
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot(out["desired"][:, 1], out["desired"][:, 2], "k--", label="desired")
    axes[0].plot(out["path"][:, 1], out["path"][:, 2], label="tool frame")
    axes[0].set_xlabel("y [m]")
    axes[0].set_ylabel("z [m]")
    axes[0].set_aspect("equal")
    axes[0].legend(fontsize=8)
    axes[0].set_title("right gripper, world y-z plane", fontsize=9)
    axes[1].plot(t, 1e3 * out["position_error"], label="position error [mm]")
    axes[1].plot(t, out["rotation_error"], label="orientation error [deg]")
    axes[1].set_xlabel("t [s]")
    axes[1].set_yscale("log")
    axes[1].legend(fontsize=8)
    axes[1].set_title("wrench-driven pose control through the composed model (30 DoF)",
                      fontsize=9)
    fig.tight_layout()
    fig.savefig(docs / "wrench_pose_controller.png", dpi=110)
    plt.close(fig)


def main():
    out = run()
    e, r = out["position_error"], out["rotation_error"]
    half = len(e) // 2
    print(f"{out['robot']!r}: tool tracking a {0.08 * 100:g} cm circle, "
          f"{out['traj'].t[-1]:g} s simulated in {out['traj'].meta['wall_time']:.1f} s")
    print(f"position error: largest {1e3 * e.max():.1f} mm, largest after the first second "
          f"{1e3 * e[half:].max():.2f} mm; orientation error: largest {r.max():.2f} deg")
    figure(out)


if __name__ == "__main__":
    main()
