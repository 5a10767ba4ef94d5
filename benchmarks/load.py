"""Model loading side by side: ``sd.load_urdf`` against ``pinocchio.buildModelFromUrdf`` and
MuJoCo's URDF compiler on every example-robot-data URDF, in one process.

    python benchmarks/load.py              # every file, 15 interleaved repetitions
    python benchmarks/load.py --repeat 5   # quicker

Each file is loaded by each library in turn, ``--repeat`` times, interleaved (so that a change in
the machine's load touches all alike); the table gives each library's best (minimum) time per
file, the ratio screwdyn / Pinocchio, and the median and worst ratios over the files. Files
Pinocchio refuses are skipped. Writes ``load.json`` to ``--out`` (default benchmarks/results).
"""
import argparse
import io
import json
import os
import statistics
import sys
import time
import warnings
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import screwdyn as sd  # noqa: E402
from run import optional, robots_dir, versions  # noqa: E402


def urdfs():
    root = robots_dir()
    if root is None:
        raise SystemExit("example-robot-data is not installed (pip install example-robot-data)")
    found = []
    for folder, _, files in os.walk(root):
        found += [os.path.join(folder, f) for f in files if f.endswith(".urdf")]
    return sorted(found)


def timed(function):
    """CPU time of one call (the process's own time: steadier than wall time on a shared
    machine; both loaders are single-threaded and do no I/O wait beyond reading the file)."""
    start = time.process_time()
    function()
    return time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    pin = optional("pinocchio")
    if isinstance(pin, str):
        raise SystemExit(f"pinocchio is {pin}")
    libs = {"pinocchio": pin}
    warnings.simplefilter("ignore")
    start_load = os.getloadavg()
    rows = []
    for path in urdfs():
        try:
            with redirect_stderr(io.StringIO()):
                pin.buildModelFromUrdf(path)
        except (ValueError, RuntimeError):
            continue
        loaders = {"screwdyn": lambda: sd.load_urdf(path),
                   "pinocchio": lambda: pin.buildModelFromUrdf(path)}
        best = {name: float("inf") for name in loaders}
        with redirect_stderr(io.StringIO()):
            for _ in range(args.repeat):
                for name, load in loaders.items():
                    best[name] = min(best[name], timed(load))
        rows.append({"file": os.path.relpath(path, robots_dir()), **{k: v * 1e3 for k, v in
                                                                      best.items()},
                     "ratio": best["screwdyn"] / best["pinocchio"]})
    rows.sort(key=lambda r: -r["ratio"])
    print(f"{'file':<58}{'screwdyn ms':>12}{'pinocchio ms':>13}{'ratio':>8}")
    for r in rows:
        print(f"{r['file']:<58}{r['screwdyn']:>12.3f}{r['pinocchio']:>13.3f}{r['ratio']:>8.2f}")
    ratios = [r["ratio"] for r in rows]
    summary = {"files": len(rows), "median_ratio": statistics.median(ratios),
               "worst_ratio": max(ratios), "best_ratio": min(ratios),
               "median_screwdyn_ms": statistics.median(r["screwdyn"] for r in rows),
               "median_pinocchio_ms": statistics.median(r["pinocchio"] for r in rows)}
    print(f"\n{summary['files']} files: screwdyn / Pinocchio median {summary['median_ratio']:.2f}, "
          f"worst {summary['worst_ratio']:.2f}, best {summary['best_ratio']:.2f} "
          f"(median {summary['median_screwdyn_ms']:.2f} ms against "
          f"{summary['median_pinocchio_ms']:.2f} ms); load average "
          f"{start_load[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "load.json"), "w") as f:
        json.dump({"versions": versions(libs), "summary": summary, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
