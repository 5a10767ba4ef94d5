"""The ``screwdyn`` command: model summaries, dynamics at a state, a demo, simulation.

    screwdyn info MODEL
    screwdyn dynamics MODEL --q 0 0.5 -1 ... [--qd ...] [--qdd ...] [--algebra cga] [--json]
    screwdyn demo
    screwdyn simulate MODEL --duration 5 --dt 1e-3 --controller gravity --out traj.npz
    screwdyn view MODEL [--trajectory traj.npz]
    screwdyn rollouts MODEL --n 100000 --out dataset/ [--engine processes|ray|serial]

MODEL is a bundled robot name (``screwdyn info --list``), a URDF file, an MJCF file or a DH
table (.csv); ``--floating-base``, ``--joint-order`` and ``--unsupported`` say how to load it.
Errors (a bad option, a bad file, a failed simulation) print one line, ``screwdyn: error: ...``,
on stderr and exit with status 2; Ctrl-C exits with status 130. An error that advises a
keyword of the Python API names the matching option too.
"""
import argparse
import json
import os
import re
import sys
import time
import warnings

import numpy as np

from . import dynamics
from .algebra import ALGEBRAS
from .errors import InertiaWarning, ModelError
from .model import Model

#: exit statuses: success, an error (bad option, bad file, failed run), Ctrl-C or SIGTERM
EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 2, 130

MODEL_HELP = ("a bundled robot name (screwdyn info --list), a URDF file, an MJCF file (root "
              "element <mujoco>; needs MuJoCo) or a DH table (.csv)")

#: what each model-loading option applies to (it is refused for other kinds of MODEL)
_APPLIES_TO = {"floating-base": "URDF files", "joint-order": "URDF files",
               "unsupported": "MJCF files", "joint-damping": "URDF and MJCF files",
               "joint-friction": "URDF and MJCF files",
               "joint-springs": "MJCF files", "soft-equalities": "MJCF files"}


# -- loading a model --------------------------------------------------------------------------
def add_model_arguments(parser: argparse.ArgumentParser, optional: bool = False) -> None:
    """MODEL and the options that say how to load it, on a subcommand's ``parser``: every
    command that loads a model takes them (``load_model`` reads them back)."""
    parser.add_argument("model", nargs="?" if optional else None, help=MODEL_HELP)
    group = parser.add_argument_group("loading MODEL")
    group.add_argument("--floating-base", action="store_true",
                       help="URDF: add a free root joint above the root link")
    group.add_argument("--joint-order", choices=("file", "name"),
                       help="URDF: order sibling joints as the file lists them, or by name "
                            "(Pinocchio's order); default file, with a warning where they differ")
    group.add_argument("--unsupported", choices=("error", "ignore"),
                       help="MJCF: refuse what screwdyn does not model (spatial tendons around "
                            "geoms, tendon armature, ...; error, the default) or load the rest "
                            "(ignore)")
    group.add_argument("--joint-damping", action="store_true",
                       help="URDF, MJCF: read the file's joint damping (URDF <dynamics "
                            "damping>, MJCF damping) into the model")
    group.add_argument("--joint-friction", action="store_true",
                       help="URDF, MJCF: read the file's dry (Coulomb) friction (URDF "
                            "<dynamics friction>, MJCF frictionloss, a fixed tendon's too) "
                            "into the model")
    group.add_argument("--joint-springs", action="store_true",
                       help="MJCF: read the joints' springs (stiffness towards springref), "
                            "which MuJoCo applies, as one-joint tendons")
    group.add_argument("--soft-equalities", action="store_true",
                       help="MJCF: the equality constraints soft as MuJoCo's (their solimp "
                            "and MuJoCo's inverse weights); without it, hard")


def load_model(args: argparse.Namespace) -> Model:
    """The Model that the arguments of ``add_model_arguments`` name."""
    return resolve_model(args.model, args.floating_base, joint_order=args.joint_order,
                         unsupported=args.unsupported,
                         joint_damping=getattr(args, "joint_damping", False),
                         joint_friction=getattr(args, "joint_friction", False),
                         joint_springs=getattr(args, "joint_springs", False),
                         soft_equalities=getattr(args, "soft_equalities", False))


def resolve_model(spec, floating_base=False, joint_order=None, unsupported=None,
                  joint_damping=False, joint_springs=False, soft_equalities=False,
                  joint_friction=False):
    """A Model from a bundled robot name, a URDF or MJCF path (or URDF XML text) or a DH table
    file; an MJCF file is one whose root element is <mujoco> (loaded through MuJoCo).
    ``joint_order`` applies to URDF files, ``unsupported``, ``joint_springs`` and
    ``soft_equalities`` to MJCF files (None: the loader's default), ``joint_damping`` and
    ``joint_friction`` to both;
    an option given for a kind of model that does not take it is a ModelError."""
    from .model import load_urdf
    from .model import robots

    options = {"floating-base": floating_base, "joint-order": joint_order,
               "unsupported": unsupported, "joint-damping": joint_damping,
               "joint-springs": joint_springs, "soft-equalities": soft_equalities,
               "joint-friction": joint_friction}
    if spec in robots.names():
        _refuse(options, (), f"the bundled robot {spec!r}")
        return robots.load(spec)
    if spec.lower().endswith(".csv"):
        from .model.dh import load_dh_table

        _refuse(options, (), f"a DH table ({spec})")
        return load_dh_table(spec)
    if is_mjcf(spec):
        from .model import load_mjcf

        _refuse(options, ("unsupported", "joint-damping", "joint-springs", "soft-equalities",
                          "joint-friction"),
                f"an MJCF file ({spec}: it declares its own joints)")
        return load_mjcf(spec, unsupported=unsupported or "error", joint_damping=joint_damping,
                         joint_friction=joint_friction, joint_springs=joint_springs,
                         soft_equalities=soft_equalities)
    if os.path.exists(spec) or spec.lstrip().startswith("<"):
        _refuse(options, ("floating-base", "joint-order", "joint-damping", "joint-friction"),
                "a URDF file")
        return load_urdf(spec, floating_base=floating_base, joint_order=joint_order,
                         joint_damping=joint_damping, joint_friction=joint_friction)
    raise ModelError(f"{spec!r} is neither a bundled robot ({', '.join(robots.names())}) "
                     "nor an existing URDF, MJCF or DH table (.csv) file")


def _refuse(options, taken, what):
    """ModelError for the first option given (not None or False) that ``what`` does not take."""
    for name, value in options.items():
        if value and name not in taken:
            raise ModelError(f"--{name} applies to {_APPLIES_TO[name]}, not to {what}")


def is_mjcf(spec: str) -> bool:
    """Whether ``spec`` (a model argument) is an MJCF file: one whose root element is
    <mujoco>."""
    return os.path.isfile(spec) and _root_tag(spec) == "mujoco"


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
    model = load_model(args)
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
    model = load_model(args)
    q = _state_vector(args.q, model.nq, "q", np.array(model.q0))  # MJCF: qpos0, as MjData
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
    from .sim import coordinate_names

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


# -- errors -----------------------------------------------------------------------------------
#: keywords of the Python API that messages advise -> the command line's option and what it
#: takes where the message quotes no value
_OPTIONS = {"unsupported": ("--unsupported", "ignore"), "joint_order": ("--joint-order", "name"),
            "points": ("--contact-points", "LINK[:X,Y,Z[:R]]"),
            "stiffness": ("--contact-stiffness", "K"), "backend": ("--backend", "numpy"),
            "engine": ("--engine", "serial"), "workers": ("--workers", "N"),
            "algebra": ("--algebra", "spatial")}
#: a keyword advised: after "pass", "use", "give", "or" or "GroundContact(", with its value
_ADVICE = re.compile(r"(?:\b(?:[Pp]ass|[Uu]se|[Gg]ive|or)\s+|GroundContact\()([a-z_]+)="
                     r"(?:'([^']*)'|\"([^\"]*)\")?")


def command_line_advice(message):
    """The command line's options for the Python keywords ``message`` advises, each once and
    in order: ``"pass unsupported='ignore'"`` gives ``["--unsupported ignore"]``."""
    found = []
    for match in _ADVICE.finditer(message):
        if match.group(1) in _OPTIONS:
            flag, placeholder = _OPTIONS[match.group(1)]
            value = next((v for v in match.group(2, 3) if v is not None), placeholder)
            found.append(f"{flag} {value}")
    return list(dict.fromkeys(found))


def one_line(message):
    """``message`` on one line (its lines joined), followed by the command line's options for
    the Python keywords it advises: ``... (command line: --unsupported ignore)``."""
    text = " ".join(str(message).split())
    advice = command_line_advice(text)
    return text + (f" (command line: {' or '.join(advice)})" if advice else "")


def report_error(error):
    """Print the error line, ``screwdyn: error: ...``, on stderr; returns ``EXIT_ERROR``."""
    text = one_line(error) or type(error).__name__
    print(f"screwdyn: error: {text}", file=sys.stderr)
    return EXIT_ERROR


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, as the command's other errors, naming
    ``--help`` instead of printing the usage."""

    def error(self, message):
        report_error(f"{message} (see {self.prog} --help)")
        self.exit(EXIT_ERROR)


# -- entry point ------------------------------------------------------------------------------
def build_parser():
    """The ``screwdyn`` parser with every subcommand this installation can run."""
    parser = Parser(prog="screwdyn", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = sub.choices  # name -> the subcommand's parser

    info = sub.add_parser("info", help="joints, links, masses and DoF of a model")
    add_model_arguments(info, optional=True)
    info.add_argument("--list", action="store_true", help="list the bundled robots")
    info.set_defaults(func=cmd_info)

    dyn = sub.add_parser("dynamics", help="torques, gravity torques and mass matrix at a state")
    add_model_arguments(dyn)
    dyn.add_argument("--q", type=float, nargs="+",
                     help="configuration (nq numbers); default: the model's q0 (an MJCF "
                          "file's qpos0, where MuJoCo's MjData starts), else zero")
    for name, meaning in (("qd", "velocity (nv numbers)"), ("qdd", "acceleration (nv numbers)")):
        dyn.add_argument(f"--{name}", type=float, nargs="+", help=meaning + "; default zero")
    dyn.add_argument("--gravity", type=float, nargs=3, metavar=("GX", "GY", "GZ"),
                     help="gravity in the world frame (default 0 0 -9.81)")
    dyn.add_argument("--algebra", default="spatial", choices=list(ALGEBRAS))
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
        from . import cli_rollouts

        cli_rollouts.add_parser(sub)
    from . import cli_view

    cli_view.add_parser(sub)
    return parser


def _show_warning(message, category, *_args, **_kwargs):
    """A warning on one line of stderr (with the command line's form of its advice)."""
    kind = "inertia warning" if issubclass(category, InertiaWarning) else "warning"
    print(f"screwdyn: {kind}: {one_line(message)}", file=sys.stderr)


def main(argv=None):
    """Run the command ``argv`` (default: ``sys.argv[1:]``); returns the exit status: 0, 2
    for an error (one line on stderr), 130 when interrupted."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the subcommand's parser, whose --help lists the options
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return args.func(args)
    except BrokenPipeError:  # the reader went away (screwdyn info x | head): nothing to say
        sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except (ModelError, ValueError, OSError, ImportError) as e:  # ImportError: an extra missing
        return report_error(e)
    except KeyboardInterrupt:
        print("screwdyn: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
