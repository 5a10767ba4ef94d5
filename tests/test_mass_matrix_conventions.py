"""The mass matrix in its two conventions (``algorithms/crba.py``): body frames, one straight-line
program, for small trees; world-frame columns and one matrix product (the plan's ``Factored``
form) for large ones. Both against each other, Pinocchio and the identities, on every joint
type, algebra and path."""
import dataclasses

import numpy as np
import pytest

import screwdyn as sd
from conftest import joint_tree, pinocchio_model, pinocchio_q, random_tree
from screwdyn.algorithms import crba
from screwdyn.dynamics import FUNCTIONS, MASS_MATRIX_PAIRS
from screwdyn.execution import plan as _plan
from screwdyn.model import joints as J

FORM = FUNCTIONS["mass_matrix"].factored
EVERY_TYPE = ["planar", "spherical", "helical", "revolute", J.MuJoCoFree(), "prismatic",
              J.Spherical(scalar_first=True), "continuous", "planar", "helical"]


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - b), initial=0.0) / max(1.0, np.max(np.abs(b), initial=0))


@pytest.fixture
def factored_always(monkeypatch):
    """Every mass matrix in the factored form (the limit at 0), and the plan's callables made
    afresh before and after (they remember the form of each model)."""
    _plan._forget()
    monkeypatch.setattr(FORM, "limit", 0)
    yield
    monkeypatch.undo()
    _plan._forget()


def _local(model, q, algebra="spatial"):
    """M in body frames (the straight-line form), whatever the model's size."""
    limit, FORM.limit = FORM.limit, 10 ** 12
    _plan._forget()
    try:
        return sd.mass_matrix(model, q, algebra=algebra)
    finally:
        FORM.limit = limit
        _plan._forget()


def _branched_chain_urdf(branches, links):
    """A base with ``branches`` chains of ``links`` links each (revolute joints about z, y, x in
    turn, offset inertias): a large tree whose branches make zeros in M."""
    axes = ("0 0 1", "0 1 0", "1 0 0")
    parts = ['<robot name="branched">', '<link name="base"><inertial><mass value="2"/><inertia '
             'ixx="0.02" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>']
    for b in range(branches):
        parent = "base"
        for i in range(links):
            name = f"b{b}l{i}"
            parts.append(
                f'<link name="{name}"><inertial><origin xyz="0.05 0.01 0.1"/><mass value="1"/>'
                '<inertia ixx="0.02" iyy="0.025" izz="0.01" ixy="0.001" ixz="0" iyz="0"/>'
                f'</inertial></link><joint name="j{name}" type="revolute"><parent link="'
                f'{parent}"/><child link="{name}"/><origin xyz="{0.1 * b} 0 0.2" rpy="0 0 '
                f'{0.3 * b}"/><axis xyz="{axes[(i + b) % 3]}"/><limit lower="-3" upper="3" '
                'effort="1" velocity="1"/></joint>')
            parent = name
    parts.append("</robot>")
    return "".join(parts)


@pytest.mark.parametrize("seed, floating", [(0, True), (1, False)])
def test_the_conventions_agree_on_every_joint_type_and_algebra(seed, factored_always, floating):
    rng = np.random.default_rng(seed)
    bare = joint_tree(seed, EVERY_TYPE, floating_base=floating)
    model = dataclasses.replace(bare, _hash_cache=[], bodies=tuple(
        dataclasses.replace(b, armature=tuple(rng.uniform(0, 0.1, b.nv))) for b in bare.bodies))
    q = np.stack([sd.random_configuration(model, rng) for _ in range(3)])
    reference = _local(model, q)
    for algebra in ("spatial", "cga", "dq"):
        M = sd.mass_matrix(model, q, algebra=algebra)
        assert M.shape == (3, model.nv, model.nv)
        assert _rel(M, reference) < 1e-11, algebra
        assert _rel(M, _local(model, q, algebra)) < 1e-11, algebra
    assert np.array_equal(M, np.swapaxes(M, -1, -2))  # the same products in both halves
    diagonal = np.einsum("...ii->...i", M - _local(bare, q))
    assert _rel(diagonal, np.broadcast_to(model.armature, diagonal.shape)) < 1e-11


def test_the_factored_form_matches_pinocchio_with_exact_zeros_and_nan_per_state(
        factored_always):
    pin = pytest.importorskip("pinocchio")
    model = joint_tree(3, ["planar", "spherical", "helical", "revolute", "prismatic",
                           "continuous", "revolute", "spherical"], floating_base=True)
    pm = pinocchio_model(model)
    data = pm.createData()
    rng = np.random.default_rng(3)
    q = np.stack([sd.random_configuration(model, rng) for _ in range(4)])
    q[2, 5] = np.nan
    M = sd.mass_matrix(model, q)
    upper = crba.tree_pattern(model)[0]
    branches = ~(upper | upper.T)  # pairs of degrees of freedom on different branches
    assert branches.any()
    for k in (0, 1, 3):
        Mp = pin.crba(pm, data, pinocchio_q(model, q[k]))
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert _rel(M[k], Mp) < 1e-10
        assert (M[k][branches] == 0).all() and (Mp[branches] == 0).all()  # exact zeros
    assert np.isnan(M[2]).all()  # every entry, those the tree makes zero included


def test_a_large_branched_tree_is_factored_and_matches_pinocchio():
    """Four chains of 36 links on a floating base: more entries than ``MASS_MATRIX_PAIRS``, so
    the plan factors it by itself; M equals Pinocchio's, its branches' zeros included."""
    pin = pytest.importorskip("pinocchio")
    text = _branched_chain_urdf(4, 36)
    model = sd.load_urdf(text, floating_base=True)
    assert FORM.size(model) > MASS_MATRIX_PAIRS
    plan = sd.plan(model, "mass_matrix")
    assert plan.factored is FORM and plan.runs is FORM.columns and plan.path == "native"
    assert "factored" in plan.explain()
    pm = pin.buildModelFromXML(text, pin.JointModelFreeFlyer())
    data = pm.createData()
    rng = np.random.default_rng(0)
    q = np.stack([sd.random_configuration(model, rng) for _ in range(2)])
    M = sd.mass_matrix(model, q.reshape(2, 1, -1))
    assert M.shape == (2, 1, model.nv, model.nv)
    upper = crba.tree_pattern(model)[0]
    branches = ~(upper | upper.T)
    assert branches.sum() == 4 * 3 * 36 ** 2  # pairs of joints on different chains
    for k in range(2):
        Mp = pin.crba(pm, data, pinocchio_q(model, q[k]))
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert _rel(M[k, 0], Mp) < 1e-10
        assert (M[k, 0][branches] == 0).all() and (Mp[branches] == 0).all()
    assert sd.mass_matrix(model, q[:0]).shape == (0, model.nv, model.nv)
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., %d\)" % model.nq):
        sd.mass_matrix(model, q[:, :5])
    previous = sd.execution.use_native(False)
    try:  # the numpy path runs the same form
        assert _rel(sd.mass_matrix(model, q), M[:, 0]) < 1e-12
    finally:
        sd.execution.use_native(previous)


def test_compiled_in_the_factored_form(factored_always):
    """``sd.compile``: the columns program with its optimised code, then the product."""
    model = random_tree(5, n=7, floating_base=True)
    rng = np.random.default_rng(5)
    q = np.stack([sd.random_configuration(model, rng) for _ in range(3)])
    compiled = sd.compile(model, "mass_matrix")
    assert compiled.output_shape == (model.nv, model.nv)
    assert compiled.program.output_shape == (2, 6, model.nv)
    assert np.array_equal(compiled(q), sd.mass_matrix(model, q))
    assert np.array_equal(compiled(q[1]), sd.mass_matrix(model, q)[1])
    assert _rel(compiled(q), _local(model, q)) < 1e-12
    with pytest.raises(TypeError, match="mass_matrix takes 1 arrays"):
        compiled(q, q)


def test_a_coupled_model_in_the_factored_form(factored_always):
    """Mimic joints tied to their sources: G^T M G after the product, as Pinocchio's
    JointModelMimic model."""
    pin = pytest.importorskip("pinocchio")
    from test_joints import MIMIC

    coupled = sd.load_urdf(MIMIC, mimic="couple", joint_order="name")
    pm = pin.buildModelFromXML(MIMIC, mimic=True)
    data = pm.createData()
    q = np.random.default_rng(0).uniform(-1, 1, (3, 2))
    M = sd.mass_matrix(coupled, q)
    for k in range(3):
        Mp = pin.crba(pm, data, q[k])
        assert _rel(M[k], np.triu(Mp) + np.triu(Mp, 1).T) < 1e-10
    assert _rel(M, _local(coupled, q)) < 1e-12


def test_the_factored_form_under_jax(factored_always):
    """jit, vmap and grad: the custom call of the columns program and the product in XLA, against
    the jax.numpy path."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    model = random_tree(4, n=6, floating_base=True)
    rng = np.random.default_rng(4)
    q = np.stack([sd.random_configuration(model, rng) for _ in range(3)])
    reference = _local(model, q)
    jitted = jax.jit(lambda q: sd.mass_matrix(model, q))
    assert _rel(np.asarray(jitted(jnp.asarray(q))), reference) < 1e-12
    mapped = jax.jit(jax.vmap(lambda q: sd.mass_matrix(model, q)))
    assert _rel(np.asarray(mapped(jnp.asarray(q))), reference) < 1e-12
    weights = rng.normal(size=(model.nv, model.nv))

    def loss(q):
        return (sd.mass_matrix(model, q) * weights).sum()

    gradient = jax.grad(loss)(jnp.asarray(q[0]))
    previous = sd.execution.use_custom_calls(False)
    try:
        expected = jax.grad(loss)(jnp.asarray(q[0]))
    finally:
        sd.execution.use_custom_calls(previous)
    assert _rel(np.asarray(gradient), np.asarray(expected)) < 1e-9
    pi = jnp.asarray(model.inertial_parameters())

    def by_parameters(pi):  # traced inertial parameters: the columns read them
        return (sd.mass_matrix(model.with_inertial_parameters(pi, check=False), q[0])
                * weights).sum()

    gradient = jax.grad(by_parameters)(pi)
    previous = sd.execution.use_custom_calls(False)
    try:
        expected = jax.grad(by_parameters)(pi)
    finally:
        sd.execution.use_custom_calls(previous)
    assert _rel(np.asarray(gradient), np.asarray(expected)) < 1e-9


@pytest.mark.slow
def test_a_1000_link_chain_obeys_the_identities():
    """The chain of the reliability issue: M SPD, M qdd = ID(q, 0, qdd) - ID(q, 0, 0), and
    qd^T M qd / 2 the kinetic energy (RNEA and the energy on the numpy path: other code)."""
    import sys
    import os

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from run import chain_urdf

    model = sd.load_urdf(chain_urdf(1000))
    assert FORM.applies(model, "spatial")
    rng = np.random.default_rng(1)
    q, qd, qdd = rng.uniform(-1, 1, (3, model.nv))
    M = sd.mass_matrix(model, q)
    np.linalg.cholesky(M)
    assert np.array_equal(M, M.T)
    previous = sd.execution.use_native(False)
    try:
        tau = sd.inverse_dynamics(model, q, 0 * qd, qdd) - sd.inverse_dynamics(model, q, 0 * qd,
                                                                              0 * qdd)
        energy = sd.kinetic_energy(model, q, qd)
    finally:
        sd.execution.use_native(previous)
    assert _rel(M @ qdd, tau) < 1e-10
    assert abs(qd @ M @ qd / 2 - energy) < 1e-10 * energy
