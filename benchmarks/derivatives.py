"""Derivatives of inverse and forward dynamics beside Pinocchio, in one process (first calls in
fresh processes).

    python benchmarks/derivatives.py            # about 5 minutes on 2 cores
    python benchmarks/derivatives.py --quick    # Panda and Talos, fewer rounds

For the Panda, Talos on a floating base and a 100-link chain (the URDFs of ``latency.py``,
meshes stripped, joints in Pinocchio's order):

1. **agreement**: ``sd.dynamics_derivatives`` (ID: qdd given; FD: tau given) against
   ``pinocchio.computeRNEADerivatives`` / ``computeABADerivatives`` at random states (max
   absolute difference over the three matrices, and the largest entry for scale);
2. **one state**: the public call with 1-D numpy arrays and ``sd.compile(model,
   "inverse_dynamics_derivatives")`` (model-bound) against Pinocchio's call, CPU time per call
   (of every thread: so each candidate runs once first and the optimised code it queues is
   waited for), median of interleaved rounds (``latency.interleaved``); in brackets our time
   over Pinocchio's (lower is better);
3. **batch of 1,000**: one call on (1000, n) arrays against a Pinocchio loop, per state: the
   loop alone (each state's matrices left in Pinocchio's ``Data``, overwritten by the next),
   and the loop that keeps them (copied into a (1000, 3, nv, nv) array made once, as our call
   returns them; Pinocchio's M and M^-1 upper triangles only, ours whole); in brackets our
   time over each. Ours twice: a fresh result per call, and ``out=`` an array made once (as
   Pinocchio's loop writes into its ``Data``: no fresh memory touched per call);
4. **first call**: in a fresh process with an empty program cache, the seconds to the first
   result of each (tracing, compiling, running);
5. **jit(grad)** (``--grad``): a scalar of forward dynamics on Talos with its inertial parameters
   traced (``model.with_inertial_parameters``), ``jax.jit(jax.grad(loss))`` with respect to
   the parameters: compile seconds and run time over the function's.

Writes ``derivatives.json`` to ``--out`` (default ``benchmarks/results``) with the load average.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)

import screwdyn as sd  # noqa: E402
from latency import interleaved, load  # noqa: E402
from run import optional, versions  # noqa: E402
from screwdyn.execution.native import wait_for_optimisation  # noqa: E402

CHILD = r"""
import json, sys, time, warnings
import numpy as np
t0 = time.perf_counter()
import screwdyn as sd
path, floating, kind = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model = sd.load_urdf(path, floating_base=floating, joint_order="name")
q = sd.random_configuration(model, seed=0)
x = np.linspace(-1, 1, model.nv)
t = time.perf_counter()
sd.dynamics_derivatives(model, q, x, **{kind: x})
print(json.dumps(time.perf_counter() - t))
"""


def states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    q = np.stack([sd.random_configuration(model, seed=seed + k) for k in range(n)])
    return q, rng.uniform(-1, 1, (n, model.nv)), rng.uniform(-1, 1, (n, model.nv))


def agreement(robot, pin):
    model, pm = robot["model"], robot["pin"]
    pd = pm.createData()
    q, qd, u = states(model, 5, 7)
    worst = {"ID": 0.0, "FD": 0.0}
    scale = {"ID": 0.0, "FD": 0.0}
    for k in range(len(q)):
        d = sd.dynamics_derivatives(model, q[k], qd[k], qdd=u[k])
        pin.computeRNEADerivatives(pm, pd, q[k], qd[k], u[k])
        pd.M[np.tril_indices(model.nv, -1)] = pd.M.T[np.tril_indices(model.nv, -1)]
        for ours, theirs in zip(d, (pd.dtau_dq, pd.dtau_dv, pd.M)):
            worst["ID"] = max(worst["ID"], float(np.abs(ours - theirs).max()))
            scale["ID"] = max(scale["ID"], float(np.abs(theirs).max()))
        f = sd.dynamics_derivatives(model, q[k], qd[k], tau=u[k])
        pin.computeABADerivatives(pm, pd, q[k], qd[k], u[k])
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        for ours, theirs in zip(f, (pd.ddq_dq, pd.ddq_dv, Minv)):
            worst["FD"] = max(worst["FD"], float(np.abs(ours - theirs).max()))
            scale["FD"] = max(scale["FD"], float(np.abs(theirs).max()))
    return {k: {"max abs difference": worst[k], "largest entry": scale[k]} for k in worst}


def timings(robot, pin, rounds, batch):
    model, pm = robot["model"], robot["pin"]
    pd = pm.createData()
    q, qd, u = states(model, batch, 3)
    q1, qd1, u1 = q[0], qd[0], u[0]
    fid = sd.compile(model, "inverse_dynamics_derivatives")
    ffd = sd.compile(model, "forward_dynamics_derivatives")
    single = {
        "ID, public call": lambda: sd.dynamics_derivatives(model, q1, qd1, qdd=u1),
        "ID, sd.compile": lambda: fid(q1, qd1, u1),
        "ID, Pinocchio": lambda: pin.computeRNEADerivatives(pm, pd, q1, qd1, u1),
        "FD, public call": lambda: sd.dynamics_derivatives(model, q1, qd1, tau=u1),
        "FD, sd.compile": lambda: ffd(q1, qd1, u1),
        "FD, Pinocchio": lambda: pin.computeABADerivatives(pm, pd, q1, qd1, u1),
    }
    for f in single.values():
        f()
    wait_for_optimisation()
    one = {k: v * 1e6 for k, v in interleaved(single, rounds).items()}

    def loop(f):
        def run():
            for k in range(batch):
                f(pm, pd, q[k], qd[k], u[k])
        return run

    out = np.empty((batch, 3, model.nv, model.nv))

    def kept(f, names):  # the loop a user writes to keep each state's matrices
        def run():
            for k in range(batch):
                f(pm, pd, q[k], qd[k], u[k])
                for j, name in enumerate(names):
                    out[k, j] = getattr(pd, name)
        return run

    mine = np.empty((batch, model.nv, 3 * model.nv))  # out=: one array for every call

    batched = {
        "ID, public call": lambda: sd.dynamics_derivatives(model, q, qd, qdd=u),
        "ID, public call, out=": lambda: sd.dynamics_derivatives(model, q, qd, qdd=u, out=mine),
        "ID, Pinocchio loop": loop(pin.computeRNEADerivatives),
        "ID, Pinocchio loop, kept": kept(pin.computeRNEADerivatives, ("dtau_dq", "dtau_dv", "M")),
        "FD, public call": lambda: sd.dynamics_derivatives(model, q, qd, tau=u),
        "FD, public call, out=": lambda: sd.dynamics_derivatives(model, q, qd, tau=u, out=mine),
        "FD, Pinocchio loop": loop(pin.computeABADerivatives),
        "FD, Pinocchio loop, kept": kept(pin.computeABADerivatives,
                                         ("ddq_dq", "ddq_dv", "Minv")),
    }
    for f in batched.values():  # a first batch queues optimised code: measure after it
        f()
    wait_for_optimisation()
    many = {k: v * 1e6 / batch for k, v in
            interleaved(batched, max(3, rounds // 3), target=0.2).items()}
    return {"one state (us)": one, f"batch of {batch} (us per state)": many}


def first_calls(robot, folder):
    cache = tempfile.mkdtemp(dir=folder)
    env = dict(os.environ, SCREWDYN_CACHE_DIR=cache,
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src")] + sys.path))
    out = {}
    for label, kind in (("ID", "qdd"), ("FD", "tau")):
        for name in os.listdir(cache):
            os.unlink(os.path.join(cache, name))
        run = subprocess.run([sys.executable, "-c", CHILD, robot["path"],
                              "1" if robot["floating"] else "0", kind],
                             capture_output=True, text=True, env=env, timeout=1800)
        out[label] = (json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0
                      else {"error": run.stderr.strip().splitlines()[-1:]})
    return out


def jit_grad(robot):
    """Compile seconds and run time of jit(grad) of a scalar of FD by the inertial parameters,
    and of the jitted function itself."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    model = robot["model"]
    q, qd, tau = (a[0] for a in states(model, 1, 11))
    pi0 = jnp.asarray(model.inertial_parameters())

    def loss(pi):
        qdd = sd.forward_dynamics(model.with_inertial_parameters(pi), q, qd, tau)
        return jnp.sum(qdd ** 2)

    out = {}
    for label, f in (("function", jax.jit(loss)), ("grad", jax.jit(jax.grad(loss)))):
        t = time.perf_counter()
        jax.block_until_ready(f(pi0))
        out[f"{label}: first call (s)"] = time.perf_counter() - t
        wait_for_optimisation()  # time the code a long run gets, not the first one
        t = time.perf_counter()
        for _ in range(20):
            jax.block_until_ready(f(pi0))
        out[f"{label}: per call (us)"] = (time.perf_counter() - t) / 20 * 1e6
    out["grad over function"] = out["grad: per call (us)"] / out["function: per call (us)"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--robots", default=None, help="default: panda,talos,chain100")
    parser.add_argument("--grad", action="store_true", help="also jit(grad) on Talos")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    pin = optional("pinocchio")
    if isinstance(pin, str):
        sys.exit(f"Pinocchio is needed: {pin}")
    names = (args.robots or ("panda,talos" if args.quick else "panda,talos,chain100")).split(",")
    rounds = 5 if args.quick else 9
    results = {"versions": versions({"pinocchio": pin})}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                robot = load(name, folder, pin, "no mujoco")
            if "pin" not in robot:
                print(f"{name}: {robot.get('pin_note')}")
                continue
            entry = {"nv": robot["model"].nv, "first call (s)": first_calls(robot, folder),
                     "agreement with Pinocchio": agreement(robot, pin)}
            entry.update(timings(robot, pin, rounds, 1000))
            results[name] = entry
            print_result(name, entry)
            if args.grad and name == "talos":
                results["talos jit(grad)"] = jit_grad(robot)
                print(json.dumps(results["talos jit(grad)"], indent=1))
    results["load_average_after"] = os.getloadavg()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "derivatives.json"), "w") as f:
        json.dump(results, f, indent=1)


def print_result(name, entry):
    print(f"\n{name} (nv = {entry['nv']})")
    print("  first call, empty cache (s):", {k: (round(v, 2) if isinstance(v, float) else v)
                                               for k, v in entry["first call (s)"].items()})
    for kind, a in entry["agreement with Pinocchio"].items():
        print(f"  {kind} vs Pinocchio: {a['max abs difference']:.1e} "
              f"(largest entry {a['largest entry']:.3g})")
    for table, rows in entry.items():
        if not table.startswith(("one state", "batch")):
            continue
        print(f"  {table}:")
        for kind in ("ID", "FD"):
            refs = [v for k, v in rows.items() if k.startswith(kind) and "Pinocchio" in k]
            for k, v in rows.items():
                if k.startswith(kind):
                    ratios = " / ".join(f"{v / ref:.2f}x" for ref in refs)
                    print(f"    {k:<30} {v:9.2f}" + ("" if "Pinocchio" in k else
                                                       f"  ({ratios})"))


if __name__ == "__main__":
    main()
