"""The mass matrix of long chains: screwdyn beside Pinocchio's ``crba`` and MuJoCo's
``mj_crb`` + ``mj_fullM``, one state per call, in one process.

    python benchmarks/long_chain.py                 # chains of 100, 200, 400 and 1,000 links
    python benchmarks/long_chain.py --links 200 1000

For each chain (``run.chain_urdf``: revolute joints about z, y, x in turn): screwdyn's first
call (tracing and compiling its program, with an empty cache), its time per call with the
first code and then with the optimised code (``Plan.compile``), the numpy path, Pinocchio
(where its ``Data`` fits in memory: Pinocchio 3 allocates nv^3 derivative tensors, 13.7 GB at
600 links, so 1,000 links is estimated from a c n^2 fit of the measured sizes, and reported as
such) and MuJoCo on the same chain written as MJCF. Every library's M is checked against
screwdyn's. Writes ``long_chain.json`` to ``--out`` (default ``benchmarks/results``).
"""
import argparse
import json
import os
import sys
import tempfile
import time
import timeit
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))
os.environ.setdefault("SCREWDYN_CACHE_DIR", tempfile.mkdtemp(prefix="screwdyn-long-chain-"))

import screwdyn as sd  # noqa: E402
from run import chain_urdf  # noqa: E402

PINOCCHIO_MAX_LINKS = 400  # Pinocchio's Data beyond: gigabytes of nv^3 tensors


def chain_mjcf(n):
    """``chain_urdf(n)`` as MJCF (the same links, joints and inertias)."""
    axes = ("0 0 1", "0 1 0", "1 0 0")
    body = ""
    for i in reversed(range(n)):
        body = (f'<body name="l{i}" pos="0 0 0.2"><joint name="j{i}" type="hinge" '
                f'axis="{axes[i % 3]}"/><inertial pos="0.05 0 0.1" mass="1" '
                f'diaginertia="0.02 0.02 0.01"/>{body}</body>')
    return f'<mujoco model="chain{n}"><worldbody>{body}</worldbody></mujoco>'


def per_call(fn, seconds=1.0):
    """Best time per call (s) of repeated runs lasting about ``seconds`` in all."""
    fn()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 10 or calls < 1:
        fn()
        calls += 1
    number = max(1, int(calls * (seconds / 10) / (time.perf_counter() - start)))
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def measure(n, q):
    row = {"links": n}
    model = sd.load_urdf(chain_urdf(n))
    start = time.perf_counter()
    M = sd.mass_matrix(model, q)
    row["screwdyn_first_call_s"] = time.perf_counter() - start
    plan = sd.plan(model, "mass_matrix")
    row["factored"] = plan.factored is not None
    row["screwdyn_first_code_us"] = per_call(lambda: sd.mass_matrix(model, q)) * 1e6
    start = time.perf_counter()
    plan.compile()
    row["screwdyn_optimise_s"] = time.perf_counter() - start
    row["screwdyn_us"] = per_call(lambda: sd.mass_matrix(model, q)) * 1e6
    previous = sd.execution.use_native(False)
    row["screwdyn_numpy_us"] = per_call(lambda: sd.mass_matrix(model, q), 3.0) * 1e6
    sd.execution.use_native(previous)
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    if pin is not None and n <= PINOCCHIO_MAX_LINKS:
        pm = pin.buildModelFromXML(chain_urdf(n))
        data = pm.createData()
        Mp = pin.crba(pm, data, q)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        row["pinocchio_error"] = float(np.abs(Mp - M).max() / np.abs(Mp).max())
        row["pinocchio_us"] = per_call(lambda: pin.crba(pm, data, q)) * 1e6
    try:
        import mujoco
    except ImportError:
        mujoco = None
    if mujoco is not None:
        try:
            mm = mujoco.MjModel.from_xml_string(chain_mjcf(n))
        except ValueError as error:  # tinyxml2 refuses the nesting of long chains (~500)
            row["mujoco_note"] = str(error).splitlines()[-1]
            return row
        md = mujoco.MjData(mm)
        md.qpos[:] = q
        dense = np.zeros((mm.nv, mm.nv))

        def mujoco_m():
            mujoco.mj_kinematics(mm, md)
            mujoco.mj_comPos(mm, md)
            mujoco.mj_crb(mm, md)
            mujoco.mj_fullM(mm, md, dense)

        mujoco_m()
        row["mujoco_error"] = float(np.abs(dense - M).max() / np.abs(dense).max())
        row["mujoco_us"] = per_call(mujoco_m) * 1e6
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, nargs="+", default=[100, 200, 400, 1000])
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for n in args.links:
        q = np.random.default_rng(n).uniform(-1, 1, n)
        rows.append(measure(n, q))
        print(json.dumps({k: float(f"{v:.4g}") if isinstance(v, float) else v
                          for k, v in rows[-1].items()}), flush=True)
    fitted = [(r["links"], r["pinocchio_us"]) for r in rows if "pinocchio_us" in r]
    if len(fitted) >= 2:  # c n^2 by least squares
        n = np.array([f[0] for f in fitted], dtype=float)
        t = np.array([f[1] for f in fitted])
        c = float((t * n ** 2).sum() / (n ** 4).sum())
        for r in rows:
            if "pinocchio_us" not in r:
                r["pinocchio_us_estimated"] = c * r["links"] ** 2
    print(f"\n{'links':>6} {'screwdyn':>10} {'first call':>11} {'numpy':>10} "
          f"{'Pinocchio':>12} {'MuJoCo':>10} {'vs Pinocchio':>13} {'vs MuJoCo':>10}")
    for r in rows:
        ours = r["screwdyn_us"]
        pin_us = r.get("pinocchio_us", r.get("pinocchio_us_estimated"))
        pin_text = "-" if pin_us is None else f"{pin_us:.0f}us" + (
            "" if "pinocchio_us" in r else "*")
        mj_us = r.get("mujoco_us")
        print(f"{r['links']:>6} {ours:>8.0f}us {r['screwdyn_first_call_s']:>10.2f}s "
              f"{r['screwdyn_numpy_us']:>8.0f}us {pin_text:>12} "
              f"{'-' if mj_us is None else f'{mj_us:.0f}us':>10} "
              f"{'-' if pin_us is None else f'{ours / pin_us:.2f}x':>13} "
              f"{'-' if mj_us is None else f'{ours / mj_us:.2f}x':>10}")
    print("* estimated from a c n^2 fit of the measured sizes (Pinocchio's Data does not fit)")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "long_chain.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
