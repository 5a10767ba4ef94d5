"""``screwdyn view``: the robot in a browser, posed or playing a trajectory, until Ctrl-C.

    screwdyn view MODEL [--q ...] [--trajectory FILE [--rollout I] [--speed S]]
                  [--port 8080] [--host 127.0.0.1] [--frames] [--com] [--skeleton] [--open]

MODEL is a bundled robot name, a URDF file, an MJCF file or a DH table, loaded as by every
screwdyn command (``--floating-base``, ``--joint-order``, ``--unsupported``); the visual
geometry comes from the URDF (another model is drawn as a skeleton, or give ``--urdf``). The
URL is printed; the server needs no display (open the URL in any browser that reaches the port).
"""
import argparse
from typing import Any

from .cli import add_model_arguments


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``view`` subcommand on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "view", help="the robot in a browser (meshes, joint sliders, trajectory playback)",
        description="Serve a 3-D view of MODEL (viser) and print its URL; Ctrl-C stops it.")
    add_model_arguments(p)
    p.add_argument("--q", type=float, nargs="+", help="configuration to show (nq numbers)")
    p.add_argument("--trajectory", help="a trajectory of MODEL to play (.npz or .csv, saved "
                                        "by screwdyn simulate --out or Trajectory.save)")
    p.add_argument("--rollout", type=int, nargs="+", default=[0],
                   help="which rollout of a batched trajectory (one index per batch dimension)")
    p.add_argument("--speed", type=float, default=1.0, help="playback speed (1: real time)")
    p.add_argument("--urdf", help="read the visual geometry from this URDF instead")
    p.add_argument("--port", type=int, default=8080, help="port (the next free one if taken)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (0.0.0.0: every interface; default local only)")
    p.add_argument("--frames", action="store_true", help="show every link's axes")
    p.add_argument("--com", action="store_true", help="show the centres of mass")
    p.add_argument("--skeleton", action="store_true", help="show the skeleton with the meshes")
    p.add_argument("--open", action="store_true", help="open the URL in a browser, if any")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from .cli import load_model
    from .sim import Trajectory
    from .viewer import view

    model = load_model(args)  # a URDF model knows its file
    if args.q is not None and args.trajectory:
        raise ValueError("give --q or --trajectory, not both")
    q = None
    if args.q is not None:
        if len(args.q) != model.nq:
            raise ValueError(f"--q needs {model.nq} numbers, got {len(args.q)}")
        q = args.q
    subject = model
    if args.trajectory:
        subject = Trajectory.load(args.trajectory)
    viewer = view(subject, q, model=model if args.trajectory else None, urdf=args.urdf,
                  rollout=tuple(args.rollout), host=args.host, port=args.port,
                  skeleton=True if args.skeleton else None, frames=args.frames, com=args.com,
                  speed=args.speed, open_browser=args.open)
    if args.trajectory:
        viewer.play()
    print("screwdyn viewer: Ctrl-C stops the server", flush=True)
    viewer.wait()
    return 0
