"""Shared test helpers: the example-robot-data URDFs, random trees, Pinocchio conversions."""
import glob
import os
import sys

import numpy as np
import pytest

import screwdyn as sd

# the examples that reproduce the papers are imported by the tests that check them (and import
# their Pinocchio twin, examples/pinocchio_reference.py, from there)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples"))


def erd_robots_dir():
    """The robots/ folder of the example-robot-data package, or None if it is not installed."""
    for base in sys.path:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    return None


def erd_urdfs():
    root = erd_robots_dir()
    return sorted(glob.glob(os.path.join(root, "**", "*.urdf"), recursive=True)) if root else []


def erd_urdf(relative):
    """Path of one example-robot-data URDF; skips the test when the package is absent."""
    root = erd_robots_dir()
    if root is None:
        pytest.skip("example-robot-data is not installed")
    return os.path.join(root, relative)


def random_tree(seed, n=7, floating_base=False):
    """A random kinematic tree exercising everything the model supports: revolute joints about
    arbitrary axes, continuous and prismatic joints, fixed joints inside chains, rotated inertial
    frames, branching, and optionally a floating base."""
    rng = np.random.default_rng(seed)
    b = sd.ModelBuilder(f"random{seed}")
    b.add_link("base", mass=1.0, com=rng.normal(size=3) * 0.1, inertia=_random_inertia(rng))
    links = ["base"]
    for i in range(n):
        name = f"l{i}"
        b.add_link(name, mass=rng.uniform(0.5, 2.0), com=rng.normal(size=3) * 0.2,
                   inertia=_random_inertia(rng), inertia_rotation=_random_rotation(rng))
        kind = ("revolute", "continuous", "prismatic", "fixed", "revolute")[i % 5]
        b.add_joint(f"j{i}", kind, parent=links[rng.integers(len(links))], child=name,
                    xyz=rng.normal(size=3) * 0.3, rpy=rng.uniform(-np.pi, np.pi, 3),
                    axis=rng.normal(size=3))
        links.append(name)
    return b.build(floating_base=floating_base)


def random_state(model, seed, batch=()):
    """Random (q, qd, qdd) with leading batch dimensions; unit quaternions for free joints."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(batch, dtype=int))
    q = np.stack([sd.random_configuration(model, rng.integers(1 << 30)) for _ in range(count)])
    shape = tuple(batch)
    return (q.reshape(shape + (model.nq,)), rng.normal(size=shape + (model.nv,)),
            rng.normal(size=shape + (model.nv,)))


def _random_inertia(rng):
    """A physically consistent rotational inertia (principal moments obey the triangle rule)."""
    a = rng.uniform(0.01, 0.1, size=3)  # second moments of a mass distribution
    moments = np.array([a[1] + a[2], a[0] + a[2], a[0] + a[1]])
    R = _random_rotation(rng)
    return R @ np.diag(moments) @ R.T


def _random_rotation(rng):
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q if np.linalg.det(Q) > 0 else -Q


def pin_configuration(model, pin_model, q):
    """Pinocchio's q for screwdyn's q: continuous joints take (cos, sin) in Pinocchio."""
    parts = []
    for body, sl in zip(model.bodies, model.q_slices):
        joint = pin_model.joints[pin_model.getJointId(body.joint)]
        parts.append([np.cos(q[sl][0]), np.sin(q[sl][0])] if joint.nq == 2 and body.nq == 1
                     else q[sl])
    return np.concatenate(parts) if parts else np.zeros(0)


def joint_tree(seed, kinds, floating_base=False):
    """A random tree with one joint of each of ``kinds`` (type names or JointModels), attached
    to random earlier links at random placements, axes and pitches."""
    rng = np.random.default_rng(seed)
    b = sd.ModelBuilder(f"joints{seed}")
    b.add_link("base", mass=1.0, com=rng.normal(size=3) * 0.1, inertia=_random_inertia(rng))
    links = ["base"]
    for i, kind in enumerate(kinds):
        name = f"l{i}"
        b.add_link(name, mass=rng.uniform(0.5, 2.0), com=rng.normal(size=3) * 0.2,
                   inertia=_random_inertia(rng), inertia_rotation=_random_rotation(rng))
        b.add_joint(f"j{i}", kind, parent=links[rng.integers(len(links))], child=name,
                    xyz=rng.normal(size=3) * 0.3, rpy=rng.uniform(-np.pi, np.pi, 3),
                    axis=rng.normal(size=3), pitch=rng.uniform(-0.2, 0.2))
        links.append(name)
    return b.build(floating_base=floating_base)


def pinocchio_model(model):
    """The same tree as a Pinocchio model, joint by joint (``examples/pinocchio_reference.py``):
    an independent reference for every joint type Pinocchio has."""
    import pinocchio as pin
    from pinocchio_reference import pinocchio_model as convert

    return convert(pin, model)


def pinocchio_q(model, q):
    """Pinocchio's configuration of screwdyn's q (``pinocchio_model`` or a URDF model): a
    continuous or planar angle as (cos, sin), a scalar-first quaternion reordered."""
    from screwdyn.model import joints as J

    parts = []
    for b, sl in zip(model.active_bodies, model.q_slices):
        jm, qj = b.joint_model, q[sl]
        if isinstance(jm, J.Planar):
            parts.append([qj[0], qj[1], np.cos(qj[2]), np.sin(qj[2])])
        elif isinstance(jm, J.Spherical) and jm.scalar_first:
            parts.append(np.roll(qj, -1))
        else:
            parts.append(qj)
    return np.concatenate(parts) if parts else np.zeros(0)
