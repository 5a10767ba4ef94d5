"""``screwdyn rollouts``: a dataset of many rollouts from random initial states, on all cores or
a Ray cluster, streamed to sharded Parquet files; rerunning the same command resumes it.

    screwdyn rollouts MODEL --n 100000 --out dataset/ [--duration 1 --dt 1e-3]
        [--controller zero|gravity|pd|pd-gravity|actuators] [--velocity-std 0.5] [--seed 0]
        [--engine serial|processes|ray] [--workers N] [--chunk-size 256] [--address HOST:6379]

Rollout i starts from ``RandomStates(model, velocity_std)`` drawn with its own seed (joint angles
uniform in [-pi, pi]). MODEL is loaded as by every screwdyn command (``--floating-base``,
``--joint-order``, ``--unsupported``). Exit status 0 (failed rollouts are recorded in the
dataset and counted in the summary); 2, with one line on stderr, for bad arguments, a folder
that holds another dataset, a disk error, or a job that stopped (``RolloutError``; the shards
written so far stay valid); 130 when interrupted.
"""
import time

from .cli import add_model_arguments, load_model, report_error
from .cli_simulate import CONTROLLERS, enable_compile_cache, make_controller


def add_parser(subparsers):
    """Register the ``rollouts`` subcommand on an argparse ``subparsers`` object."""
    from .algebra import ALGEBRAS
    from .rollouts import ENGINES

    p = subparsers.add_parser(
        "rollouts", help="many rollouts from random states, streamed to a Parquet dataset",
        description="Simulate N rollouts of MODEL from random initial states (seeded per "
                    "rollout) on one core, all cores or a Ray cluster, and write them to a "
                    "sharded, checksummed Parquet dataset; the same command resumes it.")
    add_model_arguments(p)
    p.add_argument("--n", type=int, required=True, help="number of rollouts")
    p.add_argument("--out", required=True, help="dataset folder (created; resumed if it holds "
                                                "this dataset)")
    p.add_argument("--duration", type=float, default=1.0, help="simulated time per rollout [s]")
    p.add_argument("--dt", type=float, default=1e-3, help="time step [s] (default 1e-3)")
    p.add_argument("--controller", choices=CONTROLLERS, default="zero")
    p.add_argument("--kp", type=float, default=100.0, help="PD stiffness (default 100)")
    p.add_argument("--kd", type=float, default=20.0, help="PD damping (default 20)")
    p.add_argument("--q-ref", type=float, nargs="+", help="PD target (default neutral)")
    p.add_argument("--velocity-std", type=float, default=0.0,
                   help="standard deviation of the random initial joint velocities (default 0)")
    p.add_argument("--seed", type=int, default=0, help="the job's seed (default 0)")
    p.add_argument("--engine", choices=ENGINES, default="processes")
    p.add_argument("--workers", type=int, help="worker processes or Ray actors (default: all "
                                               "CPUs)")
    p.add_argument("--chunk-size", type=int, default=256, help="rollouts per chunk and shard")
    p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or local)")
    hyphenated = ["semi-implicit-euler"]
    p.add_argument("--integrator", default="rk4",
                   choices=["rk4", "semi_implicit_euler", "euler"] + hyphenated)
    p.add_argument("--algebra", default="spatial", choices=list(ALGEBRAS))
    p.add_argument("--backend", default="auto", choices=["auto", "jax", "numpy"])
    p.add_argument("--gravity", type=float, nargs=3, metavar=("GX", "GY", "GZ"))
    p.add_argument("--damping", type=float, help="viscous damping on every joint [N m s/rad]")
    p.add_argument("--record-every", type=int, default=1, help="keep every k-th sample")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-compile-cache", action="store_true",
                   help="do not keep compiled rollouts in ~/.cache/screwdyn/jax")
    p.set_defaults(func=run)
    return p


def run(args):
    """Run ``screwdyn rollouts`` with parsed arguments; returns the exit status."""
    from .rollouts import RandomStates, RolloutError, rollouts

    model = load_model(args)
    if args.damping is not None:
        model = model.with_joint_parameters(damping=args.damping)
    controller = make_controller(args, model)
    if not args.no_compile_cache:
        enable_compile_cache()
    t0 = time.perf_counter()
    try:
        ds = rollouts(model, RandomStates(model, args.velocity_std), None, controller,
                      args.duration, args.dt, n=args.n, seed=args.seed, engine=args.engine,
                      workers=args.workers, chunk_size=args.chunk_size, out=args.out,
                      address=args.address, integrator=args.integrator,
                      algebra=args.algebra, backend=args.backend, gravity=args.gravity,
                      record_every=args.record_every, progress=not args.quiet)
    except RolloutError as e:
        return report_error(e)
    wall = time.perf_counter() - t0
    run = ds.run
    skipped = run["skipped"]
    done = len(ds) - skipped
    print(f"screwdyn rollouts: {model!r}")
    print(f"  {'dataset':<10} {ds.folder}: {len(ds)} of {ds.meta['n']} rollouts, "
          f"{len(ds.entries)} shards" + (" (complete)" if ds.complete else ""))
    if skipped:
        print(f"  {'resumed':<10} {skipped} rollouts in verified shards were kept")
    rate = done / run["wall_time"] if run["wall_time"] > 0 else float("nan")
    print(f"  {'ran':<10} {done} rollouts in {run['wall_time']:.3g} s ({rate:.4g} rollouts/s, "
          f"{run['engine']} x {run['workers']}); {wall:.3g} s in all")
    failed = sum(e["failed"] for e in ds.entries)
    if failed:
        print(f"  {'failed':<10} {failed} rollouts (their errors are in ds.rollouts())")
    if run["workers_replaced"]:
        print(f"  {'faults':<10} {run['workers_replaced']} workers died and were replaced; "
              "their chunks ran again")
    return 0
