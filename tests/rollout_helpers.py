"""Controllers and settings shared by the rollout tests; a module of its own so that worker
processes and Ray actors can import what the tests send them."""
import functools
import os
import signal

import numpy as np

import screwdyn as sd
from screwdyn._backend import namespace
from test_cli import PENDULUM  # a two-joint pendulum URDF


# the settings of most tests: small and quick to compile (a 2-joint pendulum, 51 samples)
T_FINAL, DT = 0.05, 1e-3
FAST = dict(integrator="semi_implicit_euler", chunk_size=8)


def pendulum():
    return sd.load_urdf(PENDULUM)


def datasets_on_two_engines(model, engine, folder, n, seed):
    """The same dataset written by the serial engine in folder/a and by ``engine`` in
    folder/b (random states with velocities, zero torque)."""
    from screwdyn.rollouts import RandomStates

    kw = dict(FAST, n=n, seed=seed)
    sampler = RandomStates(model, velocity_std=1.0)
    serial = sd.rollouts(model, sampler, None, None, T_FINAL, DT, out=folder / "a", **kw)
    other = sd.rollouts(model, sampler, None, None, T_FINAL, DT, out=folder / "b",
                        engine=engine, **kw)
    return serial, other


def states(n, marked=(), seed=0):
    """n initial configurations of the pendulum in [-1, 1], the ``marked`` rollouts with the
    wrist at 3 rad (what NaNWhen and RaiseWhen react to)."""
    q0 = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, 2))
    q0[list(marked), 1] = 3.0
    return q0


class NaNWhen:
    """Zero torque, but NaN from time ``after`` on in every rollout whose wrist angle exceeds
    ``limit`` (array-generic: compiles under JAX)."""

    name = "NaN when the wrist is past a limit"

    def __init__(self, limit=2.9, after=0.02):
        self.limit, self.after = limit, after

    def __call__(self, t, q, qd):
        xp = namespace(q)
        bad = (q[..., 1:2] > self.limit) & (t >= self.after)
        return xp.where(bad, xp.nan, 0.0 * qd)


class RaiseWhen:
    """Zero torque, but raises ValueError from time ``after`` on when any rollout of the batch
    has its wrist past ``limit`` (numpy only: Python control flow on values)."""

    def __init__(self, limit=2.9, after=0.01):
        self.limit, self.after = limit, after

    def __call__(self, t, q, qd):
        if t >= self.after and np.any(np.asarray(q)[..., 1] > self.limit):
            raise ValueError(f"wrist past {self.limit}")
        return np.zeros(np.shape(qd))


class KillOnce:
    """Zero torque; the first process to simulate past ``at`` seconds kills itself (SIGKILL) in
    the middle of its compiled rollout, once: the ``marker`` file records that it happened."""

    name = "zero torque, one worker killed"

    def __init__(self, marker, at=0.02):
        self.marker, self.at = marker, at

    def __call__(self, t, q, qd):
        import jax

        jax.debug.callback(functools.partial(_kill_once, self.marker), t >= self.at)
        return 0.0 * qd


def _kill_once(marker, now):
    if not now:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
