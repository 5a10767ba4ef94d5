"""``screwdyn simulate``: run a simulation from the command line, save it, plot it, summarise it.

    screwdyn simulate MODEL --duration 5 --dt 1e-3 --controller gravity --out traj.npz \\
        --plot traj.png [--animate traj.gif] [--contact --mu 0.8 | --scene]
        [--joint-limits | --rigid-limits] [--joint-friction [--rigid-friction]]

MODEL is a bundled robot name, a URDF file, an MJCF file or a DH table, loaded as by every
screwdyn command (``--floating-base``, ``--joint-order``, ``--unsupported``). Every output is
checked before the run (known format, writable folder; an existing file only with --force). A
progress bar (tqdm) goes to stderr on runs longer than a second, and ends at the step where the
run stopped; a summary ends the run. Ctrl-C or SIGTERM stops the run and writes the samples
computed so far to --out. Exit status 0; 2, with one line on stderr, for bad arguments or a
failed simulation (the samples before the failure are still saved with --out); 130 when
interrupted.
"""
import os
import signal
import sys
import time

import numpy as np

from .cli import (EXIT_INTERRUPTED, EXIT_OK, add_model_arguments, is_mjcf, load_model,
                  report_error)

CONTROLLERS = ("zero", "gravity", "pd", "pd-gravity", "actuators")


def add_parser(subparsers):
    """Register the ``simulate`` subcommand on an argparse ``subparsers`` object."""
    from .algebra import ALGEBRAS
    from .sim import BACKENDS, INTEGRATORS
    from .sim.contact_solver import CONES

    p = subparsers.add_parser(
        "simulate", help="simulate a robot, save, plot and animate the trajectory",
        description="Simulate MODEL from q0 (default: the model's q0, where an MJCF file "
                    "places its bodies (MuJoCo's qpos0), else the neutral configuration) under a "
                    "built-in controller and print a summary.")
    add_model_arguments(p)
    p.add_argument("--duration", type=float, default=5.0, help="simulated time [s] (default 5)")
    p.add_argument("--dt", type=float, default=1e-3, help="time step [s] (default 1e-3)")
    p.add_argument("--controller", choices=CONTROLLERS, default="zero",
                   help="zero torque, gravity compensation, joint PD towards --q-ref, joint "
                        "PD plus gravity compensation, or an MJCF file's own actuators driven "
                        "by --ctrl (sd.controllers.MjcfActuators; default zero)")
    p.add_argument("--kp", type=float, default=100.0, help="PD stiffness (default 100)")
    p.add_argument("--kd", type=float, default=20.0, help="PD damping (default 20)")
    p.add_argument("--q0", type=float, nargs="+",
                   help="initial configuration (nq numbers; default: the model's q0, an MJCF "
                        "file's qpos0, else neutral)")
    p.add_argument("--qd0", type=float, nargs="+", help="initial velocity (nv numbers)")
    p.add_argument("--q-ref", type=float, nargs="+", help="PD target (default neutral)")
    p.add_argument("--ctrl", type=float, nargs="+",
                   help="the controls of --controller actuators, one per actuator of the MJCF "
                        "file, held (MuJoCo's d.ctrl; default zero)")
    p.add_argument("--damping", type=float, help="viscous damping on every joint [N m s/rad]")
    hyphenated = [i.replace("_", "-") for i in INTEGRATORS if "_" in i]
    p.add_argument("--integrator", default="rk4", choices=list(INTEGRATORS) + hyphenated)
    p.add_argument("--algebra", default="spatial", choices=list(ALGEBRAS))
    p.add_argument("--backend", default="auto", choices=list(BACKENDS))
    p.add_argument("--gravity", type=float, nargs=3, metavar=("GX", "GY", "GZ"),
                   help="gravity in the world frame (default: the model's, 0 0 -9.81)")
    p.add_argument("--contact", action="store_true",
                   help="a ground plane at z = 0 touching the model's collision geometry")
    p.add_argument("--mu", type=float, default=None,
                   help="friction coefficient (default 0.8; with --scene, each pair's own: the "
                        "file's geom friction, as MuJoCo)")
    p.add_argument("--contact-links", nargs="+", metavar="LINK",
                   help="only the collision geometry of these links touches the ground")
    p.add_argument("--contact-points", nargs="+", action="extend", type=contact_point,
                   metavar="LINK[:X,Y,Z[:R]]",
                   help="the points that touch the ground instead of the collision geometry: "
                        "a point of LINK at X,Y,Z in its frame (m; default its origin), a "
                        "sphere of radius R (m) if given; e.g. foot:0,0,-0.05:0.02 "
                        "(implies --contact)")
    p.add_argument("--contact-stiffness", type=float, metavar="K",
                   help="ground stiffness per contact point [N/m] (default: the weight "
                        "sinks 0.75 mm on one point)")
    p.add_argument("--rigid-contact", action="store_true",
                   help="solve the contact forces with the dynamics (sd.RigidContact: Coulomb "
                        "cones, stable at 1-2 ms steps) instead of the penalty spring "
                        "(implies --contact)")
    p.add_argument("--scene", action="store_true",
                   help="contact between the model's collision shapes, as sd.Scene: its links "
                        "against each other and the ground, and an MJCF file's world (its "
                        "floor is the ground; its walls and fixed shapes), forces solved with "
                        "the dynamics (--mu; --contact-links: only those links' shapes)")
    p.add_argument("--impedance", type=float, nargs="+", metavar="D",
                   help="soft contact and limits, as MuJoCo's: the impedance d in (0, 1] of "
                        "--rigid-contact's or --scene's contact, of --rigid-limits and "
                        "--rigid-friction (a "
                        "constant solimp; 1: rigid; or MuJoCo's solimp: dmin dmax [width "
                        "[midpoint [power]]]), for all of them. Default: an MJCF file's "
                        "own (its geoms' solimp, its joints' solimplimit and "
                        "solimpfriction: soft, as in "
                        "MuJoCo), else rigid; --iterations 200 lets the sweeps converge")
    p.add_argument("--impratio", type=float, metavar="R",
                   help="the soft contact's friction stiffness relative to its normal's "
                        "(MuJoCo's impratio: the friction's compliance is the normal's over R; "
                        "inf: rigid friction), for --rigid-contact or --scene. Default: an "
                        "MJCF file's <option impratio>, else 1 (MuJoCo's)")
    p.add_argument("--cone", choices=CONES,
                   help="the solved contact's friction cone, for --rigid-contact or --scene: "
                        "elliptic (a disc, Coulomb's; the default, whatever an MJCF file's "
                        "<option cone>), convex (MuJoCo's elliptic cone: normal and friction "
                        "one convex problem) or pyramidal (MuJoCo's default: four edges)")
    p.add_argument("--invweight0", action="store_true", default=None,
                   help="scale the soft contact's and limits' compliance by MuJoCo's "
                        "approximate inverse weights (its body_invweight0 and dof_invweight0 "
                        "at the start; an MJCF file's: MuJoCo's own) instead of the exact "
                        "inverse inertia, as MuJoCo does")
    p.add_argument("--iterations", type=int, metavar="N",
                   help="projected Gauss-Seidel sweeps of the solved contact and limits "
                        "(default 30)")
    limits = p.add_mutually_exclusive_group()
    limits.add_argument("--joint-limits", action="store_true",
                        help="enforce the joint limits (stiff springs, sd.JointLimits)")
    limits.add_argument("--rigid-limits", action="store_true",
                        help="enforce the joint limits as constraints solved with the "
                             "dynamics (sd.RigidLimits: a rigid stop, as MuJoCo's limits; "
                             "with --rigid-contact or --scene, solved with the contact)")
    p.add_argument("--rigid-friction", action="store_true",
                   help="simulate the joints' and tendons' dry friction (--joint-friction) as "
                        "constraints solved with the dynamics (sd.RigidFriction: MuJoCo's "
                        "friction loss rows; an MJCF file's own solreffriction and "
                        "solimpfriction), not as stick-slip springs")
    p.add_argument("--record-every", type=int, default=1, help="keep every k-th sample")
    p.add_argument("--out", help="save the trajectory (.npz or .csv)")
    p.add_argument("--plot", help="save the time plots (.png, .pdf, .svg)")
    p.add_argument("--animate", help="save an animation (.gif, or .mp4 with ffmpeg)")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-compile-cache", action="store_true",
                   help="do not keep JAX's compiled rollouts in ~/.cache/screwdyn/jax (the cache "
                        "makes the next run of the same model and settings start in under a "
                        "second instead of several)")
    p.set_defaults(func=run)
    return p


def enable_compile_cache():
    """Point JAX's persistent compilation cache at ~/.cache/screwdyn/jax (``XDG_CACHE_HOME``
    honoured) unless the user configured one; returns the folder, or None without JAX or a
    writable cache folder. The command owns its process, so it may set JAX's configuration."""
    try:
        import jax
    except ImportError:
        return None
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "screwdyn", "jax")
    try:
        os.makedirs(path, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except Exception:  # a read-only home, an old JAX: run without the cache
        return None
    return path


def contact_point(text):
    """A ``ContactPoint`` from ``LINK[:X,Y,Z[:R]]`` (the value of --contact-points): at X,Y,Z
    (m) in LINK's frame (default its origin), of radius R (m, default 0: a point)."""
    import argparse

    from .sim import ContactPoint

    link, _, rest = text.partition(":")
    position, _, radius = rest.partition(":")
    try:
        xyz = tuple(float(x) for x in position.split(",")) if position else (0.0, 0.0, 0.0)
        r = float(radius) if radius else 0.0
    except ValueError:
        xyz, r = (), 0.0
    if not link or len(xyz) != 3:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not LINK[:X,Y,Z[:R]] (e.g. foot:0,0,-0.05:0.02: a sphere of radius "
            "0.02 m at (0, 0, -0.05) m in the frame of link foot)")
    return ContactPoint(link, xyz, r)


def ground_contact(args):
    """The ``GroundContact`` (or with --rigid-contact the ``RigidContact``) the arguments ask
    for (--contact, --contact-points, --rigid-contact), or None; ``ValueError`` for a contact
    option given without them, or one the chosen contact has not."""
    from .sim import GroundContact, RigidContact

    rigid = getattr(args, "rigid_contact", False)
    for name in ("impratio", "cone"):
        if getattr(args, name, None) is not None and not (rigid or getattr(args, "scene",
                                                                           False)):
            raise ValueError(f"--{name} is the solved contact's friction: add --rigid-contact "
                             "(or use --scene)")
    if solver_options(args) and not (rigid or getattr(args, "scene", False)
                                     or getattr(args, "rigid_limits", False)
                                     or getattr(args, "rigid_friction", False)):
        raise ValueError("--impedance, --invweight0 and --iterations are the solved contact's, "
                         "limits' and friction's: add --rigid-contact (or use --scene), "
                         "--rigid-limits or --rigid-friction")
    if getattr(args, "scene", False):
        for name in ("contact", "rigid_contact", "contact_points", "contact_stiffness"):
            if getattr(args, name, None):
                raise ValueError(f"--{name.replace('_', '-')} is the ground contact of points; "
                                 "--scene replaces it (the contact between collision shapes)")
        return None
    if not (getattr(args, "contact", False) or getattr(args, "contact_points", None) or rigid):
        for name in ("contact_links", "contact_stiffness"):
            if getattr(args, name, None) is not None:
                raise ValueError(f"--{name.replace('_', '-')} needs --contact")
        return None
    mu = 0.8 if getattr(args, "mu", None) is None else args.mu
    if rigid:
        if args.contact_stiffness is not None:
            raise ValueError("--contact-stiffness sets the penalty spring; --rigid-contact has "
                             "none (its contact is stiff at any step)")
        return RigidContact(mu=mu, links=args.contact_links, points=args.contact_points,
                            **solver_options(args, contact=True))
    return GroundContact(mu=mu, links=args.contact_links, points=args.contact_points,
                         stiffness=args.contact_stiffness)


def scene_of(args, model, q0):
    """(model, contact, q0) of the model put into an ``sd.Scene`` at q0 with the collision
    shapes of its file (--scene; --contact-links, --mu: every pair's friction, default each
    pair's own): ``Scene.build``'s, contact None (a warning says why) when no pair can
    touch."""
    from .sim import Scene

    scene = Scene(model.name)
    scene.add_robot(model, q=q0, links=args.contact_links)
    return scene.build(mu=args.mu, **solver_options(args, contact=True))


def solver_options(args, contact=False):
    """{"impedance": ..., "iterations": ...}: the solver's options given (--impedance: one
    number, or MuJoCo's solimp as a tuple; --iterations), for ``RigidContact``,
    ``Scene.build`` and ``RigidLimits``; with ``contact``, also --impratio and --cone (the
    contact's friction: ``RigidContact`` and ``Scene.build`` only)."""
    names = ("impedance", "iterations", "invweight0") + (("impratio", "cone") if contact
                                                         else ())
    options = {name: getattr(args, name) for name in names
               if getattr(args, name, None) is not None}
    if "impedance" in options:
        d = options["impedance"]
        options["impedance"] = d[0] if len(d) == 1 else tuple(d)
    return options


def _vector(values, size, name, default):
    if values is None:
        return default
    if len(values) != size:
        raise ValueError(f"--{name} needs {size} numbers, got {len(values)}")
    return np.array(values, dtype=float)


def make_controller(args, model):
    from . import controllers

    gravity = tuple(args.gravity) if args.gravity else None
    if getattr(args, "ctrl", None) is not None and args.controller != "actuators":
        raise ValueError("--ctrl is the controls of --controller actuators")
    if args.controller == "zero":
        return controllers.ZeroTorque()
    if args.controller == "gravity":
        return controllers.GravityCompensation(model, gravity=gravity, algebra=args.algebra)
    if args.controller == "actuators":
        if not is_mjcf(args.model):
            raise ValueError("--controller actuators drives an MJCF file's actuators; "
                             f"{args.model} is not an MJCF file")
        return controllers.MjcfActuators(model, args.model, getattr(args, "ctrl", None))
    q_ref = _vector(args.q_ref, model.nq, "q-ref", np.array(model.neutral))
    return controllers.JointPD(model, args.kp, args.kd, q_ref,
                               gravity_compensation=args.controller == "pd-gravity",
                               gravity=gravity, algebra=args.algebra)


def check_outputs(args):
    """Every output file checked before the run: a known format, a writable folder, and no
    existing file unless --force. ``ValueError`` naming the file otherwise."""
    from .sim.files import check_writable

    outputs = []
    if args.out:
        outputs.append(check_writable(args.out))
    for path, kinds in ((args.plot, (".png", ".pdf", ".svg", ".jpg", ".jpeg")),
                        (args.animate, (".gif", ".mp4"))):
        if path:
            if not path.lower().endswith(kinds):
                raise ValueError(f"{path!r}: expected a file ending in {', '.join(kinds)}")
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
                raise ValueError(f"cannot write {path!r}: the folder {folder!r} does not exist "
                                 "or is not writable")
            outputs.append(path)
    if not getattr(args, "force", False):
        existing = [p for p in outputs if os.path.exists(p)]
        if existing:
            raise ValueError(f"{existing[0]!r} exists: pass --force to overwrite it")
    if args.animate and args.animate.lower().endswith(".mp4"):
        from matplotlib import animation

        if not animation.writers.is_available("ffmpeg"):
            raise ValueError(f"{args.animate!r}: an .mp4 animation needs ffmpeg on the PATH; "
                             "save a .gif instead")


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _save(traj, path, interrupted):
    """``traj.save(path)`` (announced on stderr after an interruption: writing takes seconds
    for millions of samples) and its path; None when Ctrl-C or SIGTERM stopped the writing
    (said on stderr): the file is abandoned, an existing one left as it was, no temporary
    file."""
    try:
        if interrupted:
            print(f"screwdyn: interrupted: writing the {traj.n_samples} samples so far to "
                  f"{path} (Ctrl-C again abandons the file)", file=sys.stderr)
        return traj.save(path)
    except KeyboardInterrupt:
        print(f"screwdyn: interrupted while writing {path}: not written (an existing file is "
              "left as it was)", file=sys.stderr)
        return None


def run(args):
    """Run ``screwdyn simulate`` with parsed arguments; returns the exit status."""
    from .sim import SimulationError, SimulationInterrupted, simulate

    check_outputs(args)
    if args.plot or args.animate:
        from .plot import require_matplotlib

        require_matplotlib()  # before the run, not after it (ImportError: one line, status 2)
    model = load_model(args)
    if args.damping is not None:
        model = model.with_joint_parameters(damping=args.damping)
    q0 = _vector(args.q0, model.nq, "q0", np.array(model.q0))  # MJCF: qpos0, as MuJoCo starts
    qd0 = _vector(args.qd0, model.nv, "qd0", np.zeros(model.nv))
    contact = ground_contact(args)  # the arguments checked first
    if getattr(args, "scene", False):
        model, contact, q0 = scene_of(args, model, q0)
    friction = _joint_friction(args, model)
    controller = make_controller(args, model)
    cache = None if getattr(args, "no_compile_cache", False) else enable_compile_cache()
    t0 = time.perf_counter()
    bar = _progress_bar(args)
    failed, interrupted, traj = None, None, None
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) \
        if _in_main_thread() else None
    try:  # SIGTERM is Ctrl-C until the trajectory is saved: an interrupted save cleans up
        try:
            traj = simulate(model, q0, qd0, controller, args.duration, args.dt,
                            integrator=args.integrator, algebra=args.algebra,
                            backend=args.backend, gravity=args.gravity,
                            record_every=args.record_every, progress=bar, contact=contact,
                            joint_limits=_joint_limits(args),
                            joint_friction=friction)
        except SimulationError as e:
            failed, traj = e, e.trajectory
        except SimulationInterrupted as e:
            interrupted, traj = e, e.trajectory
        finally:
            _end_bar(bar, failed, interrupted)
        written = []
        if args.out and traj is not None:
            saved = _save(traj, args.out, interrupted is not None)
            if saved is None:
                return EXIT_INTERRUPTED
            written.append(saved)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if failed is None and interrupted is None:
        written += _pictures(args, traj, model)
    _print_summary(model, traj, time.perf_counter() - t0, cache, written)
    if interrupted is not None:
        print(f"screwdyn: {interrupted}" + (f"; written to {args.out}" if args.out else
                                            " (save them with --out)"), file=sys.stderr)
        return EXIT_INTERRUPTED
    if failed is not None:
        kept = 0 if traj is None else traj.n_samples
        return report_error(f"{failed}; the {kept} samples before the failure are "
                            + (f"written to {args.out}" if args.out else
                               "kept (save them with --out)"))
    return EXIT_OK


def _joint_limits(args):
    """What ``--joint-limits`` / ``--rigid-limits`` ask for (``Settings.joint_limits``): for
    an MJCF file, its joints' own solreflimit and solimplimit (``RigidLimits.from_mjcf``)
    unless ``--impedance`` sets one for all."""
    from .sim import RigidLimits

    if getattr(args, "rigid_limits", False):
        options = solver_options(args)
        if is_mjcf(args.model) and "impedance" not in options:  # the file's, as MuJoCo's
            return RigidLimits.from_mjcf(args.model, **options)
        return RigidLimits(**options)
    return getattr(args, "joint_limits", False)


def _joint_friction(args, model):
    """What ``--rigid-friction`` asks for (``Settings.joint_friction``): for an MJCF file, its
    joints' and tendons' own solreffriction and solimpfriction (``RigidFriction.from_mjcf``)
    unless ``--impedance`` sets one for all; without it, the stick-slip springs
    (``JointFriction()``). ``ValueError`` where the model has no dry friction to solve."""
    from .sim import JointFriction, RigidFriction

    if not getattr(args, "rigid_friction", False):
        return JointFriction()
    if not (model.coulomb.any() or any(t.frictionloss > 0 for t in model.tendons)):
        raise ValueError("--rigid-friction: the model has no joint or tendon dry friction "
                         "(load a file's with --joint-friction)")
    options = solver_options(args)
    if is_mjcf(args.model) and "impedance" not in options:  # the file's, as MuJoCo's
        return RigidFriction.from_mjcf(args.model, **options)
    return RigidFriction(**options)


def _progress_bar(args):
    """The run's progress bar, held open until ``_end_bar`` (None with --quiet)."""
    from .sim.progress import ProgressBar

    if args.quiet:
        return None
    steps = int(np.ceil(args.duration / args.dt - 1e-9)) if args.dt > 0 else 0
    return ProgressBar(steps, args.dt, held=True)


def _end_bar(bar, failed, interrupted):
    """End the progress bar where the run stopped: the failing or interrupted step, or where it
    stands after a run that finished."""
    if bar is None:
        return
    if failed is not None:
        bar.end(failed.step, "failed")
    elif interrupted is not None:
        bar.end(interrupted.step, "interrupted")
    else:
        bar.end()


def _pictures(args, traj, model):
    """Write the plot and the animation asked for; returns their paths."""
    written = []
    if args.plot:
        traj.plot(args.plot, progress=not args.quiet)
        written.append(args.plot)
    if args.animate:
        written.append(traj.animate(args.animate, model=model, progress=not args.quiet))
    return written


def _print_summary(model, traj, total, cache, written):
    """The run's summary on stdout."""
    from .sim.summary import summary_lines

    print(f"screwdyn simulate: {model!r}")
    for line in summary_lines(traj):
        print("  " + line)
    print(f"  {'in all':<12} {total:.3g} s (compilation, run, energies, files, pictures)")
    if cache and traj.meta.get("backend") == "jax":
        print(f"  {'cache':<12} compiled rollouts kept in {cache} (--no-compile-cache: off)")
    if written:
        print(f"  {'wrote':<12} {', '.join(os.fspath(w) for w in written)}")


def _in_main_thread():
    import threading

    return threading.current_thread() is threading.main_thread()
