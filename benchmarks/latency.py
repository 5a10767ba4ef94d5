"""One state per call from Python, first calls, simulation and batches: screwdyn's native path
side by side with Pinocchio and MuJoCo, in one process (compile times in fresh processes).

    python benchmarks/latency.py            # about 10 minutes on 2 cores
    python benchmarks/latency.py --quick    # fewer robots and repetitions

Tables (microseconds per call; in brackets our time over Pinocchio's, lower is better):

1. **single state**: ID, FD and M on the Panda, the UR5, Talos on a floating base and a 100-link
   chain: ``pinocchio.rnea/aba/crba``; MuJoCo on the same URDF (``mujoco.MjModel.from_xml_path``
   with meshes stripped; a free joint added for a floating base): ID = mj_kinematics + mj_comPos
   + mj_comVel + mj_rne, FD = mj_forward, M = mj_kinematics + mj_comPos + mj_crb + mj_fullM, each
   after writing qpos/qvel (qacc, qfrc_applied) from numpy; screwdyn's public call
   ``sd.inverse_dynamics(model, q, qd, qdd)`` with 1-D numpy arrays, and ``sd.compile(model, f)``
   (model-bound), in every algebra. Each is the median over rounds of interleaved repetitions
   (every candidate once per round, the order rotated).
2. **first call**: in a fresh process with an empty program cache, the seconds to the first
   result (tracing and level-0 code), to ``sd.compile`` (optimised code), and from the cache in
   another fresh process.
3. **simulation**: the passive Puma 560 (from its DH table, with inertias made physical for
   MuJoCo, see ``physical``; the same model as an MJCF for MuJoCo, armature included), RK4 at
   dt = 1 ms for 10 s: real-time factor of ``sd.simulate`` and of
   MuJoCo's RK4 (``mj_step`` with ``nstep`` in C, and ``mj_step`` called from a Python loop);
   1,000 batched rollouts of 1 s: steps per second.
4. **batches**: 10,000 Panda states, the public call on numpy arrays against a Pinocchio loop.

Times are this process's CPU time (``time.process_time``), not wall time: on a shared machine
the wall time of a microsecond call also counts the other processes that ran in between (two
runs at a load average of 6 differed 3x in wall time, 10 % in CPU time); every candidate is
measured the same way. Writes ``latency.json`` to ``--out`` (default ``benchmarks/results``) with
the load average before and after: read the ratios of one run together.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)

import screwdyn as sd  # noqa: E402
from screwdyn.execution.rollout import optimise_all as optimise_rollouts  # noqa: E402
from run import chain_urdf, optional, robots_dir  # noqa: E402

FUNCTIONS = ("inverse_dynamics", "forward_dynamics", "mass_matrix")
SHORT = {"inverse_dynamics": "ID", "forward_dynamics": "FD", "mass_matrix": "M"}
ALGEBRAS = ("spatial", "cga", "dq")
CLOCK = time.process_time  # see the module docstring
FILES = {"panda": ("panda_description/urdf/panda.urdf", False),
         "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
         "talos": ("talos_data/robots/talos_reduced.urdf", True),
         "icub": ("icub_description/robots/icub_reduced.urdf", True)}


# -- models -----------------------------------------------------------------------------------
def urdf_path(name, folder):
    """A URDF without meshes for robot ``name`` (written to ``folder``)."""
    if name.startswith("chain"):
        text = chain_urdf(int(name[5:]))
        root = ET.fromstring(text)
    else:
        root = ET.parse(os.path.join(robots_dir(), FILES[name][0])).getroot()
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for e in link.findall(tag):
                link.remove(e)
    path = os.path.join(folder, f"{name}.urdf")
    ET.ElementTree(root).write(path)
    return path


def load(name, folder, pin, mujoco):
    path = urdf_path(name, folder)
    floating = FILES.get(name, (None, False))[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(path, floating_base=floating, joint_order="name")
    robot = {"model": model, "path": path, "floating": floating}
    if not isinstance(pin, str):
        pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
              else pin.buildModelFromUrdf(path))
        names = [pm.names[i] for i in range(1, pm.njoints)]
        if floating:
            names = names[1:]
        if names == [j for j in model.joint_names if j != "root_joint"][-len(names):] \
                and pm.nq == model.nq and pm.nv == model.nv:
            robot["pin"] = pm
        else:
            robot["pin_note"] = "joint order or sizes differ"
    if not isinstance(mujoco, str):
        try:
            robot["mj"] = mujoco_model(mujoco, path, floating, folder, name)
            if robot["mj"].nv != model.nv:
                robot["mj_note"] = f"MuJoCo has nv={robot['mj'].nv}, screwdyn {model.nv}"
                del robot["mj"]
        except Exception as error:  # noqa: BLE001  (a file MuJoCo does not take)
            robot["mj_note"] = f"{type(error).__name__}: {error}"
    return robot


def mujoco_model(mujoco, path, floating, folder, name):
    """MuJoCo's model of the URDF; for a floating base, the root link kept as a body (MuJoCo's
    URDF compiler would fuse it into the world) and given a free joint."""
    if floating:
        root = ET.parse(path).getroot()
        extension = ET.SubElement(root, "mujoco")
        ET.SubElement(extension, "compiler", {"fusestatic": "false"})
        path = os.path.join(folder, f"{name}_float.urdf")
        ET.ElementTree(root).write(path)
    m = mujoco.MjModel.from_xml_path(path)
    if not floating:
        return m
    xml = os.path.join(folder, f"{name}_mj.xml")
    mujoco.mj_saveLastXML(xml, m)
    root = ET.parse(xml).getroot()
    body = root.find("worldbody").find("body")
    body.insert(0, ET.Element("freejoint", {"name": "root_joint"}))
    ET.ElementTree(root).write(xml)
    return mujoco.MjModel.from_xml_path(xml)


def mj_state(model, q):
    """screwdyn's q in MuJoCo's layout (a free joint's quaternion is w first there)."""
    if model.bodies[0].kind != "free":
        return q
    out = q.copy()
    out[3:7] = [q[6], q[3], q[4], q[5]]
    return out


# -- timing -----------------------------------------------------------------------------------
def interleaved(candidates, rounds, target=0.02):
    """Median seconds per call of each candidate (name -> callable), measured in ``rounds``
    rounds that run every candidate once in a rotated order, each for about ``target`` s."""
    counts = {}
    MINIMA.clear()
    for name, f in candidates.items():
        n, elapsed = 1, 0.0
        while elapsed < target / 4:
            n *= 4
            t = CLOCK()
            for _ in range(n):
                f()
            elapsed = CLOCK() - t
        counts[name] = max(1, int(n * target / max(elapsed, 1e-9)))
    samples = {name: [] for name in candidates}
    names = list(candidates)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            f, n = candidates[name], counts[name]
            t = CLOCK()
            for _ in range(n):
                f()
            samples[name].append((CLOCK() - t) / n)
    MINIMA.update({name: float(np.min(v)) for name, v in samples.items()})
    return {name: float(np.median(v)) for name, v in samples.items()}


MINIMA = {}  # the fastest round of the last ``interleaved`` call, by name (less load-sensitive)


def single_state(robot, rounds, pin, mujoco, algebras):
    model = robot["model"]
    q = sd.random_configuration(model, 1)
    rng = np.random.default_rng(2)
    qd, u = rng.normal(size=(2, model.nv))
    out = {}
    for f in FUNCTIONS:
        args = (q,) if f == "mass_matrix" else (q, qd, u)
        public = getattr(sd, f)
        candidates = {}
        if "pin" in robot:
            pm = robot["pin"]
            data = pm.createData()
            call = {"inverse_dynamics": lambda: pin.rnea(pm, data, q, qd, u),
                    "forward_dynamics": lambda: pin.aba(pm, data, q, qd, u),
                    "mass_matrix": lambda: pin.crba(pm, data, q)}[f]
            candidates["pinocchio"] = call
        if "mj" in robot:
            candidates["mujoco"] = mujoco_call(mujoco, robot["mj"], f, mj_state(model, q), qd, u)
        for a in algebras:
            sd.plan(model, f, a).compile()  # the optimised program, as after a warm-up
            candidates[f"public {a}"] = (lambda a=a: public(model, *args, algebra=a))
            bound = sd.compile(model, f, algebra=a)
            candidates[f"compiled {a}"] = (lambda g=bound: g(*args))
        out[SHORT[f]] = {k: v * 1e6 for k, v in interleaved(candidates, rounds).items()}
        out[SHORT[f] + " fastest round"] = {k: v * 1e6 for k, v in MINIMA.items()}
    return out


def mujoco_call(mujoco, m, f, q, qd, u):
    d = mujoco.MjData(m)
    M = np.zeros((m.nv, m.nv))
    out = np.zeros(m.nv)
    if f == "inverse_dynamics":
        def call():
            d.qpos[:], d.qvel[:], d.qacc[:] = q, qd, u
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            mujoco.mj_rne(m, d, 1, out)
    elif f == "forward_dynamics":
        def call():
            d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, qd, u
            mujoco.mj_forward(m, d)
    else:
        def call():
            d.qpos[:] = q
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_crb(m, d)
            mujoco.mj_fullM(m, d, M)
    return call


# -- first calls: fresh processes ---------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, sys, time, warnings
    t0 = time.perf_counter()
    import numpy as np, screwdyn as sd
    t_import = time.perf_counter() - t0
    path, floating, what = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(path, floating_base=floating, joint_order="name")
    q = sd.random_configuration(model, 0)
    x = np.ones(model.nv)
    out = {"import_s": t_import}
    for f in ("inverse_dynamics", "forward_dynamics", "mass_matrix"):
        args = (q,) if f == "mass_matrix" else (q, x, x)
        t, c = time.perf_counter(), time.process_time()
        if what == "first":
            getattr(sd, f)(model, *args)
        else:
            sd.compile(model, f)(*args)
        out[f] = time.perf_counter() - t
        out[f + " cpu"] = time.process_time() - c
    print(json.dumps(out))
""")


def first_calls(robot, folder):
    """Seconds to the first result of ID, FD, M in fresh processes: empty cache (the public
    call: level-0 code; sd.compile: optimised code), then from the disk cache."""
    cache = tempfile.mkdtemp(dir=folder)
    env = dict(os.environ, SCREWDYN_CACHE_DIR=cache,
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src")] + sys.path))
    out = {}
    for label, what in (("public call, empty cache", "first"),
                        ("sd.compile, empty cache", "compile"),
                        ("sd.compile, from the disk cache", "compile")):
        if label.startswith("sd.compile, empty"):
            for name in os.listdir(cache):
                os.unlink(os.path.join(cache, name))
        run = subprocess.run([sys.executable, "-c", CHILD, robot["path"],
                              "1" if robot["floating"] else "0", what],
                             capture_output=True, text=True, env=env, timeout=1800)
        if run.returncode != 0:
            out[label] = {"error": run.stderr.strip().splitlines()[-1:]}
            continue
        out[label] = json.loads(run.stdout.strip().splitlines()[-1])
    return out


# -- simulation ---------------------------------------------------------------------------------
def physical(model):
    """The model with inertias MuJoCo takes: the toolbox's Puma 560 has link inertias that no
    rigid body has (link 1: Izz only; link 3's moments break the triangle inequality), so the
    smallest principal moments are raised to half the largest, and masses of zero to 1e-9. Both
    simulators then run this same model."""
    import dataclasses

    bodies = []
    for b in model.bodies:
        values, vectors = np.linalg.eigh(np.reshape(b.inertia, (3, 3)))
        if values[0] + values[1] < values[2]:
            values = np.maximum(values, values[2] / 2)
        inertia = vectors @ np.diag(np.maximum(values, 1e-6)) @ vectors.T
        bodies.append(dataclasses.replace(b, mass=max(b.mass, 1e-9),
                                          inertia=tuple(inertia.reshape(-1).tolist())))
    return dataclasses.replace(model, name=model.name + "_physical", bodies=tuple(bodies),
                               _hash_cache=[])


def mjcf_of(model):
    """An MJCF of a screwdyn model with revolute joints and physical inertias (``physical``):
    bodies nested as the model's, joint axes, armature, inertias at the centre of mass."""
    from screwdyn.model.joints import Revolute

    lines = ['<mujoco model="%s"><option timestep="0.001" integrator="RK4" gravity="0 0 -9.81"/>'
             '<compiler angle="radian"/><worldbody>' % model.name]
    closes = []
    depth = {}
    for i, b in enumerate(model.bodies):
        if not isinstance(b.joint_model, Revolute):  # (continuous joints are revolute too)
            raise ValueError("mjcf_of takes revolute joints only")
        while closes and closes[-1] != b.parent:
            lines.append("</body>")
            closes.pop()
        R = np.reshape(b.rotation, (3, 3))
        w = np.sqrt(max(1e-300, 1 + np.trace(R))) / 2
        quat = (w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w),
                (R[1, 0] - R[0, 1]) / (4 * w))
        inertia = np.reshape(b.inertia, (3, 3))
        text = (lambda xs: " ".join(repr(float(x)) for x in xs))  # noqa: E731
        full = text([inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2],
                     inertia[1, 2]])
        lines.append(
            f'<body name="{b.link}" pos="{text(b.translation)}" quat="{text(quat)}">'
            f'<joint name="{b.joint}" type="hinge" axis="{text(b.joint_model.axis)}" '
            f'armature="{float(b.armature[0])!r}" damping="{float(b.damping[0])!r}"/>'
            f'<inertial pos="{text(b.com)}" mass="{float(b.mass)!r}" '
            f'fullinertia="{full}"/>')
        closes.append(i)
        depth[i] = len(closes)
    lines += ["</body>"] * len(closes)
    lines.append("</worldbody></mujoco>")
    return "".join(lines)


def simulation(mujoco, quick):
    puma = physical(sd.robots.load("puma560"))
    q0 = np.array([0.0, 0.5, -0.3, 0.2, 0.4, 0.1])
    t_final = 2.0 if quick else 10.0
    out = {}
    first = sd.simulate(puma, q0, None, None, 0.01, 1e-3, backend="native")
    out["screwdyn_compile_s"] = first.meta["compile_time"]
    optimise_rollouts()  # time the code a long run gets (level 2), not the first one
    rtf = []
    for _ in range(5):  # the whole call: the loop, recording, energies, the Trajectory
        t = CLOCK()
        traj = sd.simulate(puma, q0, None, None, t_final, 1e-3, backend="native")
        rtf.append(t_final / (CLOCK() - t))
    out["screwdyn_rtf"] = float(np.median(rtf))
    out["screwdyn_energy_drift"] = float(traj.energy_drift())
    if not isinstance(mujoco, str):
        m = mujoco.MjModel.from_xml_string(mjcf_of(puma))
        d = mujoco.MjData(m)
        steps = int(round(t_final / 1e-3))
        c_rtf, py_rtf = [], []
        for _ in range(5):
            mujoco.mj_resetData(m, d)
            d.qpos[:] = q0
            t = CLOCK()
            mujoco.mj_step(m, d, nstep=steps)
            c_rtf.append(t_final / (CLOCK() - t))
            mujoco.mj_resetData(m, d)
            d.qpos[:] = q0
            t = CLOCK()
            for _ in range(steps):
                mujoco.mj_step(m, d)
            py_rtf.append(t_final / (CLOCK() - t))
        out["mujoco_rk4_rtf_nstep"] = float(np.median(c_rtf))
        out["mujoco_rk4_rtf_python_loop"] = float(np.median(py_rtf))
        out["max_abs_q_difference_to_mujoco_at_end"] = float(np.abs(d.qpos - traj.q[-1]).max())
    n = 1000
    q0s = q0 + 0.1 * np.random.default_rng(0).normal(size=(n, 6))
    batch = sd.simulate(puma, q0s, None, None, 0.01, 1e-3, backend="native")
    out["batch_compile_s"] = batch.meta["compile_time"]
    optimise_rollouts()
    seconds = []
    for _ in range(3):
        t = CLOCK()
        sd.simulate(puma, q0s, None, None, 1.0, 1e-3, backend="native")
        seconds.append(CLOCK() - t)
    out["batch_steps_per_s"] = n * 1000 / float(np.median(seconds))
    return out


# -- batches -----------------------------------------------------------------------------------
def batches(robot, pin, n, algebras):
    model = robot["model"]
    q = np.stack([sd.random_configuration(model, s) for s in range(n)])
    rng = np.random.default_rng(3)
    qd, u = rng.normal(size=(2, n, model.nv))
    out = {}
    for f in FUNCTIONS:
        args = (q,) if f == "mass_matrix" else (q, qd, u)
        candidates = {}
        if "pin" in robot:
            pm = robot["pin"]
            data = pm.createData()
            one = {"inverse_dynamics": lambda i: pin.rnea(pm, data, q[i], qd[i], u[i]),
                   "forward_dynamics": lambda i: pin.aba(pm, data, q[i], qd[i], u[i]),
                   "mass_matrix": lambda i: pin.crba(pm, data, q[i])}[f]

            def loop(one=one):
                for i in range(n):
                    one(i)

            candidates["pinocchio loop"] = loop
        for a in algebras:
            sd.plan(model, f, a).compile()
            candidates[f"public {a}"] = (lambda a=a: getattr(sd, f)(model, *args, algebra=a))
        out[SHORT[f]] = {k: v / n * 1e6 for k, v in interleaved(candidates, 5, 0.2).items()}
    return out


# -- report -------------------------------------------------------------------------------------
def ratio(x, base):
    return f"{x:.2f} ({x / base:.2f}x)" if base else f"{x:.2f}"


def markdown(results):
    """The tables of a run as Markdown (what docs/performance.md shows)."""
    out = []
    load = results["load_average_start"][0], results["load_average_end"][0]
    out.append(f"Load average {load[0]:.1f} at the start and {load[1]:.1f} at the end, "
               f"{results['cpus']} CPUs. Median over rounds, microseconds per call (CPU time); "
               "in brackets: over Pinocchio.")
    for name, table in results.get("single_state_us", {}).items():
        rows = [k for k in next(iter(table.values()))]
        out.append(f"\n**{name}**, one state per call from Python\n")
        out.append("| | " + " | ".join(f for f in table if "fastest" not in f) + " |")
        out.append("|---|" + "---|" * len([f for f in table if "fastest" not in f]))
        for row in rows:
            cells = []
            for f, values in table.items():
                if "fastest" in f:
                    continue
                base = values.get("pinocchio")
                v = values.get(row)
                cells.append("" if v is None else f"{v:.2f}" + (f" ({v / base:.2f}x)" if base
                                                                 else ""))
            out.append(f"| {row} | " + " | ".join(cells) + " |")
    if "batch_us" in results:
        out.append("\n**Panda, 10,000 states in one call** (microseconds per state)\n")
        table = results["batch_us"]
        out.append("| | " + " | ".join(table) + " |")
        out.append("|---|" + "---|" * len(table))
        for row in next(iter(table.values())):
            cells = []
            for values in table.values():
                base = values.get("pinocchio loop")
                v = values[row]
                cells.append(f"{v:.3f}" + (f" ({base / v:.0f}x faster)" if base and
                                           row != "pinocchio loop" else ""))
            out.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def print_table(title, table):
    print(f"\n{title}")
    for f, row in table.items():
        base = row.get("pinocchio") or row.get("pinocchio loop")
        print(f"  {f}: " + "; ".join(f"{k} {ratio(v, base)}" for k, v in row.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--robots", default=None, help="default: panda,ur5,talos,chain100")
    parser.add_argument("--algebras", default=",".join(ALGEBRAS))
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--skip", default="", help="comma-separated: single,first,sim,batch")
    parser.add_argument("--all-algebras", action="store_true",
                        help="every algebra on trees of more than 50 bodies too (compiles long)")
    args = parser.parse_args()
    names = (args.robots or ("panda,ur5" if args.quick else "panda,ur5,talos,chain100")).split(",")
    algebras = args.algebras.split(",")
    skip = set(args.skip.split(",")) - {""}
    pin, mujoco = optional("pinocchio"), optional("mujoco")
    results = {"load_average_start": os.getloadavg(), "cpus": os.cpu_count(),
               "versions": {"screwdyn": sd.__version__, "numpy": np.__version__,
                            "pinocchio": getattr(pin, "__version__", pin),
                            "mujoco": getattr(mujoco, "__version__", mujoco)}}
    print(f"load average {results['load_average_start']}, {os.cpu_count()} CPUs")
    folder = tempfile.mkdtemp(prefix="screwdyn-latency-")
    robots = {name: load(name, folder, pin, mujoco) for name in names}
    for name, robot in robots.items():
        notes = [robot.get(k) for k in ("pin_note", "mj_note") if robot.get(k)]
        print(f"{name}: {robot['model']}" + (f" ({'; '.join(notes)})" if notes else ""))
    if "single" not in skip:
        results["single_state_us"] = {}
        for name, robot in robots.items():
            large = robot["model"].nbodies > 50 and not args.all_algebras
            table = single_state(robot, 5 if args.quick else 15, pin, mujoco,
                                 ("spatial",) if large else algebras)
            results["single_state_us"][name] = table
            print_table(f"{name}: one state per call from Python (us, x Pinocchio)", table)
    if "first" not in skip:
        results["first_call_s"] = {}
        for name in [n for n in ("panda", "talos") if n in robots]:
            results["first_call_s"][name] = first_calls(robots[name], folder)
            print(f"\n{name}: first calls (s) {json.dumps(results['first_call_s'][name])}")
    if "sim" not in skip:
        results["simulation"] = simulation(mujoco, args.quick)
        print(f"\nsimulation: {json.dumps(results['simulation'])}")
    if "batch" not in skip and "panda" in robots:
        results["batch_us"] = batches(robots["panda"], pin, 2000 if args.quick else 10000,
                                      algebras)
        print_table("panda: batches (us per state, x Pinocchio loop)", results["batch_us"])
    results["load_average_end"] = os.getloadavg()
    print(f"\nload average at the end {results['load_average_end']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "latency.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "latency.md"), "w") as f:
        f.write(markdown(results))


if __name__ == "__main__":
    main()
