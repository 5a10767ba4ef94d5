"""JAX: every public function under jit, vmap and grad in every algebra; check_grads; derivatives
against finite differences and Pinocchio; the compiled path; the dtype policy."""
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import screwdyn as sd  # noqa: E402
from conftest import erd_urdf, random_state, random_tree  # noqa: E402
from screwdyn import _backend  # noqa: E402
from screwdyn.algebra import get_algebra  # noqa: E402
from screwdyn.compiled import compile as sd_compile  # noqa: E402
from screwdyn.compiled import compiler_options  # noqa: E402
from screwdyn.derivatives import dynamics_derivatives  # noqa: E402
from screwdyn.execution import plan  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _available(name):
    try:
        get_algebra(name)
        return True
    except ValueError:
        return False


ALGEBRAS = [a for a in ("spatial", "cga", "dq") if _available(a)]


def _public(model, algebra):
    """Every public function of (q, qd, qdd) that runs in ``algebra`` (all of them in spatial)."""
    calls = [
        lambda q, qd, qdd: sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra),
        lambda q, qd, qdd: sd.forward_dynamics(model, q, qd, qdd, algebra=algebra),
        lambda q, qd, qdd: sd.mass_matrix(model, q, algebra=algebra),
        lambda q, qd, qdd: sd.bias_forces(model, q, qd, algebra=algebra),
        lambda q, qd, qdd: sd.gravity_torques(model, q, algebra=algebra),
        lambda q, qd, qdd: sd.forward_kinematics(model, q, algebra=algebra),
        lambda q, qd, qdd: sd.jacobian(model, q, model.nlinks - 1, algebra=algebra),
    ]
    if algebra == "spatial":
        calls += [
            lambda q, qd, qdd: sd.coriolis_matrix(model, q, qd),
            lambda q, qd, qdd: sd.kinetic_energy(model, q, qd),
            lambda q, qd, qdd: sd.potential_energy(model, q),
            lambda q, qd, qdd: sd.center_of_mass(model, q),
            lambda q, qd, qdd: sd.jacobian(model, q, 1, frame="local"),
        ]
    return calls


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_public_functions_under_jit_and_vmap_equal_numpy(algebra):
    model = random_tree(21, n=3, floating_base=True)  # free, revolute, continuous, prismatic
    q, qd, qdd = random_state(model, 0, batch=(3,))
    calls = _public(model, algebra)
    expected = [f(q, qd, qdd) for f in calls]
    # all of them jit(vmap)-ed in one program (one compilation, with screwdyn's XLA options);
    # the Coriolis matrix (slow to compile) vmapped eagerly
    eager_only = {7} if algebra == "spatial" else set()
    jitted = [f for k, f in enumerate(calls) if k not in eager_only]
    outputs = iter(jax.jit(jax.vmap(lambda q, qd, qdd: tuple(f(q, qd, qdd) for f in jitted)),
                           compiler_options=compiler_options())(q, qd, qdd))
    compiled = [jax.vmap(f)(q, qd, qdd) if k in eager_only else next(outputs)
                for k, f in enumerate(calls)]
    for k, (want, got) in enumerate(zip(expected, compiled)):
        assert isinstance(got, jax.Array) and got.shape == want.shape, k
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10, err_msg=str(k))
    eager = sd.inverse_dynamics(model, jnp.asarray(q), qd, qdd, algebra=algebra)  # a JAX batch
    np.testing.assert_allclose(np.asarray(eager), expected[0], rtol=1e-10, atol=1e-10)


def test_jit_of_batched_calls_equals_numpy():
    model = random_tree(22, n=4)
    q, qd, qdd = random_state(model, 1, batch=(2, 3))
    batched = jax.jit(lambda q, qd, qdd: (sd.inverse_dynamics(model, q, qd, qdd),
                                          sd.forward_dynamics(model, q, qd, qdd),
                                          sd.mass_matrix(model, q)))(q, qd, qdd)
    expected = (sd.inverse_dynamics(model, q, qd, qdd), sd.forward_dynamics(model, q, qd, qdd),
                sd.mass_matrix(model, q))
    for got, want in zip(batched, expected):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10)


@pytest.fixture
def jax_numpy_path(monkeypatch):
    """JAX calls on jax.numpy (the path of accelerators), not as custom calls: for the tests of
    the programs that path gives XLA."""
    monkeypatch.setattr(plan.config, "custom_calls", False)


@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_programs_cut_per_body_for_large_trees_are_exact(jax_numpy_path, monkeypatch):
    """Trees above CHECKPOINT_BODIES compile with a cut per body (x / (exact 1)): same values,
    same gradients."""
    model = random_tree(31, n=4, floating_base=True)
    q, qd, qdd = random_state(model, 12, batch=(3,))

    def programs(q, qd, qdd):  # a new function each time: JAX caches traces per function
        return (sd.inverse_dynamics(model, q, qd, qdd), sd.forward_dynamics(model, q, qd, qdd),
                sd.mass_matrix(model, q))

    def divisions():
        return str(jax.make_jaxpr(lambda *a: programs(*a))(q, qd, qdd)).count(" div ")

    def grad(q):
        return jax.grad(lambda q: sd.forward_dynamics(model, q, qd[0], qdd[0]).sum())(q)

    uncut, expected_grad = divisions(), grad(jnp.asarray(q[0]))
    monkeypatch.setattr(plan, "CHECKPOINT_BODIES", 0)
    assert divisions() > uncut + 3 * model.nbodies  # the cuts are there
    cut = jax.jit(lambda *a: programs(*a), compiler_options=compiler_options())(q, qd, qdd)
    for got, want in zip(cut, programs(q, qd, qdd)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(grad(jnp.asarray(q[0]))), np.asarray(expected_grad),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("algebra", ["cga", "dq"])
@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_cut_programs_are_exact_in_every_algebra(jax_numpy_path, monkeypatch, algebra):
    """The per-body cuts of the entries mode (``EntriesMode.checkpoint``) serve CGA and dual
    quaternions too: the cut programs are there and give the uncut values."""
    model = random_tree(33, n=4, floating_base=True)
    q, qd, qdd = random_state(model, 13, batch=(3,))

    def programs(q, qd, qdd):
        return (sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra),
                sd.forward_dynamics(model, q, qd, qdd, algebra=algebra),
                sd.mass_matrix(model, q, algebra=algebra))

    def divisions():  # a new function each time: JAX caches traces per function
        return str(jax.make_jaxpr(lambda *a: programs(*a))(q, qd, qdd)).count(" div ")

    uncut = divisions()
    monkeypatch.setattr(plan, "CHECKPOINT_BODIES", 0)
    assert divisions() > uncut + 3 * model.nbodies
    cut = jax.jit(lambda *a: programs(*a), compiler_options=compiler_options())(q, qd, qdd)
    for got, want in zip(cut, programs(q, qd, qdd)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10)


@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_cuts_depend_on_the_backend_and_the_loop_not_on_the_batch(jax_numpy_path, monkeypatch):
    """On CPU each joint's sine and cosine are cut (computed once) in every batch, one state
    included, nothing else in a small tree; on a GPU the mass matrix's program is cut at every
    body (its nv^2 outputs would each recompute the composite inertias) and the sines and cosines
    are not; programs for loop bodies (simulation rollouts) are cut at every body. Values are
    unchanged, and the same in every bit for every batch size."""
    model = sd.robots.load("panda")
    q = np.stack([sd.random_configuration(model, s) for s in range(64)])
    ID, M = sd.dynamics.FUNCTIONS["inverse_dynamics"], sd.dynamics.FUNCTIONS["mass_matrix"]

    def divisions(function, *args):
        return str(jax.make_jaxpr(lambda *a: function(model, *a))(*args)).count(" div ")

    revolute = sum(isinstance(b.joint_model, sd.model.joints.Revolute) for b in model.bodies)
    assert all(b.joint_model.type_name in ("revolute", "continuous", "prismatic")
               for b in model.bodies)
    on_cpu = divisions(sd.mass_matrix, q), divisions(sd.inverse_dynamics, q, q, q)
    assert on_cpu[1] == 2 * revolute  # sin and cos of each angle, nothing per body
    for n in (1, 8, 63):  # the same program for every batch size
        assert divisions(sd.inverse_dynamics, q[:n], q[:n], q[:n]) == 2 * revolute
    tau = jax.jit(lambda q: sd.inverse_dynamics(model, q, q, q))(q)
    for n in (1, 8, 63):
        assert np.array_equal(np.asarray(jax.jit(lambda q: sd.inverse_dynamics(model, q, q, q))(
            q[:n])), np.asarray(tau)[:n])
    in_loop = str(jax.make_jaxpr(lambda q: plan.run_jax(ID, model, "spatial", {
        "q": q, "qd": q, "qdd": q}, loop=True))(q[:1])).count(" div ")
    assert in_loop > 3 * model.nbodies
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert divisions(sd.inverse_dynamics, q, q, q) == 0
    assert divisions(sd.mass_matrix, q) > on_cpu[0] - 2 * revolute + 3 * model.nbodies
    for function, args in ((sd.mass_matrix, (q,)), (sd.inverse_dynamics, (q, q, q))):
        np.testing.assert_allclose(np.asarray(jax.jit(lambda *a: function(model, *a))(*args)),
                                   function(model, *args), rtol=1e-12, atol=1e-12)
    assert not plan.jax_options(M, model, "cpu")["checkpoints"]
    assert plan.jax_options(M, model, "gpu")["checkpoints"]


def test_cuts_keep_inf_and_nan():
    """A cut divides by an exact 1 that XLA cannot see: inf stays inf, NaN stays NaN (a cut
    x / (x * 0 + 1) would turn inf into NaN)."""
    from screwdyn.algebra.entries import cut

    x = jnp.array([1.5, -np.inf, np.inf, np.nan, 0.0, -0.0])
    y = np.asarray(jax.jit(cut)(x))
    assert np.array_equal(y, np.asarray(x), equal_nan=True)
    assert np.array_equal(np.signbit(y), np.signbit(np.asarray(x)))
    assert float(jax.grad(lambda x: cut(x) * 3.0)(2.0)) == 3.0


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_check_grads_of_inverse_and_forward_dynamics(algebra):
    model = random_tree(23, n=3)
    q, qd, qdd = random_state(model, 2)
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    check_grads(lambda q, qd, qdd: sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra),
                (q, qd, qdd), order=1, modes=("fwd", "rev"))
    check_grads(lambda q, qd, tau: sd.forward_dynamics(model, q, qd, tau, algebra=algebra),
                (q, qd, tau), order=1, modes=("fwd", "rev"))
    # jax.grad of a scalar through the mass matrix: d/dq (qd' M(q) qd) = 2 dT/dq
    grad_M = jax.grad(lambda q: qd @ sd.mass_matrix(model, q, algebra=algebra) @ qd)(jnp.asarray(q))
    grad_T = jax.grad(lambda q: sd.kinetic_energy(model, q, qd))(jnp.asarray(q))
    np.testing.assert_allclose(np.asarray(grad_M), 2 * np.asarray(grad_T), rtol=1e-9, atol=1e-9)


def test_gradients_carry_physics():
    """dT/dqd = M qd, and the gravity torques are dV/dq (through jax.grad, batched by vmap)."""
    model = random_tree(24, n=4)
    q, qd, _ = random_state(model, 3, batch=(4,))
    dT = jax.vmap(jax.grad(lambda q, qd: sd.kinetic_energy(model, q, qd), argnums=1))(q, qd)
    Mqd = np.einsum("nij,nj->ni", sd.mass_matrix(model, q), qd)
    np.testing.assert_allclose(np.asarray(dT), Mqd, rtol=1e-10, atol=1e-10)
    dV = jax.vmap(jax.grad(lambda q: sd.potential_energy(model, q)))(q)
    np.testing.assert_allclose(np.asarray(dV), sd.gravity_torques(model, q), rtol=1e-10, atol=1e-10)


# -- derivatives --------------------------------------------------------------------------------
def _central_differences(f, args, k, h=1e-6):
    """d f / d args[k] by central differences, columns stacked last."""
    x = np.asarray(args[k], dtype=float)
    columns = []
    for j in range(x.shape[-1]):
        step = np.zeros_like(x)
        step[..., j] = h
        plus = list(args)
        minus = list(args)
        plus[k], minus[k] = x + step, x - step
        columns.append((f(*plus) - f(*minus)) / (2 * h))
    return np.stack(columns, axis=-1)


def test_derivatives_match_finite_differences():
    model = random_tree(25, n=6)  # revolute, continuous, prismatic and fixed joints
    q, qd, qdd = random_state(model, 4, batch=(2,))
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    for kind, u, f in (("inverse", qdd, sd.inverse_dynamics),
                       ("forward", tau, sd.forward_dynamics)):
        d = (dynamics_derivatives(model, q, qd, qdd=u) if kind == "inverse"
             else dynamics_derivatives(model, q, qd, tau=u))
        fn = lambda q, qd, u: f(model, q, qd, u)  # noqa: E731
        for k, got in enumerate(d):
            assert isinstance(got, np.ndarray) and got.shape == (2, model.nv, model.nv)
            np.testing.assert_allclose(got, _central_differences(fn, (q, qd, u), k),
                                       rtol=1e-6, atol=1e-6, err_msg=f"{kind} {k}")
    d = dynamics_derivatives(model, q, qd, qdd=qdd)
    np.testing.assert_allclose(d.du, sd.mass_matrix(model, q), rtol=1e-12, atol=1e-12)
    d = dynamics_derivatives(model, q, qd, tau=tau)
    np.testing.assert_allclose(d.du, np.linalg.inv(sd.mass_matrix(model, q)), rtol=1e-9,
                               atol=1e-9)


@pytest.mark.parametrize("urdf", ["panda_description/urdf/panda.urdf",
                                  "ur_description/urdf/ur5_robot.urdf"])
def test_derivatives_match_pinocchio(urdf):
    pin = pytest.importorskip("pinocchio")
    path = erd_urdf(urdf)
    model = sd.load_urdf(path)
    pm = pin.buildModelFromUrdf(path)
    pd = pm.createData()
    assert list(model.joint_names) == [pm.names[i] for i in range(1, pm.njoints)]
    assert pm.nq == model.nq  # no continuous joints: Pinocchio's q is screwdyn's q
    q, qd, qdd = random_state(model, 5, batch=(3,))
    rnea = dynamics_derivatives(model, q, qd, qdd=qdd)
    abad = dynamics_derivatives(model, q, qd, tau=qdd)
    for i in range(3):
        pin.computeRNEADerivatives(pm, pd, q[i], qd[i], qdd[i])
        M = np.triu(pd.M) + np.triu(pd.M, 1).T
        for got, want in zip(rnea, (pd.dtau_dq, pd.dtau_dv, M)):
            np.testing.assert_allclose(got[i], want, rtol=1e-9, atol=1e-9)
        pin.computeABADerivatives(pm, pd, q[i], qd[i], qdd[i])
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        for got, want in zip(abad, (pd.ddq_dq, pd.ddq_dv, Minv)):
            scale = 1 + np.abs(want).max()
            np.testing.assert_allclose(got[i], want, rtol=1e-8, atol=1e-8 * scale)


def test_derivatives_are_batched_and_traceable():
    model = random_tree(26, n=2, floating_base=True)
    q, qd, qdd = random_state(model, 6, batch=(2, 3))
    d = dynamics_derivatives(model, jnp.asarray(q), qd, qdd=qdd)
    assert all(isinstance(a, jax.Array) for a in d)
    assert d.dq.shape == (2, 3, model.nv, model.nv) and d.du.shape == (2, 3, model.nv, model.nv)
    jitted = jax.jit(lambda q: dynamics_derivatives(model, q, qd, qdd=qdd).dqd)(q)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(d.dqd), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="exactly one of qdd"):
        dynamics_derivatives(model, q, qd)
    with pytest.raises(ValueError, match="exactly one of qdd"):
        dynamics_derivatives(model, q, qd, qdd, tau=qdd)


# -- the compiled path ----------------------------------------------------------------------------
def test_compiled_single_state_and_batches():
    model = random_tree(27, n=4)
    q, qd, qdd = random_state(model, 7, batch=(4,))
    f = sd_compile(model, "inverse_dynamics", backend="jax")
    assert isinstance(f.compile_time, float) and f.compile_time > 0
    assert f.input_names == ("q", "qd", "qdd") and f.input_shapes == ((model.nq,), (model.nv,) * 1,
                                                                     (model.nv,))
    for i in range(4):
        got = f(q[i], qd[i], qdd[i])
        assert isinstance(got, jax.Array)
        np.testing.assert_allclose(np.asarray(got), sd.inverse_dynamics(model, q[i], qd[i], qdd[i]),
                                   rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(q[0]), qd[0], qdd[0])),
                               sd.inverse_dynamics(model, q[0], qd[0], qdd[0]), rtol=1e-12)
    fd = sd_compile(model, "forward_dynamics", numpy=True, gravity=(0.0, 1.0, -3.0),
                    backend="jax")
    out = fd(q[0], qd[0], qdd[0])
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, sd.forward_dynamics(model, q[0], qd[0], qdd[0],
                                                        gravity=(0.0, 1.0, -3.0)), rtol=1e-10)
    M = sd_compile(model, "mass_matrix", batch_shape=(4,), backend="jax")
    np.testing.assert_allclose(np.asarray(M(q)), sd.mass_matrix(model, q), rtol=1e-12, atol=1e-12)
    anyshape = sd_compile(model, "bias_forces", batch_shape=None, backend="jax")
    assert anyshape.compile_time is None
    for batch in ((2,), (3, 4)):
        qb, qdb, _ = random_state(model, 8, batch=batch)
        np.testing.assert_allclose(np.asarray(anyshape(qb, qdb)), sd.bias_forces(model, qb, qdb),
                                   rtol=1e-12, atol=1e-12)
    assert set(anyshape.compile_times) == {(2,), (3, 4)} and anyshape.compile_time > 0
    with pytest.raises(ValueError, match="compiled for inputs of shapes"):
        f(q, qd, qdd)  # a batch, for a single-state program
    q32 = q[0].astype(np.float32)  # numpy inputs are promoted to the program's float64
    np.testing.assert_allclose(np.asarray(f(q32, qd[0], qdd[0])),
                               sd.inverse_dynamics(model, q32.astype(float), qd[0], qdd[0]),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="and dtype float64"):  # JAX arrays must match
        f(jnp.asarray(q32), jnp.asarray(qd[0], jnp.float32), jnp.asarray(qdd[0], jnp.float32))
    with pytest.raises(TypeError, match="takes 3 arrays"):
        f(q[0], qd[0])
    with pytest.raises(ValueError, match="unknown function"):
        sd_compile(model, "inverse_dynamic", backend="jax")


@pytest.mark.parametrize("algebra", [a for a in ALGEBRAS if a != "spatial"])
def test_compiled_path_in_other_algebras(algebra):
    model = random_tree(28, n=3)
    q, qd, qdd = random_state(model, 9)
    f = sd_compile(model, "inverse_dynamics", algebra=algebra, backend="jax")
    np.testing.assert_allclose(np.asarray(f(q, qd, qdd)), sd.inverse_dynamics(model, q, qd, qdd),
                               rtol=1e-10, atol=1e-10)


# -- dtype policy and bad inputs ------------------------------------------------------------------
def test_dtype_policy_with_x64():
    model = random_tree(29, n=4)
    q, qd, qdd = random_state(model, 10, batch=(3,))
    q32, qd32, qdd32 = (jnp.asarray(a, dtype=jnp.float32) for a in (q, qd, qdd))
    tau = sd.inverse_dynamics(model, q32, qd32, qdd32)
    assert tau.dtype == jnp.float64  # float32 is promoted, as on numpy
    rounded = [np.asarray(a, dtype=np.float64) for a in (q32, qd32, qdd32)]
    np.testing.assert_allclose(np.asarray(tau), sd.inverse_dynamics(model, *rounded), rtol=1e-12,
                               atol=1e-12)
    mixed = sd.inverse_dynamics(model, q, jnp.asarray(qd), qdd)  # one JAX array: a JAX call
    assert isinstance(mixed, jax.Array)
    np.testing.assert_allclose(np.asarray(mixed), sd.inverse_dynamics(model, q, qd, qdd),
                               rtol=1e-12, atol=1e-12)
    ints = sd.mass_matrix(model, jnp.zeros(model.nq, dtype=jnp.int32))
    assert ints.dtype == jnp.float64
    with pytest.raises(ValueError, match="real numeric"):
        sd.inverse_dynamics(model, jnp.asarray(q) + 0j, qd, qdd)
    with pytest.raises(ValueError, match="batch shapes do not broadcast"):
        sd.forward_dynamics(model, jnp.asarray(q), qd[:2], qdd)


def test_float32_without_x64_warns_once(monkeypatch):
    model = random_tree(30, n=4)
    q, qd, qdd = random_state(model, 11, batch=(3,))
    expected = sd.inverse_dynamics(model, q, qd, qdd)
    monkeypatch.setattr(_backend, "_warned_float32", [])
    with jax.enable_x64(False):
        with pytest.warns(_backend.Float32Warning, match="float32"):
            tau = sd.inverse_dynamics(model, jnp.asarray(q), qd, qdd)
        assert tau.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(tau), expected, rtol=2e-4, atol=2e-4)
        with warnings.catch_warnings():
            warnings.simplefilter("error", _backend.Float32Warning)  # once only
            sd.forward_dynamics(model, jnp.asarray(q), qd, tau)
