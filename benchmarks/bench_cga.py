"""Conformal geometric algebra against the spatial algebra, batched, in one process: inverse
dynamics (RNEA), forward dynamics (ABA) and the mass matrix (CRBA) of the Panda at 10,000 random
states, numpy backend. Prints the best of several runs for each algebra and the ratio CGA /
spatial (issue 3 asks for at most 1.5 for ID and FD).

Run: python benchmarks/bench_cga.py [--states 10000] [--repeat 7] [--robot panda]
"""
import argparse
import time

import numpy as np

import screwdyn as sd


def best_time(function, repeat):
    function()  # warm-up: model constants, caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--robot", default="panda", help="a bundled robot (sd.robots.names())")
    args = parser.parse_args()

    model = sd.robots.load(args.robot)
    rng = np.random.default_rng(0)
    q = np.stack([sd.random_configuration(model, seed) for seed in range(args.states)])
    qd, qdd = rng.normal(size=(2, args.states, model.nv))
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    cases = {
        "inverse dynamics": lambda algebra: sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra),
        "forward dynamics": lambda algebra: sd.forward_dynamics(model, q, qd, tau, algebra=algebra),
        "mass matrix": lambda algebra: sd.mass_matrix(model, q, algebra=algebra),
    }
    print(f"{model!r}, {args.states} states, numpy, best of {args.repeat}")
    print(f"{'':<18}{'spatial [ms]':>14}{'cga [ms]':>10}{'cga / spatial':>15}{'max rel. diff':>15}")
    for name, run in cases.items():
        spatial = best_time(lambda: run("spatial"), args.repeat)
        cga = best_time(lambda: run("cga"), args.repeat)
        a, b = run("cga"), run("spatial")
        diff = np.abs(a - b).max() / np.abs(b).max()
        print(f"{name:<18}{spatial * 1e3:>14.1f}{cga * 1e3:>10.1f}{cga / spatial:>15.2f}"
              f"{diff:>15.1e}")


if __name__ == "__main__":
    main()
