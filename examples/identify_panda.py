"""Identify the Panda's inertial parameters from a simulated, noisy trajectory.

The Franka Emika Panda of example-robot-data (``sd.robots.load("panda")``: 7 arm joints and 2
finger joints, 9 bodies, 90 inertial parameters) follows exciting references (a sum of sines per
joint, different in each of a batch of rollouts) under computed-torque control, simulated with
``sd.simulate``. Gaussian noise is added to the measured torques. Inverse dynamics is linear in
the parameters, tau = Y(q, qd, qdd) pi (``sd.inverse_dynamics_regressor``), so stacking Y over
the samples gives a least-squares problem W pi = tau. Not every parameter can be identified from
joint torques: W has a null space (a body's mass moves no joint whose axis passes through it,
parameters of bodies near the base show only in combinations). QR with column pivoting of W
finds its rank r and r *base parameters* beta = pi_independent + K pi_dependent: the identifiable
combinations. They are estimated, compared with their true values, and the identified model
predicts the torques of a held-out trajectory.

Run: python examples/identify_panda.py
"""
import time

import numpy as np
import scipy.linalg

import screwdyn as sd
from screwdyn.controllers import ComputedTorque

NOISE = 0.5  # N m (N for the fingers): standard deviation of the torque measurement noise
ROLLOUTS, SECONDS, DT, EVERY = 8, 1.5, 5e-3, 2  # simulated runs; 1 sample in EVERY is used


def exciting_reference(model, seed):
    """q_ref(t) = centre + sum_h a_h sin(2 pi f_h t + phi_h) per joint and rollout (a batch of
    ROLLOUTS references), inside the joint limits; returns t -> (q, qd, qdd) of shape
    (ROLLOUTS, nv)."""
    rng = np.random.default_rng(seed)
    lower, upper = model.lower_position_limit, model.upper_position_limit
    centre, half = (lower + upper) / 2, (upper - lower) / 2
    f = rng.uniform(0.1, 0.6, size=(3, ROLLOUTS, model.nv))  # Hz, three harmonics
    a = rng.uniform(0.1, 0.25, size=(3, ROLLOUTS, model.nv)) * half
    phi = rng.uniform(0, 2 * np.pi, size=(3, ROLLOUTS, model.nv))
    w = 2 * np.pi * f

    def reference(t):
        s, c = np.sin(w * t + phi), np.cos(w * t + phi)
        return (centre + (a * s).sum(0), (a * w * c).sum(0), -(a * w * w * s).sum(0))

    return reference


def measure(model, seed, rng):
    """A batch of simulated rollouts: (q, qd, qdd, noisy tau) of every EVERY-th sample."""
    reference = exciting_reference(model, seed)
    controller = ComputedTorque(model, reference, kp=100.0, kd=20.0)
    q0, qd0, _ = reference(0.0)
    traj = sd.simulate(model, q0, qd0, controller, t_final=SECONDS, dt=DT, backend="numpy",
                       control="hold")  # a digital controller at 1/DT
    pick = slice(None, None, EVERY)
    q, qd, qdd, tau = (getattr(traj, k)[:, pick].reshape(-1, n) for k, n in
                       (("q", model.nq), ("qd", model.nv), ("qdd", model.nv), ("tau", model.nv)))
    return q, qd, qdd, tau + NOISE * rng.normal(size=tau.shape)


def base_parameters(W, tolerance=1e-8):
    """QR with column pivoting of the stacked regressor W (samples * nv, p): the rank r, the
    independent columns P[:r] and K with W[:, P[r:]] = W[:, P[:r]] K, so that W pi = W[:, P[:r]]
    beta with beta = pi[P[:r]] + K pi[P[r:]]. A column counts as independent while |R_kk| >
    tolerance * |R_00|."""
    _, R, P = scipy.linalg.qr(W, mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    r = int(np.sum(diagonal > tolerance * diagonal[0]))
    K = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:])
    return r, P, K


def main():
    start = time.perf_counter()
    panda = sd.robots.load("panda")
    pi = panda.inertial_parameters().reshape(-1)
    rng = np.random.default_rng(0)
    q, qd, qdd, tau = measure(panda, seed=1, rng=rng)
    simulated = time.perf_counter() - start
    W = sd.inverse_dynamics_regressor(panda, q, qd, qdd).reshape(-1, pi.size)
    y = tau.reshape(-1)
    r, P, K = base_parameters(W)
    beta_true = pi[P[:r]] + K @ pi[P[r:]]
    beta, *_ = np.linalg.lstsq(W[:, P[:r]], y, rcond=None)
    # standard errors of the estimate: NOISE^2 (W_b^T W_b)^-1
    sigma = NOISE * np.sqrt(np.diag(np.linalg.inv(W[:, P[:r]].T @ W[:, P[:r]])))
    error = np.abs(beta - beta_true)
    print(f"Panda: {panda.nbodies} bodies, {pi.size} inertial parameters; "
          f"{len(q)} samples ({ROLLOUTS} rollouts of {SECONDS:g} s, 1 step in {EVERY} of "
          f"{DT * 1e3:g} ms), torque noise {NOISE} N m")
    print(f"stacked regressor W: {W.shape}, rank {r} = the number of base parameters "
          f"({pi.size - r} combinations are not identifiable)")
    print(f"base parameters: |error| / standard error: median {np.median(error / sigma):.2f}, "
          f"max {np.max(error / sigma):.2f}; relative error of the 10 best determined: "
          f"{np.sort(error / np.maximum(np.abs(beta_true), 1e-12))[:10].max():.1e}")
    names = [f"{panda.bodies[c // 10].link}.{sd.identification.PARAMETER_NAMES[c % 10]}"
             for c in P[:r]]
    print("e.g.  " + "; ".join(f"{n} (+ combination) true {b:.4g} estimated {e:.4g}"
                               for n, b, e in list(zip(names, beta_true, beta))[:3]))
    # held out: another batch of references
    q2, qd2, qdd2, tau2 = measure(panda, seed=2, rng=rng)
    W2 = sd.inverse_dynamics_regressor(panda, q2, qd2, qdd2).reshape(-1, pi.size)
    predicted = W2[:, P[:r]] @ beta
    clean = W2 @ pi
    rms = np.sqrt(np.mean((predicted - tau2.reshape(-1)) ** 2))
    rms_clean = np.sqrt(np.mean((predicted - clean) ** 2))
    print(f"held-out trajectory ({len(q2)} samples): torque prediction RMS error "
          f"{rms:.3f} N m against the noisy torques (noise {NOISE}), {rms_clean:.4f} N m "
          f"against the noise-free torques (RMS torque {np.sqrt(np.mean(clean ** 2)):.2f} N m)")
    print(f"total {time.perf_counter() - start:.1f} s (simulation {simulated:.1f} s)")
    return dict(rank=r, rms=rms, rms_clean=rms_clean, error_over_sigma=np.max(error / sigma))


if __name__ == "__main__":
    main()
