"""Simulating a robot with forward dynamics in conformal geometric algebra, and checking it against
the spatial algebra.

Sixteen Pandas start from random states and swing freely under gravity for half a second; a
fixed-step RK4 loop (written out below) integrates qdd = FD(q, qd, 0) once with ``algebra="cga"``
(motors, bivector twists and wrenches, the CGA inertia tensor: Löw and Calinon's articulated-body
recursion) and once with ``algebra="spatial"``. Prints how far the two trajectories drift apart
and how well the CGA run conserves energy, then reads the hand's final pose as a motor and its
screw (the logarithm).

Run: python examples/cga_simulation.py      (numpy only, about ten seconds)
"""
import numpy as np

import screwdyn as sd
from screwdyn.algebra import cga_types as cga

robot = sd.robots.load("panda")
rng = np.random.default_rng(0)
batch, dt, steps = 16, 2.5e-3, 200
q0 = np.stack([sd.random_configuration(robot, seed) for seed in range(batch)]) * 0.5
qd0 = rng.normal(scale=0.5, size=(batch, robot.nv))
tau = np.zeros(robot.nv)  # no joint torque, no friction: the energy is conserved


def rk4_step(q, qd, algebra):
    """One classical Runge-Kutta step of (q, qd)' = (qd, FD(q, qd, tau)) (no free joint, so
    q integrates like qd)."""
    def f(q, qd):
        return qd, sd.forward_dynamics(robot, q, qd, tau, algebra=algebra)

    k1 = f(q, qd)
    k2 = f(q + dt / 2 * k1[0], qd + dt / 2 * k1[1])
    k3 = f(q + dt / 2 * k2[0], qd + dt / 2 * k2[1])
    k4 = f(q + dt * k3[0], qd + dt * k3[1])
    return (q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            qd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))


def energy(q, qd):
    return sd.kinetic_energy(robot, q, qd) + sd.potential_energy(robot, q)


state = {"cga": (q0, qd0), "spatial": (q0, qd0)}
gap, e0 = 0.0, energy(q0, qd0)
for step in range(steps):
    for algebra in state:
        state[algebra] = rk4_step(*state[algebra], algebra)
    gap = max(gap, np.abs(state["cga"][0] - state["spatial"][0]).max())

q, qd = state["cga"]
print(f"{robot!r}: {batch} states, RK4, dt = {dt} s, {steps * dt:.1f} s")
print(f"largest |q_cga - q_spatial| along the way: {gap:.1e} rad")
print(f"energy drift |E(t) - E(0)| of the CGA run: {np.abs(energy(q, qd) - e0).max():.1e} J "
      f"(kinetic energy at the start: up to {sd.kinetic_energy(robot, q0, qd0).max():.2f} J)")

hand = robot.link_index("panda_hand")
M = cga.Motor.from_matrix(sd.forward_kinematics(robot, q[0])[hand])
print(f"the first hand's final pose as a motor: {M}")
print(f"its screw, -2 log M = [v; w]: {np.round((-2 * M.log()).vector(), 4)}")
