"""The JAX path as JAX users write it: ``jax.jit``, ``jax.jit(jax.vmap(...))`` and
``jax.jit(jax.grad(...))`` of the public functions, the model closed over, side by side with the
library's own compiled programs, a trivial jitted call (the dispatch floor) and a Pinocchio loop.

    python benchmarks/jax_path.py                 # Panda (two files), Talos floating, chain100
    python benchmarks/jax_path.py --robots panda,panda11 --quick

Robots: example-robot-data's Panda (``panda``), the same file with every ``rpy`` written with 11
digits (``panda11``: rotations not exactly axis-aligned, as in many real files), Talos
(``talos_reduced``, floating base) and a 100-link chain. Each robot runs in a fresh process with
an empty program cache (``sd.execution.set_directory``), so compile times include the native
programs' tracing and compilation:

- **compile**: seconds to the first result of a new jitted function (JAX's tracing and XLA's
  compilation, plus screwdyn's program when it is not in memory yet; the first row of each
  function pays for it, later rows reuse it), for one state, batches of 1,000 and 10,000 under
  ``jit`` and 1,000 under ``jit(vmap)``, and ``jit(grad)`` of the sum of the result for one state
  (forward and inverse dynamics with respect to q, the mass matrix's sum with respect to q);
- **run**: after the optimised code is in use (``sd.execution.native.wait_for_optimisation``),
  the median time per call (one state, ``grad``) or per state (batches): wall time of
  ``block_until_ready`` over repeated calls;
- beside them, in the same process: the numpy call on one state and on 1,000 states (the
  library's native programs, ``sd.inverse_dynamics(model, q, qd, qdd)``), a trivial jitted
  call taking the same arguments (``q + qd + u``), and Pinocchio (``rnea`` / ``aba`` /
  ``crba``) in a Python loop over the 1,000 states.

Writes ``jax_path.json`` to ``--out`` (default ``benchmarks/results``) and prints a markdown
table. Beside them, MJX (``pip install mujoco-mjx``) where it is installed: ``jax.jit(jax.vmap(
mjx.forward))`` and ``mjx.inverse`` on the same URDF through MuJoCo's compiler (collision geometry
stripped, as for every candidate), on the CPU.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)

FUNCTIONS = {"ID": "inverse_dynamics", "FD": "forward_dynamics", "M": "mass_matrix"}
ROBOTS = ("panda", "panda11", "talos", "chain100")
#: states of MJX's batch (its CPU time per state is milliseconds: a batch of 1,000 takes
#: seconds per call)
MJX_STATES = 100


def model_path(name, folder):
    """A URDF without meshes for ``name`` in ``folder``, and whether its base floats."""
    from latency import urdf_path

    if name == "panda11":
        with open(urdf_path("panda", folder)) as f:
            text = f.read()
        text = re.sub(r'rpy="([^"]*)"', lambda m: 'rpy="%s"' % " ".join(
            "%.11g" % float(x) for x in m.group(1).split()), text)
        path = os.path.join(folder, "panda11.urdf")
        with open(path, "w") as f:
            f.write(text)
        return path, False
    return urdf_path(name, folder), name == "talos"


def median_time(f, per=1, target=0.3, rounds=5):
    """Median seconds per call of ``f`` over ``rounds`` rounds of about ``target`` seconds in
    all (``regressor.best_of``), divided by ``per``."""
    from regressor import best_of

    f()
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < target / rounds:
        f()
        n += 1
    return best_of(f, rounds, max(n, 1)) / per


def measure(name, quick):
    """Every figure for one robot (run in a fresh process)."""
    import warnings

    import numpy as np
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import screwdyn as sd
    from screwdyn.execution import native

    cache = tempfile.mkdtemp(prefix="screwdyn-jax-path-")
    sd.execution.set_directory(cache)
    folder = tempfile.mkdtemp(prefix="screwdyn-jax-path-urdf-")
    path, floating = model_path(name, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(path, floating_base=floating, joint_order="name")
    N = 200 if quick else 1000
    rng = np.random.default_rng(0)
    Q = np.stack([sd.random_configuration(model, rng) for _ in range(N)])
    QD, U = rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nv))
    big = 2000 if quick else 10_000
    out = {"robot": name, "nq": model.nq, "nv": model.nv, "bodies": model.nbodies, "rows": {}}

    def first(f, *args):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        return time.perf_counter() - t

    for short, fname in FUNCTIONS.items():
        fn = getattr(sd, fname)

        def call(q, qd, u, fn=fn, fname=fname):
            return fn(model, q) if fname == "mass_matrix" else fn(model, q, qd, u)

        def loss(q, qd, u, call=call):
            return jnp.sum(call(q, qd, u))

        q1, qd1, u1 = (jnp.asarray(a[0]) for a in (Q, QD, U))
        qs, qds, us = (jnp.asarray(a) for a in (Q, QD, U))
        qb, qdb, ub = (jnp.asarray(np.concatenate([a] * (big // N))) for a in (Q, QD, U))
        jit1, jitN, jitB = jax.jit(call), jax.jit(call), jax.jit(call)
        vm = jax.jit(jax.vmap(call))
        gr = jax.jit(jax.grad(loss))
        row = {"compile": {}, "run": {}}
        row["compile"]["jit, 1 state"] = first(jit1, q1, qd1, u1)
        row["compile"][f"jit, {N} states"] = first(jitN, qs, qds, us)
        row["compile"][f"jit, {big} states"] = first(jitB, qb, qdb, ub)
        row["compile"][f"jit(vmap), {N} states"] = first(vm, qs, qds, us)
        row["compile"]["jit(grad), 1 state"] = first(gr, q1, qd1, u1)
        native.wait_for_optimisation()
        row["run"]["jit, 1 state (us per call)"] = median_time(
            lambda: jit1(q1, qd1, u1).block_until_ready()) * 1e6
        row["run"][f"jit(vmap), {N} states (us per state)"] = median_time(
            lambda: vm(qs, qds, us).block_until_ready(), per=N) * 1e6
        row["run"][f"jit, {big} states (us per state)"] = median_time(
            lambda: jitB(qb, qdb, ub).block_until_ready(), per=big) * 1e6
        row["run"]["jit(grad), 1 state (us per call)"] = median_time(
            lambda: gr(q1, qd1, u1).block_until_ready()) * 1e6
        n1 = (Q[0], QD[0], U[0])
        row["run"]["numpy call, 1 state (native, us per call)"] = median_time(
            lambda: call(*n1)) * 1e6
        row["run"][f"numpy call, {N} states (native, us per state)"] = median_time(
            lambda: call(Q, QD, U), per=N) * 1e6
        out["rows"][short] = row
    out["mjx"] = mjx_rows(path, floating, folder, name, Q, QD, U)
    # gradients with respect to the inertial parameters, beside those with respect to q
    pi = jnp.asarray(model.inertial_parameters())
    q1, qd1, u1 = (jnp.asarray(a[0]) for a in (Q, QD, U))
    by_pi = jax.jit(jax.grad(lambda pi, q: jnp.sum(sd.inverse_dynamics(
        model.with_inertial_parameters(pi), q, qd1, u1))))
    by_q = jax.jit(jax.grad(lambda q, pi: jnp.sum(sd.inverse_dynamics(
        model.with_inertial_parameters(pi), q, qd1, u1))))
    out["grad ID by pi"] = {"compile (s)": first(by_pi, pi, q1)}
    out["grad ID by q, traced pi"] = {"compile (s)": first(by_q, q1, pi)}
    native.wait_for_optimisation()
    out["grad ID by pi"]["us per call"] = median_time(
        lambda: by_pi(pi, q1).block_until_ready()) * 1e6
    out["grad ID by q, traced pi"]["us per call"] = median_time(
        lambda: by_q(q1, pi).block_until_ready()) * 1e6
    return finish(out, model, Q, QD, U, path, floating, N)


def finish(out, model, Q, QD, U, path, floating, N):
    """The trivial jitted call and the Pinocchio loop beside the rows of ``measure``."""
    import jax
    import jax.numpy as jnp

    trivial = jax.jit(lambda q, qd, u: q.sum() + qd + u)
    a1 = tuple(jnp.asarray(a[0]) for a in (Q, QD, U))
    out["trivial jit (us per call)"] = median_time(
        lambda: trivial(*a1).block_until_ready()) * 1e6
    try:
        import pinocchio as pin

        pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
              else pin.buildModelFromUrdf(path))
        data = pm.createData()
        loops = {"ID": lambda: [pin.rnea(pm, data, Q[i], QD[i], U[i]) for i in range(N)],
                 "FD": lambda: [pin.aba(pm, data, Q[i], QD[i], U[i]) for i in range(N)],
                 "M": lambda: [pin.crba(pm, data, Q[i]) for i in range(N)]}
        out["pinocchio loop (us per state)"] = {k: median_time(f, per=N, rounds=3) * 1e6
                                                for k, f in loops.items()}
    except ImportError as error:
        out["pinocchio loop (us per state)"] = f"missing ({error})"
    return out


def mjx_rows(path, floating, folder, name, Q, QD, U):
    """MJX on the same file (MuJoCo's URDF compiler, as ``latency.py`` loads it):
    ``jax.jit(jax.vmap(...))`` of ``mjx.forward`` (qacc) and ``mjx.inverse`` (qfrc_inverse)
    over the first ``MJX_STATES`` states, CPU: compile seconds and us per state; or why not."""
    import numpy as np

    try:
        import jax
        import jax.numpy as jnp
        import mujoco
        from mujoco import mjx
    except ImportError as error:
        return f"missing ({error})"
    from latency import mujoco_model

    try:
        m = mujoco_model(mujoco, path, floating, folder, name)
        mx = mjx.put_model(m)
    except Exception as error:  # noqa: BLE001  (a file MJX does not take)
        return f"not run ({type(error).__name__}: {error})"
    if m.nq != Q.shape[1] or m.nv != QD.shape[1]:
        return f"not run (MuJoCo has nq {m.nq}, nv {m.nv})"
    dx = mjx.make_data(mx)
    q = np.array(Q)
    if floating:  # MuJoCo's free joint: quaternion w first
        q[:, 3:7] = q[:, [6, 3, 4, 5]]

    def forward(q, qd, u):
        return mjx.forward(mx, dx.replace(qpos=q, qvel=qd, qfrc_applied=u)).qacc

    def inverse(q, qd, a):
        return mjx.inverse(mx, dx.replace(qpos=q, qvel=qd, qacc=a)).qfrc_inverse

    N = min(len(Q), MJX_STATES)
    rows, args = {}, tuple(jnp.asarray(a[:N]) for a in (q, QD, U))
    for label, f in (("FD", forward), ("ID", inverse)):
        g = jax.jit(jax.vmap(f))
        t = time.perf_counter()
        jax.block_until_ready(g(*args))
        compile_s = time.perf_counter() - t
        rows[label] = {"compile jit(vmap) (s)": compile_s, "us per state": median_time(
            lambda: jax.block_until_ready(g(*args)), per=N, rounds=3) * 1e6}
    return rows


def markdown(results):
    lines = []
    for r in results:
        lines.append(f"\n### {r['robot']} (nq {r['nq']}, nv {r['nv']}, {r['bodies']} bodies); "
                     f"trivial jitted call {r['trivial jit (us per call)']:.1f} us")
        pin = r["pinocchio loop (us per state)"]
        lines.append("\n" + "; ".join(
            f"jit({k}): compile {v['compile (s)']:.2f} s, {v['us per call']:.3g} us per call"
            for k, v in r.items() if k.startswith("grad ID by")))
        mjx = r.get("mjx")
        lines.append(f"\nMJX, jit(vmap) over {MJX_STATES} of the states: " + ("; ".join(
            f"{k}: compile {v['compile jit(vmap) (s)']:.1f} s, {v['us per state']:.3g} us per "
            "state" for k, v in mjx.items()) if isinstance(mjx, dict) else str(mjx)))
        first = next(iter(r["rows"].values()))  # ID: every column
        compile_keys, run_keys = list(first["compile"]), list(first["run"])
        lines.append("\n| | " + " | ".join([f"compile {k} (s)" for k in compile_keys] + run_keys
                                            + ["Pinocchio loop (us per state)"]) + " |")
        lines.append("|---" * (len(compile_keys) + len(run_keys) + 2) + "|")
        for short, row in r["rows"].items():
            cells = [f"{row['compile'][k]:.2f}" if k in row["compile"] else "not run"
                     for k in compile_keys]
            cells += [f"{row['run'][k]:.3g}" if k in row["run"] else "not run"
                      for k in run_keys]
            cells.append(f"{pin[short]:.3g}" if isinstance(pin, dict) else "missing")
            lines.append(f"| {short} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default=",".join(ROBOTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one robot
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(measure(args.one, args.quick)), flush=True)
        return
    results = []
    load = os.getloadavg()
    for name in args.robots.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "--one", name] + (
            ["--quick"] if args.quick else [])
        run = subprocess.run(cmd, capture_output=True, text=True)
        lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
        if run.returncode or not lines:
            print(f"{name}: failed\n{run.stderr[-3000:]}", file=sys.stderr)
            continue
        results.append(json.loads(lines[-1][7:]))
        print(markdown(results[-1:]), flush=True)
        os.makedirs(args.out, exist_ok=True)  # after every robot: an interrupted run keeps them
        with open(os.path.join(args.out, "jax_path.json"), "w") as f:
            json.dump({"results": results, "load_average": [load, os.getloadavg()]}, f,
                      indent=1)
    print(f"\nload average {load[0]:.1f} -> {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
