"""The ``screwdyn`` command: model summaries, dynamics at a state, a demo, simulation.

    screwdyn info MODEL
    screwdyn dynamics MODEL --q 0 0.5 -1 ... [--qd ...] [--qdd ...] [--algebra cga] [--json]
    screwdyn demo
    screwdyn simulate MODEL --duration 5 --dt 1e-3 --controller gravity --out traj.npz
    screwdyn view MODEL [--trajectory traj.npz]

MODEL is a bundled robot name (``screwdyn info --list``), a URDF file or a DH table (.csv).
Errors print one line and exit with status 2.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

from . import dynamics
from .algebra import ALGEBRAS
from .errors import InertiaWarning, ModelError


def resolve_model(spec, floating_base=False):
    """A Model from a bundled robot name, a URDF or MJCF path (or URDF XML text) or a DH table
    file; an MJCF file is one whose root element is <mujoco> (loaded through MuJoCo)."""
    from .model import load_urdf
    from .model import robots

    if spec in robots.names():
        if floating_base:
            raise ModelError(f"--floating-base applies to URDF files, not to bundled {spec!r}")
        return robots.load(spec)
    if spec.lower().endswith(".csv"):
        from .model.dh import load_dh_table

        return load_dh_table(spec)
    if os.path.isfile(spec) and _root_tag(spec) == "mujoco":
        from .model import load_mjcf

        if floating_base:
            raise ModelError("--floating-base applies to URDF files: an MJCF file declares its "
                             "own free joints")
        return load_mjcf(spec)
    if os.path.exists(spec) or spec.lstrip().startswith("<"):
        return load_urdf(spec, floating_base=floating_base)
    raise ModelError(f"{spec!r} is neither a bundled robot ({', '.join(robots.names())}) "
                     "nor an existing URDF or DH table (.csv) file")


def _root_tag(path):
    """The name of the first element of an XML file (reads its first 4 KiB), or ''."""
    import re

    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", "replace")
    head = re.sub(r"<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>", "", head, flags=re.S)
    match = re.search(r"<\s*([\w:.-]+)", head)
    return match.group(1) if match else ""


def available_algebras():
    """The algebras this installation provides, in display order."""
    from .algebra import get_algebra

    found = []
    for name in ALGEBRAS:
        try:
            if name != "vector":
                get_algebra(name)
            found.append(name)
        except (ValueError, ImportError):
            pass
    return found


# -- info -------------------------------------------------------------------------------
def cmd_info(args):
    if args.list:
        from .model import robots

        for name in robots.names():
            model = robots.load(name)
            print(f"{name:<12} {model!r}")
        return 0
    if not args.model:
        raise ModelError("info needs a MODEL (or --list)")
    model = resolve_model(args.model, args.floating_base)
    print(model.summary())
    print(f"  nq = {model.nq}, nv = {model.nv}, links = {model.nlinks}, "
          f"total mass = {model.total_mass:.6g} kg")
    return 0


# -- dynamics ---------------------------------------------------------------------------
def _state_vector(values, size, name, default):
    if values is None:
        return default
    if len(values) != size:
        raise ValueError(f"--{name} needs {size} numbers, got {len(values)}")
    return np.array(values, dtype=float)


def cmd_dynamics(args):
    model = resolve_model(args.model, args.floating_base)
    q = _state_vector(args.q, model.nq, "q", np.array(model.neutral))
    qd = _state_vector(args.qd, model.nv, "qd", np.zeros(model.nv))
    qdd = _state_vector(args.qdd, model.nv, "qdd", np.zeros(model.nv))
    gravity = np.array(args.gravity) if args.gravity else None
    tau = dynamics.inverse_dynamics(model, q, qd, qdd, gravity=gravity, algebra=args.algebra)
    g = dynamics.gravity_torques(model, q, gravity=gravity, algebra=args.algebra)
    M = dynamics.mass_matrix(model, q, algebra=args.algebra)
    if args.json:
        print(json.dumps({"model": model.name, "algebra": args.algebra,
                          "joint_names": list(model.joint_names), "q": q.tolist(),
                          "qd": qd.tolist(), "qdd": qdd.tolist(), "tau": tau.tolist(),
                          "gravity_torques": g.tolist(), "mass_matrix": M.tolist()}))
        return 0
    names = _dof_names(model)
    print(f"{model!r}, algebra = {args.algebra}")
    print(f"{'dof':<28}{'qd':>10}{'qdd':>10}{'tau':>14}{'gravity':>14}")
    for k, name in enumerate(names):
        print(f"{name:<28}{qd[k]:>10.4g}{qdd[k]:>10.4g}{tau[k]:>14.6g}{g[k]:>14.6g}")
    print("mass matrix M(q):")
    with np.printoptions(precision=4, suppress=True, linewidth=120):
        print(M)
    return 0


def _dof_names(model):
    from .simulate import coordinate_names

    return coordinate_names(model)[1]


# -- demo -------------------------------------------------------------------------------
PUMA_POSES = {  # the named poses of Corke's toolbox
    "qz (zero)": [0, 0, 0, 0, 0, 0],
    "qr (ready)": [0, np.pi / 2, -np.pi / 2, 0, 0, 0],
    "qs (stretch)": [0, 0, -np.pi / 2, 0, 0, 0],
    "qn (nominal)": [0, np.pi / 4, np.pi, 0, np.pi / 4, 0],
}


def cmd_demo(args):
    from .model import robots

    model = robots.load("puma560")
    algebras = available_algebras()
    qd = np.array([0.5, -0.3, 0.8, 1.0, -0.6, 0.4])
    qdd = np.array([1.0, 0.5, -0.7, 2.0, 1.0, -1.5])
    print(f"screwdyn demo: inverse dynamics of the {model!r}")
    print(f"at Corke's named poses, qd = {qd.tolist()}, qdd = {qdd.tolist()},")
    print(f"computed in every algebra: {', '.join(algebras)}.\n")
    worst = 0.0
    for pose, q in PUMA_POSES.items():
        taus = {a: dynamics.inverse_dynamics(model, q, qd, qdd, algebra=a) for a in algebras}
        ref = taus["spatial"]
        print(f"{pose}: q = {np.round(q, 4).tolist()}")
        print("  " + f"{'joint':<10}" + "".join(f"{a:>14}" for a in algebras))
        for k, name in enumerate(model.joint_names):
            print("  " + f"{name:<10}" + "".join(f"{taus[a][k]:>14.8f}" for a in algebras))
        spread = max(np.abs(t - ref).max() for t in taus.values()) / max(1.0, np.abs(ref).max())
        worst = max(worst, spread)
        print(f"  largest relative disagreement between algebras: {spread:.1e}\n")
    q = np.array(PUMA_POSES["qn (nominal)"])
    t0 = time.perf_counter()
    batch = dynamics.inverse_dynamics(model, np.tile(q, (10000, 1)), qd, qdd)
    wall = time.perf_counter() - t0
    print(f"batched: 10,000 states in {wall * 1e3:.1f} ms ({wall / 1e4 * 1e6:.2f} us per state), "
          f"max deviation from the single call {np.abs(batch - taus['spatial']).max():.1e}")
    verdict = "agree" if worst < 1e-10 else "DISAGREE"
    print(f"all algebras {verdict} to {worst:.1e} (relative) at every pose")
    return 0 if worst < 1e-10 else 1


# -- entry point ------------------------------------------------------------------------
def build_parser():
    parser = argparse.ArgumentParser(prog="screwdyn", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="joints, links, masses and DoF of a model")
    info.add_argument("model", nargs="?", help="bundled robot name, URDF file or DH table")
    info.add_argument("--list", action="store_true", help="list the bundled robots")
    info.add_argument("--floating-base", action="store_true", help="add a free root joint")
    info.set_defaults(func=cmd_info)

    dyn = sub.add_parser("dynamics", help="torques, gravity torques and mass matrix at a state")
    dyn.add_argument("model", help="bundled robot name, URDF file or DH table")
    for name, meaning in (("q", "configuration (nq numbers)"), ("qd", "velocity (nv numbers)"),
                          ("qdd", "acceleration (nv numbers)")):
        dyn.add_argument(f"--{name}", type=float, nargs="+", help=meaning + "; default zero")
    dyn.add_argument("--gravity", type=float, nargs=3, metavar=("GX", "GY", "GZ"),
                     help="gravity in the world frame (default 0 0 -9.81)")
    dyn.add_argument("--algebra", default="spatial", choices=list(ALGEBRAS))
    dyn.add_argument("--floating-base", action="store_true", help="add a free root joint")
    dyn.add_argument("--json", action="store_true", help="machine-readable output")
    dyn.set_defaults(func=cmd_dynamics)

    demo = sub.add_parser("demo", help="Puma 560 dynamics in every algebra, side by side")
    demo.set_defaults(func=cmd_demo)

    try:
        from . import cli_simulate
    except ImportError:
        pass
    else:
        cli_simulate.add_parser(sub)
    from . import cli_view

    cli_view.add_parser(sub)
    return parser


def _show_warning(message, category, *_args, **_kwargs):
    kind = "inertia warning" if issubclass(category, InertiaWarning) else "warning"
    print(f"screwdyn: {kind}: {message}", file=sys.stderr)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return args.func(args)
    except BrokenPipeError:  # the reader went away (screwdyn info x | head): nothing to say
        sys.stdout = open(os.devnull, "w")
        return 0
    except (ModelError, ValueError, OSError, ImportError) as e:  # ImportError: an extra missing
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"screwdyn: error: {first}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("screwdyn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
