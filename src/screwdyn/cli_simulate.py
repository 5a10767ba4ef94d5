"""``screwdyn simulate``: run a simulation from the command line, save it, plot it, summarise it.

    screwdyn simulate MODEL --duration 5 --dt 1e-3 --controller gravity --out traj.npz \\
        --plot traj.png [--animate traj.gif]

MODEL is a bundled robot name, a URDF file or a DH table (as for every screwdyn command). A
progress bar goes to stderr on runs longer than a second; a summary (energy drift, peak joint
force, wall time, real-time factor) ends the run. Exit status 0, or 1 when the simulation failed
(the samples before the failure are still saved with --out).
"""
import math
import os
import sys
import time

import numpy as np

CONTROLLERS = ("zero", "gravity", "pd", "pd-gravity")


def add_parser(subparsers):
    """Register the ``simulate`` subcommand on an argparse ``subparsers`` object."""
    from .algebra import ALGEBRAS
    from .simulate import BACKENDS, INTEGRATORS

    p = subparsers.add_parser(
        "simulate", help="simulate a robot, save, plot and animate the trajectory",
        description="Simulate MODEL from q0 (default: the neutral configuration) under a "
                    "built-in controller and print a summary.")
    p.add_argument("model", help="bundled robot name, URDF file or DH table (.csv)")
    p.add_argument("--duration", type=float, default=5.0, help="simulated time [s] (default 5)")
    p.add_argument("--dt", type=float, default=1e-3, help="time step [s] (default 1e-3)")
    p.add_argument("--controller", choices=CONTROLLERS, default="zero",
                   help="zero torque, gravity compensation, joint PD towards --q-ref, or joint "
                        "PD plus gravity compensation (default zero)")
    p.add_argument("--kp", type=float, default=100.0, help="PD stiffness (default 100)")
    p.add_argument("--kd", type=float, default=20.0, help="PD damping (default 20)")
    p.add_argument("--q0", type=float, nargs="+", help="initial configuration (nq numbers)")
    p.add_argument("--qd0", type=float, nargs="+", help="initial velocity (nv numbers)")
    p.add_argument("--q-ref", type=float, nargs="+", help="PD target (default neutral)")
    p.add_argument("--damping", type=float, help="viscous damping on every joint [N m s/rad]")
    hyphenated = [i.replace("_", "-") for i in INTEGRATORS if "_" in i]
    p.add_argument("--integrator", default="rk4", choices=list(INTEGRATORS) + hyphenated)
    p.add_argument("--algebra", default="spatial", choices=list(ALGEBRAS))
    p.add_argument("--backend", default="auto", choices=list(BACKENDS))
    p.add_argument("--gravity", type=float, nargs=3, metavar=("GX", "GY", "GZ"),
                   help="gravity in the world frame (default 0 0 -9.81)")
    p.add_argument("--floating-base", action="store_true", help="add a free root joint (URDF)")
    p.add_argument("--record-every", type=int, default=1, help="keep every k-th sample")
    p.add_argument("--out", help="save the trajectory (.npz or .csv)")
    p.add_argument("--plot", help="save the time plots (.png, .pdf, .svg)")
    p.add_argument("--animate", help="save an animation (.gif, or .mp4 with ffmpeg)")
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


def _resolve_model(spec, floating_base):
    try:
        from .cli import resolve_model
    except ImportError:
        resolve_model = None
    if resolve_model is not None:
        return resolve_model(spec, floating_base)
    from .model import load_urdf

    return load_urdf(spec, floating_base=floating_base)


def _vector(values, size, name, default):
    if values is None:
        return default
    if len(values) != size:
        raise ValueError(f"--{name} needs {size} numbers, got {len(values)}")
    return np.array(values, dtype=float)


def make_controller(args, model):
    from . import controllers

    gravity = tuple(args.gravity) if args.gravity else None
    if args.controller == "zero":
        return controllers.ZeroTorque()
    if args.controller == "gravity":
        return controllers.GravityCompensation(model, gravity=gravity, algebra=args.algebra)
    q_ref = _vector(args.q_ref, model.nq, "q-ref", np.array(model.neutral))
    return controllers.JointPD(model, args.kp, args.kd, q_ref,
                               gravity_compensation=args.controller == "pd-gravity",
                               gravity=gravity, algebra=args.algebra)


class ProgressBar:
    """A plain-text progress bar on a stream (stderr), drawn only once a run has lasted ``delay``
    seconds; on a terminal it redraws one line, elsewhere it prints a line every 10 %."""

    def __init__(self, dt, stream=None, delay=1.0, width=30):
        self.dt, self.stream, self.delay, self.width = dt, stream or sys.stderr, delay, width
        self.start = time.perf_counter()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.shown, self.last_decile = False, -1

    def __call__(self, done, total):
        elapsed = time.perf_counter() - self.start
        if elapsed < self.delay and not self.shown:
            return
        fraction = done / total if total else 1.0
        filled = int(round(self.width * fraction))
        line = (f"simulating [{'#' * filled}{'.' * (self.width - filled)}] {100 * fraction:5.1f}%"
                f"  t = {done * self.dt:.4g} / {total * self.dt:.4g} s  ({elapsed:.1f} s)")
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
        elif int(10 * fraction) > self.last_decile:
            self.last_decile = int(10 * fraction)
            self.stream.write(line + "\n")
        self.shown = True

    def close(self):
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def summary_lines(traj):
    """The one-screen summary of a trajectory (used by the CLI and ``Trajectory.summary``)."""
    from .simulate import coordinate_names

    meta = traj.meta
    lines = []
    batch = f", {int(np.prod(traj.batch_shape))} rollouts" if traj.batch_shape else ""
    end = traj.t[-1] if len(traj.t) else 0.0
    lines.append(f"model        {meta.get('model', '?')}: nq = {traj.q.shape[-1]}, "
                 f"nv = {traj.qd.shape[-1]}{batch}")
    lines.append(f"run          {end:.6g} s, {traj.n_samples} samples, dt = {meta.get('dt')} s, "
                 f"{meta.get('integrator')}, {meta.get('algebra')} algebra, "
                 f"{meta.get('backend')} backend")
    lines.append(f"controller   {meta.get('controller')}")
    wall, comp = meta.get("wall_time", 0.0), meta.get("compile_time", 0.0)
    rtf = traj.real_time_factor
    rtf_text = f"{rtf:.3g}" if math.isfinite(rtf) else "n/a"
    compile_text = f" (+ {comp:.2f} s compilation, once per model and settings)" if comp else ""
    lines.append(f"wall time    {wall:.3g} s{compile_text}; real-time factor {rtf_text}")
    if traj.n_samples == 0:
        return lines
    drift = np.max(traj.energy_drift())
    scale = np.max(traj.energy_scale())
    forced = np.any(traj.tau != 0)
    what = "|E - E0 - W| (W: work of tau and damping)" if forced or np.any(
        np.asarray(meta.get("damping", 0.0))) else "|E - E0|"
    lines.append(f"energy       E(0) = {np.ravel(traj.energy[..., 0])[0]:.6g} J; drift max "
                 f"{what} = {drift:.2e} of the {scale:.4g} J the motion exchanges")
    if traj.model is not None:
        _, names = coordinate_names(traj.model)
    else:
        names = meta.get("v_names") or [f"v{i}" for i in range(traj.qd.shape[-1])]
    for label, data, unit in (("max |tau|", traj.tau, "N m or N"),
                              ("max |qd|", traj.qd, "rad/s or m/s")):
        flat = np.abs(data).reshape(-1, data.shape[-2], data.shape[-1])
        r, k, j = np.unravel_index(int(np.argmax(flat)), flat.shape)
        lines.append(f"{label:<12} {flat[r, k, j]:.4g} {unit} ({names[j]} at t = "
                     f"{traj.t[k]:.4g} s)")
    final = traj.q.reshape(-1, traj.n_samples, traj.q.shape[-1])[0, -1]
    with np.printoptions(precision=4, suppress=True, linewidth=100):
        lines.append(f"final q      {final}")
    return lines


def run(args):
    """Run ``screwdyn simulate`` with parsed arguments; returns the exit status."""
    from .simulate import SimulationError, simulate

    model = _resolve_model(args.model, getattr(args, "floating_base", False))
    if args.damping is not None:
        model = model.with_joint_parameters(damping=args.damping)
    q0 = _vector(args.q0, model.nq, "q0", np.array(model.neutral))
    qd0 = _vector(args.qd0, model.nv, "qd0", np.zeros(model.nv))
    controller = make_controller(args, model)
    for path, kinds in ((args.out, (".npz", ".csv")), (args.animate, (".gif", ".mp4"))):
        if path and not path.lower().endswith(kinds):
            raise ValueError(f"{path!r}: expected a file ending in {' or '.join(kinds)}")
    if args.plot or args.animate:
        from .plot import _matplotlib

        try:
            _matplotlib()  # before the run, not after it
        except ImportError as e:
            print(f"screwdyn: error: {e}", file=sys.stderr)
            return 2
    cache = None if getattr(args, "no_compile_cache", False) else enable_compile_cache()
    bar = None if args.quiet else ProgressBar(args.dt)
    failed = None
    t0 = time.perf_counter()
    try:
        traj = simulate(model, q0, qd0, controller, args.duration, args.dt,
                        integrator=args.integrator, algebra=args.algebra, backend=args.backend,
                        gravity=args.gravity, record_every=args.record_every, progress=bar)
    except SimulationError as e:
        failed, traj = e, e.trajectory
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - t0
    written = []
    if args.out and traj is not None:
        written.append(traj.save(args.out))
    if failed is None:
        if args.plot:
            traj.plot(args.plot)
            written.append(args.plot)
        if args.animate:
            written.append(traj.animate(args.animate, model=model))
    print(f"screwdyn simulate: {model!r}")
    for line in summary_lines(traj):
        print("  " + line)
    print(f"  {'in all':<12} {total:.3g} s (compilation, run, energies)")
    if cache and traj.meta.get("backend") == "jax":
        print(f"  {'cache':<12} compiled rollouts kept in {cache} (--no-compile-cache: off)")
    if written:
        print(f"  {'wrote':<12} {', '.join(os.fspath(w) for w in written)}")
    if failed is not None:
        print(f"screwdyn: error: {failed}", file=sys.stderr)
        print(f"screwdyn: the {traj.n_samples} samples before the failure are kept"
              + (f" in {args.out}" if args.out else " (save them with --out)"), file=sys.stderr)
        return 1
    return 0
