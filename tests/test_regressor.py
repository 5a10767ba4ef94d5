"""Inertial parameters as inputs: ``Model.inertial_parameters`` and ``with_inertial_parameters``
against Pinocchio's dynamic parameters, the joint-torque regressor against inverse dynamics (every
algebra) and Pinocchio's ``computeJointTorqueRegressor``, gradients with respect to the
parameters (JAX against the regressor and central differences), bad inputs."""
import warnings
from dataclasses import replace

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf, pin_configuration, random_state, random_tree

pin = pytest.importorskip("pinocchio")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

ALGEBRAS = ("spatial", "cga", "dq")
# example-robot-data, mimic-free as loaded (joints independent), fixed and floating bases
ROBOTS = [("panda_description/urdf/panda.urdf", False), ("ur_description/urdf/ur5_robot.urdf", False),
          ("solo_description/robots/solo12.urdf", True),
          ("anymal_c_simple_description/urdf/anymal.urdf", True),
          ("talos_data/robots/talos_reduced.urdf", True)]
IDS = ["panda", "ur5", "solo12-floating", "anymal-floating", "talos-floating"]


def _load(relative, floating):
    path = erd_urdf(relative)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        model = sd.load_urdf(path, floating_base=floating, joint_order="name")
    pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(path))
    assert [pm.names[j] for j in range(1, pm.njoints)] == list(model.joint_names)
    return model, pm


def _rel(a, b):
    b = np.asarray(b)
    return np.max(np.abs(np.asarray(a) - b), initial=0.0) / max(1.0, np.max(np.abs(b), initial=0.0))


@pytest.fixture(scope="module")
def panda():
    return _load(*ROBOTS[0])[0]


@pytest.mark.parametrize("robot", ROBOTS, ids=IDS)
def test_inertial_parameters_are_pinocchios_dynamic_parameters(robot):
    model, pm = _load(*robot)
    pi = model.inertial_parameters()
    reference = np.array([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])
    assert pi.shape == (model.nbodies, 10)
    assert _rel(pi, reference) < 1e-14


@pytest.mark.parametrize("robot", ROBOTS, ids=IDS)
def test_regressor_equals_pinocchio_and_reproduces_inverse_dynamics(robot):
    """Y equals Pinocchio's computeJointTorqueRegressor (1e-9), and Y pi the inverse dynamics
    (1e-12 relative), in every algebra, for a batch of random states."""
    model, pm = _load(*robot)
    pi = model.inertial_parameters().reshape(-1)
    q, qd, qdd = random_state(model, 3, batch=(4,))
    data = pm.createData()
    reference = np.stack([pin.computeJointTorqueRegressor(
        pm, data, pin_configuration(model, pm, q[k]), qd[k], qdd[k]).copy() for k in range(4)])
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    for algebra in ALGEBRAS:
        Y = sd.inverse_dynamics_regressor(model, q, qd, qdd, algebra=algebra)
        assert Y.shape == (4, model.nv, 10 * model.nbodies)
        assert _rel(Y, reference) < 1e-9, algebra
        assert _rel(Y @ pi, tau) < 1e-12, algebra


def test_regressor_batches_broadcast_and_gravity(panda):
    """Leading batch dimensions broadcast as in the other dynamics functions; a gravity per
    state is honoured (against inverse dynamics with the same gravity)."""
    pi = panda.inertial_parameters().reshape(-1)
    q, qd, qdd = random_state(panda, 5, batch=(2, 3))
    g = np.random.default_rng(0).normal(size=(2, 3, 3)) * 9.81
    Y = sd.inverse_dynamics_regressor(panda, q, qd[0, 0], qdd, gravity=g)
    assert Y.shape == (2, 3, panda.nv, 10 * panda.nbodies)
    assert _rel(Y @ pi, sd.inverse_dynamics(panda, q, qd[0, 0], qdd, gravity=g)) < 1e-12
    single = sd.inverse_dynamics_regressor(panda, q[1, 2], qd[0, 0], qdd[1, 2], gravity=g[1, 2])
    assert single.shape == (panda.nv, 10 * panda.nbodies)
    assert _rel(single, Y[1, 2]) < 1e-14


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_regressor_on_random_trees_with_every_joint_type(algebra):
    """Random branched trees (revolute about any axis, continuous, prismatic, fixed joints in
    chains, a floating base) and a tree with planar, spherical and helical joints: Y pi = ID,
    Y = Pinocchio's regressor of the same tree."""
    from conftest import joint_tree, pinocchio_model, pinocchio_q

    for model in (random_tree(4, n=9, floating_base=True), random_tree(5, n=7),
                  joint_tree(6, ["planar", "spherical", "helical", "revolute", "prismatic"])):
        pi = model.inertial_parameters().reshape(-1)
        q, qd, qdd = random_state(model, 7, batch=(3,))
        Y = sd.inverse_dynamics_regressor(model, q, qd, qdd, algebra=algebra)
        assert _rel(Y @ pi, sd.inverse_dynamics(model, q, qd, qdd)) < 1e-12
        pm = pinocchio_model(model)
        data = pm.createData()
        # a planar joint's body frame is Pinocchio's turned (pinocchio_reference.py): its
        # parameters, and so its columns, are in other axes; the others must match
        pin_pi = np.array([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])
        same = np.abs(pin_pi - pi.reshape(-1, 10)).max(axis=1) < 1e-12
        assert same.sum() >= model.nbodies - 1
        columns = np.repeat(same, 10)
        for k in range(3):
            Yp = pin.computeJointTorqueRegressor(pm, data, pinocchio_q(model, q[k]), qd[k], qdd[k])
            assert _rel(Y[k][:, columns], Yp[:, columns]) < 1e-9
            for i in np.flatnonzero(~same):  # the same torques from either frame's parameters
                body = slice(10 * i, 10 * i + 10)
                assert _rel(Y[k][:, body] @ pi[body], Yp[:, body] @ pin_pi[i]) < 1e-12


def test_regressor_of_a_tree_numbered_breadth_first():
    """Bodies numbered so that subtrees are not contiguous (parent before child, breadth
    first): the columns still land on their bodies."""
    model = random_tree(8, n=9)
    order = sorted(range(model.nbodies), key=lambda i: (len(model.ancestors[i]), i))
    new = {old: k for k, old in enumerate(order)}
    bodies = tuple(replace(model.bodies[old], parent=-1 if model.bodies[old].parent < 0
                           else new[model.bodies[old].parent]) for old in order)
    links = tuple(replace(l, body=l.body if l.body < 0 else new[l.body]) for l in model.links)
    shuffled = replace(model, bodies=bodies, links=links, _hash_cache=[])
    subtrees = [[j for j in range(shuffled.nbodies) if i in shuffled.ancestors[j]]
                for i in range(shuffled.nbodies)]
    assert any(s != list(range(s[0], s[0] + len(s))) for s in subtrees)  # really not contiguous
    q, qd, qdd = random_state(shuffled, 2, batch=(3,))
    pi = shuffled.inertial_parameters().reshape(-1)
    Y = sd.inverse_dynamics_regressor(shuffled, q, qd, qdd)
    assert _rel(Y @ pi, sd.inverse_dynamics(shuffled, q, qd, qdd)) < 1e-12
    Yj = jax.jit(lambda q: sd.inverse_dynamics_regressor(shuffled, q, qd, qdd))(jnp.asarray(q))
    assert _rel(Yj, Y) < 1e-13


def test_regressor_leaves_out_the_joints_own_forces(panda):
    """Armature, damping and Coulomb friction are not inertial parameters: ID = Y pi + them."""
    model = panda.with_joint_parameters(armature=0.3, damping=0.7, coulomb=0.2)
    q, qd, qdd = random_state(model, 9, batch=(3,))
    Y = sd.inverse_dynamics_regressor(model, q, qd, qdd)
    joint = 0.3 * qdd + 0.7 * qd + 0.2 * np.sign(qd)
    assert _rel(Y @ model.inertial_parameters().reshape(-1) + joint,
                sd.inverse_dynamics(model, q, qd, qdd)) < 1e-12


def test_regressor_of_a_coupled_model():
    """Mimic joints tied to their sources (the Panda's fingers): Y = G^T Y_tree, Y pi = ID."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        model = sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"), mimic="couple")
    assert model.coupled and model.nv < model.nbodies
    q, qd, qdd = random_state(model, 4, batch=(3,))
    Y = sd.inverse_dynamics_regressor(model, q, qd, qdd)
    assert Y.shape == (3, model.nv, 10 * model.nbodies)
    assert _rel(Y @ model.inertial_parameters().reshape(-1),
                sd.inverse_dynamics(model, q, qd, qdd)) < 1e-12


@pytest.mark.parametrize("robot", [ROBOTS[0], ROBOTS[2]], ids=IDS[0:3:2])
def test_with_inertial_parameters_round_trip(robot):
    """with_inertial_parameters(inertial_parameters()) reproduces the bodies and the dynamics
    to 1e-14 (relative) in every algebra."""
    model, _ = _load(*robot)
    again = model.with_inertial_parameters(model.inertial_parameters())
    for b, c in zip(model.bodies, again.bodies):
        assert abs(b.mass - c.mass) <= 1e-15 * b.mass
        assert np.max(np.abs(np.subtract(b.com, c.com))) < 1e-15
        assert np.max(np.abs(np.subtract(b.inertia, c.inertia))) < 1e-15
    q, qd, qdd = random_state(model, 11, batch=(3,))
    for algebra in ALGEBRAS:
        for f in (lambda m: sd.inverse_dynamics(m, q, qd, qdd, algebra=algebra),
                  lambda m: sd.forward_dynamics(m, q, qd, qdd, algebra=algebra),
                  lambda m: sd.mass_matrix(m, q, algebra=algebra)):
            assert _rel(f(again), f(model)) < 1e-14


def test_with_inertial_parameters_changes_the_dynamics(panda):
    """New parameters (each body 30% heavier, its centre of mass shifted and its inertia
    changed consistently) give the dynamics of a model built from those inertias; Y does not
    depend on them."""
    rng = np.random.default_rng(2)
    pi = panda.inertial_parameters()
    new = pi.copy()
    for i in range(panda.nbodies):  # scale and add a point mass: stays physical
        m, c = 0.5 + rng.uniform(), rng.normal(size=3) * 0.05
        S = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        I = S.T @ S * m
        new[i] = 1.3 * pi[i] + [m, *(m * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]]
    model = panda.with_inertial_parameters(new)
    assert _rel(model.inertial_parameters(), new) < 1e-14
    q, qd, qdd = random_state(panda, 12, batch=(3,))
    Y = sd.inverse_dynamics_regressor(panda, q, qd, qdd)
    assert _rel(Y @ new.reshape(-1), sd.inverse_dynamics(model, q, qd, qdd)) < 1e-12
    assert _rel(sd.inverse_dynamics_regressor(model, q, qd, qdd), Y) < 1e-15
    # against Pinocchio with the same parameters set from its side
    pm = _load(*ROBOTS[0])[1]
    for j in range(1, pm.njoints):
        pm.inertias[j] = pin.Inertia.FromDynamicParameters(new[j - 1])
    data = pm.createData()
    for k in range(3):
        pq = pin_configuration(panda, pm, q[k])
        assert _rel(sd.inverse_dynamics(model, q[k], qd[k], qdd[k]),
                    pin.rnea(pm, data, pq, qd[k], qdd[k])) < 1e-12
        assert _rel(sd.mass_matrix(model, q[k]), _symmetric(pin.crba(pm, data, pq))) < 1e-12


def _symmetric(M):
    return np.triu(M) + np.triu(M, 1).T


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_grad_with_respect_to_parameters(panda, algebra):
    """ID is linear in pi: its Jacobian with respect to pi is Y (1e-12), and the gradient of a
    least-squares loss is 2 Y^T (Y pi - tau) (1e-12) and central differences (1e-7); the same
    under jit."""
    pi = panda.inertial_parameters()
    q, qd, qdd = random_state(panda, 13)
    Y = sd.inverse_dynamics_regressor(panda, q, qd, qdd)
    measured = Y @ pi.reshape(-1) + np.random.default_rng(1).normal(size=panda.nv)

    def torque(p):  # (central differences below step off the physical set: check=False)
        return sd.inverse_dynamics(panda.with_inertial_parameters(p, check=False), q, qd, qdd,
                                   algebra=algebra)

    def loss(p):
        r = torque(p) - measured
        return (r * r).sum()

    J = jax.jacfwd(torque)(jnp.asarray(pi))
    assert _rel(np.asarray(J).reshape(panda.nv, -1), Y) < 1e-12
    grad = (jax.jit(jax.grad(loss)) if algebra == "spatial" else jax.grad(loss))(jnp.asarray(pi))
    analytic = (2 * Y.T @ (Y @ pi.reshape(-1) - measured)).reshape(pi.shape)
    assert _rel(grad, analytic) < 1e-12
    p0 = np.asarray(pi, dtype=float)
    for i, k in [(1, 0), (3, 2), (6, 5), (8, 9)]:
        h = 1e-3  # the loss is quadratic in pi: central differences are exact but for rounding
        e = np.zeros_like(p0)
        e[i, k] = h
        fd = (float(loss(jnp.asarray(p0 + e))) - float(loss(jnp.asarray(p0 - e)))) / (2 * h)
        assert abs(grad[i, k] - fd) < 1e-7 * max(1.0, abs(fd))


@pytest.mark.parametrize("algebra", ALGEBRAS)
@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_grad_through_forward_dynamics_mass_matrix_and_energies(algebra):
    """jax.grad with respect to pi through FD, M, bias forces, kinetic and potential energy and
    the centre of mass equals central differences of the same functions on models with the
    parameters set concretely (1e-6 relative); the traced model's values equal the eager ones
    (1e-12). On a floating-base tree of 5 bodies (a Panda's jit(grad(FD)) takes minutes to
    compile today: issue 19's compile-time items)."""
    model = random_tree(31, n=4, floating_base=True)
    pi = model.inertial_parameters()
    q, qd, tau = random_state(model, 14)
    weights = np.random.default_rng(3).normal(size=(model.nv, model.nv))
    functions = {
        "forward_dynamics": lambda m: sd.forward_dynamics(m, q, qd, tau, algebra=algebra)
        @ weights[0],
        "mass_matrix": lambda m: (sd.mass_matrix(m, q, algebra=algebra) * weights).sum(),
        "kinetic_energy": lambda m: sd.kinetic_energy(m, q, qd, algebra=algebra),
        "potential_energy": lambda m: sd.potential_energy(m, q, algebra=algebra),
        "center_of_mass": lambda m: sd.center_of_mass(m, q) @ weights[1, :3],
        "bias_forces": lambda m: sd.bias_forces(m, q, qd, algebra=algebra) @ weights[2],
    }
    rng = np.random.default_rng(4)
    for name, f in functions.items():
        traced = lambda p: f(model.with_inertial_parameters(p))  # noqa: E731
        value, grad = jax.value_and_grad(traced)(jnp.asarray(pi))  # pi traced: JVP tracers
        assert abs(float(value) - float(f(model))) < 1e-12 * max(1.0, abs(float(f(model)))), name
        grad = np.asarray(grad)
        for _ in range(3):
            direction = rng.normal(size=pi.shape) * np.abs(pi) * 1e-6
            fd = (float(f(model.with_inertial_parameters(pi + direction, check=False)))
                  - float(f(model.with_inertial_parameters(pi - direction, check=False)))) / 2
            assert abs((grad * direction).sum() - fd) < 1e-6 * max(np.abs(grad * direction).sum(),
                                                                    1e-12), name


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_regressor_under_jit_and_vmap_equals_numpy(panda, algebra):
    """The Panda in the spatial algebra, a floating-base tree of 5 bodies in the others (XLA's
    compile time of the Panda's CGA and DQ programs is issue 19's other items)."""
    model = panda if algebra == "spatial" else random_tree(32, n=4, floating_base=True)
    q, qd, qdd = random_state(model, 15, batch=(5,))
    Y = sd.inverse_dynamics_regressor(model, q, qd, qdd, algebra=algebra)
    for _ in range(1):
        f = jax.jit(lambda q, qd, qdd: sd.inverse_dynamics_regressor(model, q, qd, qdd,
                                                                      algebra=algebra))
        assert _rel(f(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)), Y) < 1e-12
        v = jax.jit(jax.vmap(f))(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd))
        assert _rel(v, Y) < 1e-12


def test_vmap_over_parameters(panda):
    """A batch of parameter sets under vmap: each equals its concrete model."""
    pi = panda.inertial_parameters()
    scales = np.array([0.8, 1.0, 1.25])
    q, qd, qdd = random_state(panda, 16)
    out = jax.vmap(lambda s: sd.inverse_dynamics(panda.with_inertial_parameters(s * pi), q, qd,
                                                 qdd))(jnp.asarray(scales))
    for s, t in zip(scales, np.asarray(out)):
        assert _rel(t, sd.inverse_dynamics(panda.with_inertial_parameters(s * pi), q, qd, qdd)) \
            < 1e-12


# -- bad input ---------------------------------------------------------------------------------
def test_wrong_shape_names_the_expected_shape(panda):
    for bad in (np.zeros((panda.nbodies, 9)), np.zeros(10 * panda.nbodies),
                np.zeros((panda.nbodies + 1, 10))):
        with pytest.raises(ValueError, match=r"\(bodies, 10\) = \(9, 10\)"):
            panda.with_inertial_parameters(bad)
    with pytest.raises(ValueError, match=r"\(bodies, 10\)"):
        jax.jit(lambda p: sd.inverse_dynamics(panda.with_inertial_parameters(p), panda.neutral,
                                              np.zeros(9), np.zeros(9)))(jnp.zeros((9, 9)))
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 9\)"):
        sd.inverse_dynamics_regressor(panda, np.zeros(8), np.zeros(9), np.zeros(9))
    with pytest.raises(ValueError, match="algebra='vector'"):
        sd.inverse_dynamics_regressor(panda, panda.neutral, np.zeros(9), np.zeros(9),
                                      algebra="vector")
    with pytest.raises(ValueError, match="finite"):
        panda.with_inertial_parameters(np.full((9, 10), np.nan))


def test_dh_models_drop_their_table():
    """A DH model with new parameters has no DH table (it holds the old inertias): the DH
    recursion refuses it instead of using them; the spatial recursion uses the new ones."""
    puma = sd.robots.load("puma560")
    q, qd, qdd = random_state(puma, 18)
    # (Corke's Puma gives link 1 no mass but a moment of inertia: not physical, check=False)
    heavier = puma.with_inertial_parameters(2 * puma.inertial_parameters(), check=False)
    with pytest.raises(ValueError, match="from_dh"):
        sd.inverse_dynamics(heavier, q, qd, qdd, algebra="vector")
    rigid = sd.inverse_dynamics_regressor(puma, q, qd, qdd) @ puma.inertial_parameters().reshape(-1)
    joint = sd.inverse_dynamics(puma, q, qd, qdd) - rigid  # the drives' own forces
    assert _rel(sd.inverse_dynamics(heavier, q, qd, qdd), 2 * rigid + joint) < 1e-12
    assert _rel(sd.inverse_dynamics(puma, q, qd, qdd, algebra="vector"),
                sd.inverse_dynamics(puma, q, qd, qdd)) < 1e-12
    with pytest.raises(ValueError, match="DH table"):
        jax.jit(lambda p: sd.inverse_dynamics(puma.with_inertial_parameters(p), q, qd, qdd,
                                              algebra="vector"))(jnp.asarray(
                                                  puma.inertial_parameters()))


def _violations(panda):
    pi = panda.inertial_parameters()
    negative = pi.copy()
    negative[3] *= -1  # negative mass (and inertia)
    triangle = pi.copy()
    # principal moments about the centre of mass (1, 1, 3) break Ixx + Iyy >= Izz
    m, c = pi[5, 0], pi[5, 1:4] / pi[5, 0]
    S = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    I = np.diag([0.01, 0.01, 0.03]) + m * S.T @ S
    triangle[5, 4:] = [I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]]
    massless = pi.copy()
    massless[2, 0] = 0.0  # a first moment without mass
    assert np.abs(massless[2, 1:4]).max() > 1e-3
    return {"negative mass": (negative, 3), "triangle inequality": (triangle, 5),
            "first moment m\\*c without mass": (massless, 2)}


def test_physically_invalid_parameters_raise(panda):
    for what, (pi, body) in _violations(panda).items():
        with pytest.raises(ValueError, match=f"body {body} .*{what}"):
            panda.with_inertial_parameters(pi)
        panda.with_inertial_parameters(pi, check=False)  # accepted on request


def test_check_inertial_parameters_under_tracing(panda):
    """The documented check runs traced: valid for the file's parameters, and flags exactly
    the body that violates (negative mass, triangle inequality, moment without mass)."""
    check = jax.jit(lambda p: sd.check_inertial_parameters(p))
    valid, smallest = check(jnp.asarray(panda.inertial_parameters()))
    assert np.all(np.asarray(valid)) and np.asarray(valid).shape == (panda.nbodies,)
    for what, (pi, body) in _violations(panda).items():
        valid, smallest = check(jnp.asarray(pi))
        assert np.flatnonzero(~np.asarray(valid)).tolist() == [body], what
        assert float(smallest[body]) < 0
    # batched parameter sets: (..., bodies, 10)
    stack = np.stack([pi for pi, _ in _violations(panda).values()])
    valid, _ = sd.check_inertial_parameters(stack)
    assert np.asarray(valid).shape == (3, panda.nbodies)
    assert [np.flatnonzero(~v).tolist() for v in valid] == [[3], [5], [2]]


def test_traced_parameters_do_not_leak_into_caches(panda):
    """Two traced models never share cached inertias: the second call sees its own values."""
    q, qd, qdd = random_state(panda, 17)
    pi = panda.inertial_parameters()
    f = jax.jit(lambda p: sd.inverse_dynamics(panda.with_inertial_parameters(p), q, qd, qdd))
    a, b = f(jnp.asarray(pi)), f(jnp.asarray(2 * pi))
    assert _rel(b, 2 * np.asarray(a)) < 1e-12  # ID is linear in pi
    g = jax.jit(lambda p: sd.inverse_dynamics(panda.with_inertial_parameters(p), q, qd, qdd))
    assert _rel(g(jnp.asarray(3 * pi)), 3 * np.asarray(a)) < 1e-12
    assert panda.with_inertial_parameters(pi) == panda.with_inertial_parameters(pi)
