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


PENDULUM_URDF = """<robot name="urdf_pendulum">
  <link name="base"/>
  <link name="bob"><inertial><origin xyz="0 0 -0.5"/><mass value="1"/>
    <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="continuous"><parent link="base"/><child link="bob"/>
    <axis xyz="0 1 0"/></joint>
</robot>"""


@pytest.fixture
def pendulum_urdf(tmp_path):
    """The path (str) of ``PENDULUM_URDF`` written to a file."""
    path = tmp_path / "pendulum.urdf"
    path.write_text(PENDULUM_URDF)
    return str(path)  # a 1 kg point pendulum of 0.5 m, for the simulate command's tests


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


#: where pip packages keep their MuJoCo models, under site-packages
BUNDLED_MJCF = {"dm_control": ("dm_control", "suite"),
                "gymnasium": ("gymnasium", "envs", "mujoco", "assets")}


def bundled_mjcf(package, name):
    """The path of the MJCF model ``name`` that ``package`` (``BUNDLED_MJCF``: dm_control's
    suite, gymnasium's MuJoCo environments) installs beside MuJoCo, or None where it is not
    installed."""
    mujoco = pytest.importorskip("mujoco")
    site = os.path.dirname(os.path.dirname(mujoco.__file__))
    path = os.path.join(site, *BUNDLED_MJCF[package], f"{name}.xml")
    return path if os.path.exists(path) else None


def as_mujoco_models_it(package, name, iterations=200):
    """(m, {model, contact, q0, joint_limits, joint_friction, path}) of the bundled MJCF model
    ``name`` (``bundled_mjcf``; skipped where not installed): MuJoCo's compiled model m at
    Euler 1 ms, and screwdyn's simulation of it with what MuJoCo models (its damping, springs,
    dry friction and soft equality constraints; the file's soft contacts and cone with
    MuJoCo's inverse weights, a row entering the solve where MuJoCo's does, ``iterations``
    sweeps; its limits' and friction's solref and solimp), as ``simulate``'s keywords."""
    import warnings

    mujoco = pytest.importorskip("mujoco")
    path = bundled_mjcf(package, name)
    if path is None:
        pytest.skip(f"{package} is not installed")
    m = mujoco.MjModel.from_xml_path(path)
    cone = "pyramidal" if m.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL else "convex"
    m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations in the files, MuJoCo's own
        robot = sd.load_mjcf(path, joint_damping=True, joint_springs=True, joint_friction=True,
                             soft_equalities=True)
    scene = sd.Scene(name)
    scene.add_robot(robot)
    model, contact, q0 = scene.build(cone=cone, invweight0=True, margin=0.0,
                                     iterations=iterations)
    return m, {"model": model, "contact": contact, "q0": q0,
               "joint_limits": sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0),
               "joint_friction": sd.RigidFriction.from_mjcf(path, invweight0=True),
               "path": path}


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


# -- MuJoCo's soft constraints, as its documentation writes them -----------------------------
#: MuJoCo's default solimp (dmin, dmax, width, midpoint, power)
MUJOCO_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)


def mujoco_impedance(r, solimp=MUJOCO_SOLIMP):
    """MuJoCo's impedance d(r) of a violation r (m or rad): the solimp sigmoid as MuJoCo's
    documentation (Modeling, solver parameters) writes it, apart from screwdyn's
    ``model.impedance``."""
    dmin, dmax, width, midpoint, power = solimp
    x = min(abs(r) / width, 1.0)
    if x <= midpoint:
        y = x ** power / midpoint ** (power - 1)
    else:
        y = 1 - (1 - x) ** power / (1 - midpoint) ** (power - 1)
    return dmin + y * (dmax - dmin)


def soft_sink(acceleration=9.81, timeconst=0.02, solimp=MUJOCO_SOLIMP):
    """How far a soft one-sided row at rest is violated (m or rad), dampratio 1, where the force
    it carries is ``acceleration`` / A_jj (a ball on the point under its centre, a block on a
    slider's stop, a cube on its four corners, A_jj m = 4 there: g): at rest the row's
    compliance holds what its reference acceleration asks,
    (1 - d) / d A_jj f = d r / (dmax timeconst)^2, so that
    r = acceleration (1 - d(r)) (dmax timeconst / d(r))^2, solved by bisection."""
    dmax = solimp[1]
    low, high = 0.0, 0.05
    for _ in range(200):
        r = 0.5 * (low + high)
        d = mujoco_impedance(r, solimp)
        if r < acceleration * (1 - d) * (dmax * timeconst / d) ** 2:
            low = r
        else:
            high = r
    return r


# -- hypothesis: deterministic in CI ---------------------------------------------------------
# "ci" (the default): the same examples on every run (derandomize), no example database, no
# wall-clock deadline (2 shared cores make timings noisy: the tests that hunt for hangs set their
# own generous deadline). SCREWDYN_HYPOTHESIS=hunt: many random examples, to hunt locally.
try:
    from hypothesis import HealthCheck, settings as _hypothesis_settings

    _hypothesis_settings.register_profile(
        "ci", derandomize=True, database=None, deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    _hypothesis_settings.register_profile("hunt", max_examples=2000, derandomize=False,
                                          deadline=None)
    _hypothesis_settings.load_profile(os.environ.get("SCREWDYN_HYPOTHESIS", "ci"))
except ImportError:  # hypothesis is in the test extra; its tests skip without it
    pass


# -- progress: which file is running ---------------------------------------------------------
@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """With the project's ``-q`` (pyproject addopts), pytest prints bare dots; name each test
    file at the start of its line of dots, as plain ``pytest`` does, so that a long run shows
    which part is running (``-qq`` stays bare, ``-v`` names every test)."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None and config.get_verbosity() == -1:
        reporter.showfspath = True
