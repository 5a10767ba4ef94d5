"""A two-finger gripper lifts a box off the ground: a ``sd.Scene`` with rigid body-body contact.

    python examples/gripper_lift.py

The gripper: a carriage on a vertical prismatic joint (``lift``) 0.3 m above the ground, and two
finger plates (0.02 x 0.1 x 0.2 m boxes) on prismatic joints closing towards each other. The box:
a 0.1 m cube of 0.2 kg on the ground between the fingers. The controller squeezes each finger
with 10 N from the start and, after 0.5 s, raises the carriage by 0.2 m over 0.5 s under PD
(with gravity feed-forward). Friction (mu = 1) between the plates and the box carries it: the box
rises with the carriage, without slipping.
"""
import numpy as np

import screwdyn as sd
from screwdyn.sim import collision

SQUEEZE, LIFT = 10.0, 0.2  # N per finger, m


def scene():
    """(model, contact, q0): the gripper above the box on the ground."""
    s = sd.Scene("gripper")
    b = s.builder
    b.add_link("carriage", mass=1.0, inertia=np.eye(3) * 0.01)
    b.add_joint("lift", "prismatic", "world", "carriage", xyz=(0, 0, 0.3), axis=(0, 0, 1))
    for side, sign in (("left", 1.0), ("right", -1.0)):
        b.add_link(side, mass=0.2, inertia=np.eye(3) * 1e-3)
        b.add_joint(f"{side}_slide", "prismatic", "carriage", side, xyz=(0.12 * sign, 0, 0),
                    axis=(-sign, 0, 0))
        s.add_shape(side, collision.box((0.01, 0.05, 0.1)), xyz=(0, 0, -0.19))
    s.add_object("box", collision.box((0.05, 0.05, 0.05)), mass=0.2, position=(0, 0, 0.05))
    return s.build(mu=1.0)


def _clip01(x):
    """min(max(x, 0), 1) with arithmetic only (numpy, JAX and the native tracer alike)."""
    return 0.5 * (abs(x) - abs(x - 1.0) + 1.0)


def controller(model):
    """Joint forces: the fingers squeezed (10 N, damped), the carriage raised by PD after
    0.5 s, its weight and the box's fed forward."""
    lift = np.eye(model.nv)[0]
    fingers = np.eye(model.nv)[1] + np.eye(model.nv)[2]

    def tau(t, q, qd):
        target = LIFT * _clip01((t - 0.5) / 0.5)
        push = 400.0 * (target - q[..., 0:1]) - 40.0 * qd[..., 0:1] + (1.0 + 0.4 + 0.2) * 9.81
        return push * lift + (SQUEEZE - 2.0 * qd) * fingers

    return tau


def lift_box(t_final=1.5, dt=1e-3, backend="auto"):
    """The trajectory of the lift (semi-implicit Euler)."""
    model, contact, q0 = scene()
    return sd.simulate(model, q0, None, controller(model), t_final, dt, contact=contact,
                       integrator="semi_implicit_euler", backend=backend)


if __name__ == "__main__":
    traj = lift_box()
    print(f"backend {traj.meta['backend']}, {traj.meta['wall_time']:.1f} s "
          f"(+ {traj.meta['compile_time']:.1f} s compiling)")
    for t in (0.0, 0.5, 1.0, 1.5):
        k = traj.t.searchsorted(t - 1e-9)
        print(f"t = {t:.1f} s: carriage {traj.q[k, 0]:+.4f} m, box centre "
              f"{traj.q[k, 5]:.4f} m above the ground")
