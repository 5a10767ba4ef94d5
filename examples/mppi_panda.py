"""MPPI (model-predictive path integral control) on the Panda: the reaching task of
``ilqr_panda.py`` solved by sampling, with batched rollouts.

The same task and cost as ``examples/ilqr_panda.py``: from the "ready" pose, the hand to a point
0.25 m away in 1 s (100 steps of 10 ms, semi-implicit Euler), quadratic costs on the torques
(from gravity compensation of the start pose) and joint velocities along the way, on the hand's
final position error and the final joint velocities.

MPPI needs no derivatives: at each MPC iteration it perturbs its torque plan with Gaussian noise
(K = 256 samples, the plan itself among them), simulates every perturbed plan from the current
state in one ``sd.simulate`` call (a batch of K initial states and a torque table per rollout:
(K, steps, nv)), weighs each sample by exp(-cost / lambda) and moves the plan to the weighted
mean. Receding (here shrinking) horizon: after a few such updates the first 0.1 s of the plan is
applied to the robot (simulated), and the plan is re-optimised over the rest of the second from
the state reached, ten times in all.

Run: python examples/mppi_panda.py  (about 10 s; the first simulation compiles the step)
"""
import os
import sys
import time

import numpy as np

import screwdyn as sd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ilqr_panda import DT, INTEGRATOR, STEPS, Problem  # noqa: E402  (the same task and cost)

SAMPLES = 256
MPC_ITERATIONS = 10  # each applies STEPS // MPC_ITERATIONS steps (0.1 s) of the plan
UPDATES = 3  # MPPI updates of the plan per MPC iteration
ACCELERATION_NOISE = 1.0  # rad/s^2: the torque noise of joint i is this times M_ii(q0)
KNOT = 10  # the noise is drawn every KNOT steps (0.1 s) and interpolated linearly between
TEMPERATURE = 0.02  # lambda, as a fraction of the spread (max - min) of each batch's costs


def smooth_noise(rng, sigma, samples, horizon):
    """(samples, horizon, nv) Gaussian torque perturbations of standard deviation sigma (nv,) at
    knots KNOT steps apart, linear in between (white noise at every 10 ms step mostly shakes
    the arm)."""
    knots = np.arange(0, horizon + KNOT, KNOT)
    values = rng.normal(size=(samples, len(knots), len(sigma))) * sigma
    steps = np.arange(horizon)
    i = np.minimum(steps // KNOT, len(knots) - 2)
    f = ((steps - knots[i]) / KNOT)[None, :, None]
    return (1 - f) * values[:, i] + f * values[:, i + 1]


def sample_costs(problem, q, qd, tables):
    """The cost of each torque table (K, horizon, nv) run open loop from (q, qd): the K
    rollouts in one ``sd.simulate`` call. A sample that diverges (``SimulationError`` names the
    rollout: a random open-loop torque can spin the light wrist up) costs infinity and the rest
    are simulated again without it."""
    model, (samples, horizon, nv) = problem.model, tables.shape
    cost = np.full(samples, np.inf)
    alive = np.ones(samples, bool)
    while alive.any():
        index = np.flatnonzero(alive)
        try:
            batch = sd.simulate(model, np.broadcast_to(q, (len(index), model.nq)),
                                np.broadcast_to(qd, (len(index), nv)), tables[index],
                                horizon * DT, DT, integrator=INTEGRATOR)
        except sd.SimulationError as e:
            alive[index[e.rollout[0]]] = False
            continue
        cost[index] = problem.cost(tables[index], batch.qd, batch.q[:, -1])
        return cost
    return cost


def mppi(problem=None, samples=SAMPLES, mpc_iterations=MPC_ITERATIONS, updates=UPDATES,
         seed=0, verbose=True):
    """Shrinking-horizon MPPI; returns the applied torques (STEPS, nv), the cost of the run
    they make, the hand's final error, and the wall time per MPC iteration."""
    problem = problem or Problem()
    model = problem.model
    rng = np.random.default_rng(seed)
    # the same acceleration noise for every joint: torque noise scaled by the joint's inertia
    # (the wrist joints are 100 times lighter than the shoulder's)
    sigma = ACCELERATION_NOISE * np.diag(np.asarray(sd.mass_matrix(model, problem.q0)))
    apply = STEPS // mpc_iterations
    plan = np.tile(problem.u_ref, (STEPS, 1))
    q, qd = problem.q0.copy(), problem.qd0.copy()
    applied, times, rollouts = [], [], 0
    t_start = time.perf_counter()
    for it in range(mpc_iterations):
        t0 = time.perf_counter()
        horizon = len(plan)
        for _ in range(updates):
            noise = smooth_noise(rng, sigma, samples, horizon)
            noise[0] = 0.0  # the plan itself is one of the samples
            tables = plan + noise
            cost = sample_costs(problem, q, qd, tables)
            rollouts += samples
            finite = cost[np.isfinite(cost)]
            lam = TEMPERATURE * max(finite.max() - finite.min(), 1e-12)
            w = np.exp(-(cost - finite.min()) / lam)  # 0 for a diverged sample
            w /= w.sum()
            plan = plan + np.einsum("k,kti->ti", w, noise)
        # apply the first 0.1 s of the plan to the robot; the rest is the next plan
        step = sd.simulate(model, q, qd, plan[:apply], apply * DT, DT, integrator=INTEGRATOR)
        q, qd = step.q[-1], step.qd[-1]
        applied.append(plan[:apply])
        plan = plan[apply:]
        times.append(time.perf_counter() - t0)
        if verbose:
            print(f"  MPC iteration {it + 1:2d}: best sample cost {cost.min():.4f} (over the "
                  f"{horizon} remaining steps), hand "
                  f"{1e3 * np.linalg.norm(problem.hand(q) - problem.target):.1f} mm from the "
                  f"target; {1e3 * times[-1]:.0f} ms")
    tau = np.concatenate(applied)
    run = sd.simulate(model, problem.q0, problem.qd0, tau, STEPS * DT, DT, integrator=INTEGRATOR)
    return {"tau": tau, "cost": float(problem.cost(tau, run.qd, run.q[-1])),
            "error": float(np.linalg.norm(problem.hand(run.q[-1]) - problem.target)),
            "speed": float(np.linalg.norm(run.qd[-1])), "times": times,
            "seconds": time.perf_counter() - t_start, "rollouts": rollouts}


def main():
    problem = Problem()
    # compile the batched step once (the native program is also cached on disk)
    t0 = time.perf_counter()
    sd.simulate(problem.model, np.broadcast_to(problem.q0, (SAMPLES, problem.model.nq)), None,
                np.tile(problem.u_ref, (SAMPLES, STEPS, 1)), STEPS * DT, DT, integrator=INTEGRATOR)
    print(f"MPPI: K = {SAMPLES} samples, {UPDATES} updates per MPC iteration; first batch "
          f"(compilation included) {time.perf_counter() - t0:.2f} s")
    result = mppi(problem)
    print(f"MPPI: cost {result['cost']:.4f}, hand {1e3 * result['error']:.1f} mm from the target, "
          f"|qd_T| = {result['speed']:.3f} rad/s; {1e3 * np.median(result['times']):.0f} ms per "
          f"MPC iteration (median), {result['seconds']:.2f} s in all for {result['rollouts']} "
          f"rollouts")


if __name__ == "__main__":
    main()
