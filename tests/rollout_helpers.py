"""Controllers and settings shared by the rollout tests; a module of its own so that worker
processes and Ray actors can import what the tests send them."""
import contextlib
import functools
import ipaddress
import os
import signal
import sys

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


# ============================================================================================
# The sockets a Ray started by this process listens on (Linux: read from /proc)
# ============================================================================================
def descendants(pid):
    """The process ids under ``pid`` (its children, theirs, ...), read from /proc."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in found]
        found.update(children)
        todo.extend(children)
    return found


def listening_sockets(pids):
    """[(address, port, pid)] of the TCP sockets the processes ``pids`` listen on."""
    inodes = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes[target[8:-1]] = pid
    found = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/net/{table}") as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    address, port = fields[1].split(":")
                    found.append((_ip(address), int(port, 16), inodes[fields[9]]))
    return sorted(found)


def _ip(hex_address):
    """An address of /proc/net/tcp{,6} (32-bit words in host byte order) as text, an IPv4
    address mapped in IPv6 (::ffff:127.0.0.1) as the IPv4 one."""
    raw = b"".join(int(hex_address[i:i + 8], 16).to_bytes(4, sys.byteorder)
                   for i in range(0, len(hex_address), 8))
    address = ipaddress.ip_address(raw)
    return str(getattr(address, "ipv4_mapped", None) or address)


def exposed(sockets):
    """The (address, port, pid) of ``listening_sockets`` that are not on a loopback address."""
    return [s for s in sockets if not ipaddress.ip_address(s[0]).is_loopback]


def ray_listening_sockets():
    """The TCP sockets this process and the processes it started (a local Ray's) listen on."""
    return listening_sockets(descendants(os.getpid()) | {os.getpid()})
