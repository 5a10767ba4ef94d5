"""iLQR (Gauss-Newton DDP) on the Panda: bring the hand to a point in one second.

The Franka Emika Panda (``sd.robots.load("panda")``, 7 arm joints and 2 finger joints, all
torque-controlled) starts at rest in its "ready" pose; in T = 1 s (100 steps of dt = 10 ms,
semi-implicit Euler, the simulation's own step) the origin of the link "panda_hand" must reach a
point 0.25 m away and stop there. Cost (the same in both solvers):

    sum_k dt 1/2 w_u |tau_k - g(q_0)|^2  +  1/2 w_p |p_hand(q_T) - p*|^2  +  1/2 w_v |qd_T|^2

(the torques measured from the gravity-compensating torque of the start pose, so that holding
the arm up is not what the cost is about; joint velocities at the end).

iLQR linearises the step around the current trajectory with ``step_derivatives`` (all 100
steps in one batched call: A_k = d x_{k+1} / d x_k, B_k = d x_{k+1} / d tau_k), takes a
Gauss-Newton model of the costs (the hand's Jacobian from ``sd.jacobian``), runs the Riccati
backward pass with Levenberg-Marquardt regularisation, and tries eight step lengths at once in a
closed-loop forward pass: ``sd.sim.rollout`` (the simulation as a pure JAX function) with the
feedback policy tau = u_k + alpha k_k + K_k (x - x_k), compiled with ``jax.jit``, one batch of
eight rollouts.

The same problem is then solved with Crocoddyl's FDDP on a Pinocchio model of the same URDF
(its Euler integrator is also semi-implicit; its running costs are weighted by dt as here), and
the two are printed side by side: in this process if Crocoddyl imports, else in the Python named
by the environment variable CROCODDYL_PYTHON (pip's crocoddyl 3.2.1 was built against
Pinocchio 4.0.0: with pin 4.1.0 beside it, it computes wrong accelerations and crashes, so it
may need its own virtual environment: ``pip install crocoddyl pin==4.0.0 libpinocchio==4.0.0``).

Run: python examples/ilqr_panda.py  (about 15 s: a few seconds of JAX compilation first)
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

if __name__ == "__main__" and sys.argv[1:] == ["--crocoddyl"]:
    # the Crocoddyl half run in another interpreter (see solve_crocoddyl): no screwdyn there
    sd = None
else:
    import screwdyn as sd
    from screwdyn.sim.step_derivatives import step_derivatives

DT, STEPS = 0.01, 100
INTEGRATOR = "semi_implicit_euler"
HAND = "panda_hand"
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02, 0.02])  # "ready"
OFFSET = np.array([0.15, 0.15, -0.12])  # the target, from the hand's start (m): 0.25 m away
W_U, W_QD = 1e-2, 1.0  # running: torques (per N^2 m^2 s), joint velocities (per rad^2 s)
W_P, W_V = 1e4, 10.0  # final: hand position (per m^2), joint velocities (per rad^2 / s^2)
ALPHAS = 0.5 ** np.arange(8)  # the line search's step lengths, tried in one batch


class Problem:
    """The reaching task: model, start, target, weights, cost and its Gauss-Newton model."""

    def __init__(self, model=None):
        self.model = model or sd.robots.load("panda")
        self.nv = self.model.nv
        self.q0, self.qd0 = Q0.copy(), np.zeros(self.nv)
        self.u_ref = np.asarray(sd.gravity_torques(self.model, Q0))
        self.target = self.hand(Q0) + OFFSET

    def hand(self, q):
        return np.asarray(sd.forward_kinematics(self.model, q))[..., self.model.link_index(HAND),
                                                                :3, 3]

    def cost(self, tau, qd, q_final):
        """Total cost of torques tau (..., STEPS, nv) and velocities qd (..., STEPS + 1, nv)
        ending at q_final (..., nq)."""
        du, v = tau - self.u_ref, qd[..., :-1, :]
        running = 0.5 * DT * (W_U * np.sum(du * du, axis=(-2, -1))
                              + W_QD * np.sum(v * v, axis=(-2, -1)))
        qd_final = qd[..., -1, :]
        e = self.hand(q_final) - self.target
        return running + 0.5 * W_P * np.sum(e * e, -1) + 0.5 * W_V * np.sum(qd_final ** 2, -1)

    def terminal_model(self, q, qd):
        """(V_x (2nv,), V_xx (2nv, 2nv)): gradient and Gauss-Newton Hessian of the final cost."""
        nv = self.nv
        e = self.hand(q) - self.target
        J = np.asarray(sd.jacobian(self.model, q, HAND))[:3]  # d p_hand / d q (fixed base)
        Vx = np.concatenate([W_P * J.T @ e, W_V * qd])
        Vxx = np.zeros((2 * nv, 2 * nv))
        Vxx[:nv, :nv] = W_P * J.T @ J
        Vxx[nv:, nv:] = W_V * np.eye(nv)
        return Vx, Vxx


def make_forward(problem):
    """The closed-loop forward pass: all step lengths in one compiled batch of rollouts."""
    import jax
    import jax.numpy as jnp

    model, nv = problem.model, problem.nv
    alphas = jnp.asarray(ALPHAS)

    @jax.jit
    def forward(us, ks, Ks, qs, qds):
        def policy(t, q, qd):  # q, qd (len(ALPHAS), nv): one rollout per step length
            k = jnp.clip(jnp.round(t / DT).astype(jnp.int32), 0, STEPS - 1)
            dx = jnp.concatenate([q - qs[k], qd - qds[k]], axis=-1)
            return us[k] + alphas[:, None] * ks[k] + dx @ Ks[k].T

        n = len(ALPHAS)
        q_roll, qd_roll = sd.sim.rollout(model, jnp.broadcast_to(jnp.asarray(problem.q0), (n, nv)),
                                         jnp.zeros((n, nv)), policy, STEPS, DT,
                                         integrator=INTEGRATOR, control="hold")
        dx = jnp.concatenate([q_roll[:-1] - qs[:, None], qd_roll[:-1] - qds[:, None]], -1)
        tau = us[:, None] + alphas[None, :, None] * ks[:, None] + jnp.einsum("kij,kaj->kai",
                                                                               Ks, dx)
        return q_roll, qd_roll, tau  # (STEPS + 1, n, nv) twice, (STEPS, n, nv)

    def run(us, ks, Ks, qs, qds):
        with jax.enable_x64(True):
            out = forward(*(jnp.asarray(a) for a in (us, ks, Ks, qs, qds)))
            return tuple(np.asarray(a) for a in out)

    return run


def backward(problem, A, B, qT, qds, us, mu):
    """The Riccati pass: feedforward ks (STEPS, nv), gains Ks (STEPS, nv, 2nv), the expected
    cost decrease's two terms, or None if a Q_uu was not positive definite."""
    nv = problem.nv
    Vx, Vxx = problem.terminal_model(qT, qds[-1])
    ks, Ks = np.zeros((STEPS, nv)), np.zeros((STEPS, nv, 2 * nv))
    d1 = d2 = 0.0
    for k in range(STEPS - 1, -1, -1):
        lu = W_U * DT * (us[k] - problem.u_ref)
        Qx = A[k].T @ Vx
        Qx[nv:] += W_QD * DT * qds[k]
        Qu = lu + B[k].T @ Vx
        VB = Vxx @ B[k]
        Qxx = A[k].T @ Vxx @ A[k]
        Qxx[nv:, nv:] += W_QD * DT * np.eye(nv)
        Quu = W_U * DT * np.eye(nv) + B[k].T @ VB
        Qux = VB.T @ A[k]
        try:
            L = np.linalg.cholesky(Quu + mu * np.eye(nv))
        except np.linalg.LinAlgError:
            return None
        solve = lambda b: np.linalg.solve(L.T, np.linalg.solve(L, b))  # noqa: E731
        kk, KK = -solve(Qu), -solve(Qux)
        ks[k], Ks[k] = kk, KK
        d1, d2 = d1 + kk @ Qu, d2 + 0.5 * kk @ Quu @ kk
        Vx = Qx + KK.T @ Quu @ kk + KK.T @ Qu + Qux.T @ kk
        Vxx = Qxx + KK.T @ Quu @ KK + KK.T @ Qux + Qux.T @ KK
        Vxx = 0.5 * (Vxx + Vxx.T)
    return ks, Ks, d1, d2


def solve_ilqr(problem=None, iterations=30, tolerance=1e-6, verbose=True):
    """iLQR from gravity compensation of the start pose: returns a dict with the torques,
    states, costs per iteration, seconds per iteration (compilation excluded), final error."""
    problem = problem or Problem()
    nv = problem.nv
    forward = make_forward(problem)
    us = np.tile(problem.u_ref, (STEPS, 1))
    zero_k, zero_K = np.zeros((STEPS, nv)), np.zeros((STEPS, nv, 2 * nv))
    t0 = time.perf_counter()
    q_roll, qd_roll, _ = forward(us, zero_k, zero_K, np.zeros((STEPS, nv)), np.zeros((STEPS, nv)))
    qs, qds = q_roll[:, 0], qd_roll[:, 0]
    step_derivatives(problem.model, qs[:-1], qds[:-1], us, DT, INTEGRATOR)  # compile
    compile_time = time.perf_counter() - t0
    cost = float(problem.cost(us, qds, qs[-1]))
    costs, mu, times = [cost], 1e-6, []
    if verbose:
        print(f"iLQR: start cost {cost:.4f} (hand {1e3 * np.linalg.norm(OFFSET):.0f} mm from the "
              f"target); compilation {compile_time:.2f} s")
    for it in range(iterations):
        t0 = time.perf_counter()
        _, A, B = step_derivatives(problem.model, qs[:-1], qds[:-1], us, DT, INTEGRATOR)
        t_derivatives = time.perf_counter() - t0
        while True:
            out = backward(problem, A, B, qs[-1], qds, us, mu)
            if out is not None:
                break
            mu *= 10
        ks, Ks, d1, d2 = out
        t_backward = time.perf_counter() - t0 - t_derivatives
        q_roll, qd_roll, tau = forward(us, ks, Ks, qs[:-1], qds[:-1])
        trial = problem.cost(np.moveaxis(tau, 0, 1), np.moveaxis(qd_roll, 0, 1), q_roll[-1])
        best = int(np.argmin(trial))
        expected = -(ALPHAS[best] * d1 + ALPHAS[best] ** 2 * d2)
        times.append(time.perf_counter() - t0)
        accepted = trial[best] < cost
        if accepted:
            us, qs, qds = tau[:, best], q_roll[:, best], qd_roll[:, best]
            decrease, cost = cost - trial[best], float(trial[best])
            mu = max(mu / 10, 1e-9)
        else:
            decrease, mu = 0.0, mu * 10
        costs.append(cost)
        if verbose:
            print(f"  iteration {it + 1:2d}: cost {cost:.6f}  step {ALPHAS[best]:.3g}  "
                  f"(expected decrease {expected:.2e})  {1e3 * times[-1]:.1f} ms "
                  f"(derivatives {1e3 * t_derivatives:.1f}, backward {1e3 * t_backward:.1f})")
        if (accepted and decrease < tolerance * cost) or mu > 1e8:
            break
    error = float(np.linalg.norm(problem.hand(qs[-1]) - problem.target))
    return {"tau": us, "q": qs, "qd": qds, "costs": costs, "times": times, "error": error,
            "speed": float(np.linalg.norm(qds[-1])), "compile_time": compile_time}


def crocoddyl_fddp(spec):
    """Crocoddyl's FDDP on the problem described by ``spec`` (plain numbers: the URDF's path,
    start, gravity torque, target, weights, dt, steps): numpy, Pinocchio and Crocoddyl only, so
    that it can run in another interpreter. Returns the solution as lists."""
    import crocoddyl
    import pinocchio

    pm = pinocchio.buildModelFromUrdf(spec["urdf"])
    pm.gravity.linear[:] = spec["gravity"]
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFull(state)
    nu, nv = actuation.nu, pm.nv
    q0, u_ref, dt, steps = (np.array(spec["q0"]), np.array(spec["u_ref"]), spec["dt"],
                            spec["steps"])
    w_u, w_qd, w_p, w_v = spec["weights"]
    velocity = crocoddyl.ActivationModelWeightedQuad(np.r_[np.zeros(nv), np.ones(nv)])
    rest = np.r_[q0, np.zeros(nv)]
    running = crocoddyl.CostModelSum(state, nu)
    running.addCost("tau", crocoddyl.CostModelResidual(
        state, crocoddyl.ResidualModelControl(state, u_ref)), w_u)
    running.addCost("velocity", crocoddyl.CostModelResidual(
        state, velocity, crocoddyl.ResidualModelState(state, rest, nu)), w_qd)
    final = crocoddyl.CostModelSum(state, nu)
    final.addCost("hand", crocoddyl.CostModelResidual(
        state, crocoddyl.ResidualModelFrameTranslation(state, pm.getFrameId(spec["frame"]),
                                                       np.array(spec["target"]), nu)), w_p)
    final.addCost("velocity", crocoddyl.CostModelResidual(
        state, velocity, crocoddyl.ResidualModelState(state, rest, nu)), w_v)

    def integrated(costs, step):  # semi-implicit Euler, running costs times dt
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
        return crocoddyl.IntegratedActionModelEuler(dam, step)

    # a check that this Crocoddyl and Pinocchio agree (a Crocoddyl wheel on another
    # Pinocchio's ABI computes wrong accelerations or crashes)
    model = integrated(running, dt)
    data = model.createData()
    x, u = np.r_[q0, np.ones(nv)], u_ref + 1.0
    model.calc(data, x, u)
    aba = pinocchio.aba(pm, pm.createData(), q0, np.ones(nv), u)
    if not np.allclose(data.differential.xout, aba, atol=1e-9):
        raise RuntimeError(f"Crocoddyl {crocoddyl.__version__} and Pinocchio "
                           f"{pinocchio.__version__} disagree on the dynamics (binary mismatch)")
    shooting = crocoddyl.ShootingProblem(np.r_[q0, np.zeros(nv)], [model] * steps,
                                         integrated(final, 0.0))
    solver = crocoddyl.SolverFDDP(shooting)
    us0 = [u_ref.copy() for _ in range(steps)]
    xs0 = shooting.rollout(us0)
    solver.solve(xs0, us0, 1, False)  # warm-up: allocations, first calls
    solver = crocoddyl.SolverFDDP(shooting)
    t0 = time.perf_counter()
    solver.solve(xs0, us0, spec["iterations"], False)
    seconds = time.perf_counter() - t0
    return {"cost": float(solver.cost), "iterations": int(solver.iter), "seconds": seconds,
            "us": np.array(solver.us).tolist(), "xs": np.array(solver.xs).tolist(),
            "version": f"Crocoddyl {crocoddyl.__version__}, Pinocchio {pinocchio.__version__}"}


def solve_crocoddyl(problem=None, iterations=100, verbose=True):
    """The same problem with Crocoddyl's FDDP: in this process if Crocoddyl imports here, else
    in the interpreter named by the environment variable CROCODDYL_PYTHON (a virtual
    environment where ``pip install crocoddyl`` gave a consistent Crocoddyl and Pinocchio).
    None if neither works (the reason printed)."""
    problem = problem or Problem()
    spec = {"urdf": str(sd.robots.path("panda")), "gravity": list(problem.model.gravity),
            "q0": problem.q0.tolist(), "u_ref": problem.u_ref.tolist(), "frame": HAND,
            "target": problem.target.tolist(), "weights": [W_U, W_QD, W_P, W_V], "dt": DT,
            "steps": STEPS, "iterations": iterations}
    try:
        import crocoddyl  # noqa: F401
        out = crocoddyl_fddp(spec)
    except (ImportError, RuntimeError) as e:
        python = os.environ.get("CROCODDYL_PYTHON")
        if not python:
            if verbose:
                print(f"Crocoddyl not run here ({e}); set CROCODDYL_PYTHON to an interpreter "
                      "with crocoddyl installed")
            return None
        run = subprocess.run([python, os.path.abspath(__file__), "--crocoddyl"],
                             input=json.dumps(spec), capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            if verbose:
                print(f"Crocoddyl failed in {python}: {run.stderr.strip().splitlines()[-1:]}")
            return None
        out = json.loads(run.stdout.strip().splitlines()[-1])
    xs, us = np.array(out["xs"]), np.array(out["us"])
    nv = problem.nv
    # Crocoddyl's torques simulated by screwdyn: the same problem, checked
    traj = sd.simulate(problem.model, problem.q0, None, us, STEPS * DT, DT, integrator=INTEGRATOR)
    result = dict(out, per_iteration=out["seconds"] / max(out["iterations"], 1), tau=us,
                  error=float(np.linalg.norm(problem.hand(xs[-1, :nv]) - problem.target)),
                  cost_in_screwdyn=float(problem.cost(us, traj.qd, traj.q[-1])),
                  final_state_difference=float(np.abs(traj.q[-1] - xs[-1, :nv]).max()))
    if verbose:
        print(f"{out['version']} FDDP: cost {result['cost']:.6f} in {out['iterations']} "
              f"iterations, {1e3 * out['seconds']:.1f} ms ({1e3 * result['per_iteration']:.2f} "
              "ms per iteration)")
    return result


def main():
    problem = Problem()
    ilqr = solve_ilqr(problem)
    per_it = np.median(ilqr["times"])
    print(f"iLQR: final cost {ilqr['costs'][-1]:.6f} after {len(ilqr['times'])} iterations; "
          f"hand {1e3 * ilqr['error']:.2f} mm from the target, |qd_T| = {ilqr['speed']:.4f} "
          f"rad/s; {1e3 * per_it:.1f} ms per iteration (median), "
          f"{sum(ilqr['times']):.2f} s in all")
    croc = solve_crocoddyl(problem)
    if croc is None:
        return
    print(f"Crocoddyl's torques simulated by screwdyn: cost {croc['cost_in_screwdyn']:.6f}, final "
          f"q within {croc['final_state_difference']:.1e} rad of Crocoddyl's own rollout")
    print()
    print("| solver | iterations | final cost | hand error (mm) | ms per iteration | total (ms) |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| screwdyn iLQR (Python loop, step_derivatives) | {len(ilqr['times'])} | "
          f"{ilqr['costs'][-1]:.6f} | {1e3 * ilqr['error']:.2f} | {1e3 * per_it:.1f} | "
          f"{1e3 * sum(ilqr['times']):.0f} |")
    print(f"| Crocoddyl FDDP (C++) | {croc['iterations']} | {croc['cost']:.6f} | "
          f"{1e3 * croc['error']:.2f} | {1e3 * croc['per_iteration']:.2f} | "
          f"{1e3 * croc['seconds']:.0f} |")


if __name__ == "__main__":
    if sd is None:
        print(json.dumps(crocoddyl_fddp(json.loads(sys.stdin.read()))))
    else:
        main()
