"""A self-reconfiguring modular robot: modules attached, detached and replaced on a built
assembly, its dynamics kept up to date without rebuilding the other modules (the branched-robot
paper's motivation), and what attaching a module costs as the robot grows to 1,000 modules.

Each module is a 2-DoF joint (yaw, then pitch) and a 0.3 m link, built in code, attached to the
tip of the module before it. The script

1. builds a chain, branches a second chain off it, and checks the composed inverse dynamics
   against the flat model after every change;
2. detaches a branch and attaches it elsewhere; replaces a module by a black box (an unknown
   module known by the wrench measured at its connection point) and checks the other torques;
3. times ``attach`` of one more module on robots of 10 to 1,000 modules, and counts the
   function calls it makes (the same at every size; times on a shared machine swing), against
   ``to_model()``, which rebuilds a flat model of everything; writes docs/attach_cost.png.

Run: python examples/reconfigurable_modules.py   (needs matplotlib for the figure)
"""
import gc
import pathlib
import sys
import time

import numpy as np

import screwdyn as sd
from screwdyn.composition import Assembly, BlackBox

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def module(name="module"):
    """A 2-DoF module: a yaw joint, a short knuckle, a pitch joint and a 0.3 m link."""
    b = sd.ModelBuilder(name)
    b.add_link("base")
    b.add_link("knuckle", mass=0.4, com=(0, 0, 0.03), inertia=np.diag([4e-4, 4e-4, 2e-4]))
    b.add_link("link", mass=1.2, com=(0.15, 0, 0), inertia=np.diag([5e-4, 9e-3, 9e-3]))
    b.add_link("tip")
    b.add_joint("yaw", "revolute", "base", "knuckle", axis=(0, 0, 1))
    b.add_joint("pitch", "revolute", "knuckle", "link", xyz=(0, 0, 0.06), axis=(0, 1, 0))
    b.add_joint("tip", "fixed", "link", "tip", xyz=(0.3, 0, 0))
    return b.build()


MODULE = module()


def chain(n, name="m"):
    """n modules in a row, named m0, m1, ..."""
    robot = Assembly(MODULE, name=f"{name}0")
    for k in range(1, n):
        robot.attach(MODULE, parent=f"{name}{k - 1}", link="tip", name=f"{name}{k}")
    return robot


def agreement(robot, seed=0):
    """The composed inverse dynamics against the flat model's at random states (relative)."""
    flat = robot.to_model()
    rng = np.random.default_rng(seed)
    q = rng.uniform(-np.pi, np.pi, (4, flat.nq))
    qd, qdd = rng.normal(size=(2, 4, flat.nv))
    expected = sd.inverse_dynamics(flat, q, qd, qdd)
    return float(np.abs(robot.inverse_dynamics(q, qd, qdd) - expected).max()
                 / np.abs(expected).max())


def reconfigure():
    """The changes of step 1 and 2, each checked; returns [(what, relative difference)]."""
    out = []
    robot = chain(4)
    out.append(("a chain of 4 modules", agreement(robot)))
    side = Assembly(MODULE, name="b0")
    side.attach(MODULE, parent="b0", link="tip", name="b1")
    robot.attach(side, parent="m1", link="tip", name="branch",
                 placement=np.diag([1.0, -1.0, -1.0, 1.0]))  # hanging the other way
    out.append(("a 2-module branch attached to m1", agreement(robot)))
    moved = robot.detach("branch")
    out.append(("the branch detached", agreement(robot)))
    robot.attach(moved, parent="m3", link="tip", name="branch")
    out.append(("the branch attached to m3", agreement(robot)))
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.normal(size=(5, n)) for n in (robot.nq, robot.nv, robot.nv))
    measured = robot.connection_points(q, qd, qdd)["m2"].wrench  # m2 and all beyond it
    boxed = robot.copy()
    boxed.detach("m2")  # m2 with m3 and the branch: replaced by one unknown module
    boxed.attach(BlackBox(measured, name="unknown"), parent="m1", link="tip")
    kept = np.concatenate([np.arange(robot[s.name].v_slice.start, robot[s.name].v_slice.stop)
                           for s in boxed.models])
    tau = boxed.inverse_dynamics(q[:, kept], qd[:, kept], qdd[:, kept])
    expected = robot.inverse_dynamics(q, qd, qdd)[:, kept]
    out.append(("m2 (and what hangs from it) as a measured black box",
                float(np.abs(tau - expected).max() / np.abs(expected).max())))
    return out


def attach_cost(sizes=(10, 30, 100, 300, 1000), repeat=21):
    """{n: (seconds to attach one module to a robot of n modules, seconds for to_model(), the
    best of 3)}: the median of ``repeat`` attaches (each undone with ``detach``, which is not timed), with
    Python's garbage collector paused while they run (its scans grow with everything the
    process holds, not with the robot)."""
    robot = chain(1)
    out = {}
    for n in sizes:
        while len(robot.subsystems) < n:
            k = len(robot.subsystems)
            robot.attach(MODULE, parent=f"m{k - 1}", link="tip", name=f"m{k}")
        times = []
        for _ in range(repeat):
            gc.disable()
            start = time.perf_counter()
            robot.attach(MODULE, parent=f"m{n - 1}", link="tip", name="extra")
            times.append(time.perf_counter() - start)
            gc.enable()
            robot.detach("extra")
        flat = []
        for _ in range(3):
            start = time.perf_counter()
            robot.to_model()
            flat.append(time.perf_counter() - start)
        out[n] = (float(np.median(times)), min(flat))
    return out


def attach_calls(sizes=(10, 30, 100, 300, 1000)):
    """{n: Python function calls made by attaching one module to a robot of n modules}: a count
    that no machine load disturbs (``sys.setprofile``)."""
    robot, out = chain(1), {}
    for n in sizes:
        while len(robot.subsystems) < n:
            k = len(robot.subsystems)
            robot.attach(MODULE, parent=f"m{k - 1}", link="tip", name=f"m{k}")
        calls = [0]

        def count(frame, event, arg):
            if event in ("call", "c_call"):
                calls[0] += 1

        sys.setprofile(count)
        robot.attach(MODULE, parent=f"m{n - 1}", link="tip", name="extra")
        sys.setprofile(None)
        robot.detach("extra")
        out[n] = calls[0]
    return out


def figure(cost, docs=DOCS):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = np.array(list(cost))
    attach, flat = np.array(list(cost.values())).T
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(n, attach * 1e6, "o-", label="Assembly.attach of one more module")
    ax.loglog(n, flat * 1e6, "s--", label="to_model(): a flat model of every module")
    ax.set_xlabel("modules in the robot (2 DoF each)")
    ax.set_ylabel("time [us]")
    ax.legend(fontsize=8)
    ax.set_title("attaching a module costs what the module costs", fontsize=9)
    fig.tight_layout()
    fig.savefig(docs / "attach_cost.png", dpi=110)
    plt.close(fig)


def main():
    for what, difference in reconfigure():
        print(f"{what:55s} composed vs flat: {difference:.1e}")
    cost, calls = attach_cost(), attach_calls()
    print("| modules | attach one module | its function calls | to_model() |")
    print("|---|---|---|---|")
    for n, (attach, flat) in cost.items():
        print(f"| {n} | {attach * 1e6:.0f} us | {calls[n]} | {flat * 1e3:.1f} ms |")
    figure(cost)


if __name__ == "__main__":
    main()
