"""A computed-torque controller tracking a trajectory on a branched robot: the bundled ``dual_arm``
(a torso on a yaw joint carrying two 7-joint Panda arms, 15 DoF, the kind of tree the
branched-robot paper composes from subsystems).

Every joint follows a sinusoid about a nominal pose. The controller is inverse dynamics of the
reference acceleration plus a PD correction, tau = ID(q, qd, qdd_r + kd (qd_r - qd) + kp (q_r - q)),
with kp = w^2, kd = 2 w: started off the reference, the error decays as e0 (1 + w t) exp(-w t),
which the run is checked against. A second run holds the controller's output for each 1 ms step
(a digital controller) and shows the lag that costs. Saves computed_torque_branched.png and
dual_arm.png.

Run: python examples/computed_torque_branched.py     (needs matplotlib for the pictures)
"""
import numpy as np

import screwdyn as sd
from screwdyn import controllers
from screwdyn import simulate

model = sd.robots.load("dual_arm")
arm_pose = [0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8]
nominal = np.array([0.0] + arm_pose + arm_pose)
rng = np.random.default_rng(1)
reference = controllers.sinusoid(center=nominal, amplitude=rng.uniform(0.1, 0.4, model.nv),
                                 frequency=rng.uniform(0.2, 0.6, model.nv),
                                 phase=rng.uniform(0, 2 * np.pi, model.nv))
omega = 12.0
controller = controllers.ComputedTorque(model, reference, kp=omega ** 2, kd=2 * omega)

q_r0, qd_r0, _ = reference(0.0)
e0 = rng.uniform(-0.05, 0.05, model.nv)
duration, dt = 3.0, 1e-3
traj = simulate(model, q_r0 - e0, qd_r0, controller, duration, dt)
held = simulate(model, q_r0 - e0, qd_r0, controller, duration, dt, control="hold")

q_ref = np.stack([reference(t)[0] for t in traj.t])
error = q_ref - traj.q
predicted = np.outer((1 + omega * traj.t) * np.exp(-omega * traj.t), e0)
print(f"{model!r}: computed torque, kp = {omega ** 2:g}, kd = {2 * omega:g}, "
      f"{duration} s at dt = {dt} s, backend {traj.meta['backend']}")
print(f"wall time {traj.meta['wall_time']:.2f} s (+ {traj.meta['compile_time']:.1f} s "
      f"compilation), real-time factor {traj.real_time_factor:.1f}")
print(f"{'t [s]':>6}{'max |e|':>12}{'predicted':>12}{'held (digital)':>16}")
held_error = np.abs(q_ref - held.q).max(axis=1)
for t_show in (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0):
    k = int(round(t_show / dt))
    print(f"{t_show:>6.2f}{np.abs(error[k]).max():>12.2e}{np.abs(predicted[k]).max():>12.2e}"
          f"{held_error[k]:>16.2e}")
print(f"largest deviation from the closed-form error decay: "
      f"{np.abs(error - predicted).max():.2e} rad")
peak = np.abs(traj.tau).max(axis=0)
print(f"peak torques: torso {peak[0]:.1f} N m, left arm {peak[1:8].max():.1f} N m, "
      f"right arm {peak[8:].max():.1f} N m")

try:
    import matplotlib

    matplotlib.use("Agg")
except ImportError:
    print("matplotlib is not installed: no pictures (pip install 'screwdyn[plot]')")
else:
    from matplotlib.figure import Figure

    from screwdyn import plot

    fig = Figure(figsize=(9, 7))
    ax_e, ax_tau = fig.subplots(2, 1, sharex=True)
    ax_e.semilogy(traj.t, np.abs(error).max(axis=1) + 1e-18, label="max |e|, continuous")
    ax_e.semilogy(traj.t, np.abs(predicted).max(axis=1) + 1e-18, "--",
                  label="e0 (1 + w t) exp(-w t)")
    ax_e.semilogy(held.t, held_error + 1e-18, label="max |e|, held 1 ms (digital)")
    ax_e.set_ylabel("tracking error [rad]")
    ax_e.legend(fontsize="small")
    for j, name in enumerate(model.joint_names):
        ax_tau.plot(traj.t, traj.tau[:, j], lw=0.8, color="k" if j == 0 else
                    (f"C{j % 10}"), ls="-" if j < 8 else "--")
    ax_tau.set_ylabel("tau [N m]  (solid: torso, left; dashed: right)")
    ax_tau.set_xlabel("t [s]")
    ax_e.set_title("dual_arm: computed-torque tracking")
    fig.savefig("computed_torque_branched.png", dpi=110, bbox_inches="tight")
    plot.draw_robot(model, traj.q[-1], path="dual_arm.png", title="dual_arm at t = 3 s")
    print("saved computed_torque_branched.png, dual_arm.png")
