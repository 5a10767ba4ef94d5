"""Shared test helpers: the example-robot-data URDFs, random trees, Pinocchio conversions."""
import glob
import os
import sys

import numpy as np
import pytest

import screwdyn as sd


PENDULUM_URDF = """<robot name="urdf_pendulum">
  <link name="base"/>
  <link name="bob"><inertial><origin xyz="0 0 -0.5"/><mass value="1"/>
    <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="continuous"><parent link="base"/><child link="bob"/>
    <axis xyz="0 1 0"/></joint>
</robot>"""  # a 1 kg point pendulum of 0.5 m, for the simulate command's tests


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
