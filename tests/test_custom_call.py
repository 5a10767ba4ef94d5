"""The JAX path on the CPU: the native programs as XLA custom calls (``execution.custom_call``),
under jit, vmap, grad, jacfwd, jacrev and hessian, against the eager numpy results, finite
differences, Pinocchio's derivatives and the jax.numpy path; one program whatever the batch
size or the file's digits; no recompilation on repeated calls."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import screwdyn as sd  # noqa: E402
from conftest import erd_urdf, random_state, random_tree  # noqa: E402
from screwdyn.execution import custom_call, plan  # noqa: E402

pytestmark = pytest.mark.skipif(not custom_call.available(), reason="no XLA custom calls here")

ALGEBRAS = ("spatial", "cga", "dq")


def panda_files(tmp_path):
    """example-robot-data's Panda, and the same file with its rpy written with 11 digits (as
    many real files are: rotations not exactly axis-aligned)."""
    path = erd_urdf("panda_description/urdf/panda.urdf")
    with open(path) as f:
        text = f.read()
    digits = re.sub(r'rpy="([^"]*)"', lambda m: 'rpy="%s"' % " ".join(
        "%.11g" % float(x) for x in m.group(1).split()), text)
    assert digits != text and "1.5707963268" in digits
    other = tmp_path / "panda_11_digits.urdf"
    other.write_text(digits)
    return sd.load_urdf(path), sd.load_urdf(str(other))


def custom_calls_in(f, *args):
    """The number of custom calls and of all operations in the HLO JAX lowers ``f`` to."""
    text = jax.jit(f).lower(*args).as_text()
    return text.count("custom_call"), len(re.findall(r"^\s+%\S+ = ", text, re.M)) or \
        text.count(" = ")


def test_the_plan_says_custom_call_on_the_cpu():
    panda = sd.robots.load("panda")
    p = sd.plan(panda, "forward_dynamics", inputs="jax")
    assert p.path == "custom_call", p.explain()
    previous = plan.use_custom_calls(False)
    try:
        assert sd.plan(panda, "forward_dynamics", inputs="jax").path == "jax"
    finally:
        plan.use_custom_calls(previous)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_jit_vmap_and_eager_equal_numpy(algebra):
    model = random_tree(3, n=6, floating_base=True)
    q, qd, qdd = random_state(model, 5, batch=(7,))
    tau = sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra)
    calls = {
        "ID": (lambda q, qd, u: sd.inverse_dynamics(model, q, qd, u, algebra=algebra), tau),
        "FD": (lambda q, qd, u: sd.forward_dynamics(model, q, qd, u, algebra=algebra), qdd),
        "M": (lambda q, qd, u: sd.mass_matrix(model, q, algebra=algebra),
              sd.mass_matrix(model, q, algebra=algebra)),
        "b": (lambda q, qd, u: sd.bias_forces(model, q, qd, algebra=algebra),
              sd.bias_forces(model, q, qd, algebra=algebra)),
    }
    for name, (f, expected) in calls.items():
        u = tau if name == "FD" else qdd
        args = [jnp.asarray(a) for a in (q, qd, u)]
        assert np.max(np.abs(np.asarray(f(*args)) - expected)) < 1e-12, name
        assert np.max(np.abs(np.asarray(jax.jit(f)(*args)) - expected)) < 1e-12, name
        per_state = jax.jit(jax.vmap(f))(*args)
        assert np.max(np.abs(np.asarray(per_state) - expected)) < 1e-12, name
        # vmap over one argument only, the others closed over or broadcast (in_axes None)
        one = jax.vmap(f, in_axes=(0, None, None))(args[0], args[1][0], args[2][0])
        expected_one = np.stack([np.asarray(f(*(jnp.asarray(a) for a in (q[i], qd[0], u[0]))))
                                 for i in range(len(q))])
        assert np.max(np.abs(np.asarray(one) - expected_one)) < 1e-12, name
        # nested vmap
        nested = jax.vmap(jax.vmap(f))(*(a.reshape((7, 1) + a.shape[1:]) for a in args))
        assert np.max(np.abs(np.asarray(nested)[:, 0] - expected)) < 1e-12, name


@pytest.mark.parametrize("algebra", ALGEBRAS)
@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_derivatives_of_every_order_equal_the_jax_numpy_path(algebra):
    model = random_tree(8, n=5)
    q, qd, qdd = (jnp.asarray(a) for a in random_state(model, 2))
    tau = jnp.asarray(sd.inverse_dynamics(model, q, qd, qdd))

    def fd(q, qd):
        return sd.forward_dynamics(model, q, qd, tau, algebra=algebra)

    def loss(q, qd):
        return jnp.sum(fd(q, qd) ** 2) + sd.kinetic_energy(model, q, qd)

    got = {"jacfwd": jax.jacfwd(fd)(q, qd), "jacrev": jax.jacrev(fd, argnums=(0, 1))(q, qd),
           "grad": jax.jit(jax.grad(loss, argnums=(0, 1)))(q, qd),
           "hessian": jax.hessian(loss)(q, qd)}
    previous = plan.use_custom_calls(False)
    try:
        want = {"jacfwd": jax.jacfwd(fd)(q, qd), "jacrev": jax.jacrev(fd, argnums=(0, 1))(q, qd),
                "grad": jax.grad(loss, argnums=(0, 1))(q, qd), "hessian": jax.hessian(loss)(q, qd)}
    finally:
        plan.use_custom_calls(previous)
    for name in got:
        leaves = jax.tree_util.tree_leaves
        for g, w in zip(leaves(got[name]), leaves(want[name])):
            scale = max(1.0, float(np.max(np.abs(w))))
            assert np.max(np.abs(np.asarray(g) - np.asarray(w))) < 1e-10 * scale, name


def test_derivatives_equal_pinocchio():
    pin = pytest.importorskip("pinocchio")
    path = erd_urdf("panda_description/urdf/panda.urdf")
    model = sd.load_urdf(path, joint_order="name")
    pm = pin.buildModelFromUrdf(path)
    data = pm.createData()
    rng = np.random.default_rng(4)
    q = sd.random_configuration(model, rng)
    qd, qdd = rng.normal(size=model.nv), rng.normal(size=model.nv)
    pin.computeRNEADerivatives(pm, data, q, qd, qdd)
    d_dq, d_dv = np.array(data.dtau_dq), np.array(data.dtau_dv)
    J = jax.jit(jax.jacrev(lambda q, qd: sd.inverse_dynamics(model, q, qd, jnp.asarray(qdd)),
                           argnums=(0, 1)))(jnp.asarray(q), jnp.asarray(qd))
    assert np.max(np.abs(np.asarray(J[0]) - d_dq)) < 1e-9
    assert np.max(np.abs(np.asarray(J[1]) - d_dv)) < 1e-9
    tau = np.array(pin.rnea(pm, data, q, qd, qdd))
    pin.computeABADerivatives(pm, data, q, qd, tau)
    A = jax.jacfwd(lambda q: sd.forward_dynamics(model, q, jnp.asarray(qd), jnp.asarray(tau)))(
        jnp.asarray(q))
    assert np.max(np.abs(np.asarray(A) - np.array(data.ddq_dq))) < 1e-9


def test_one_program_for_every_batch_size_and_both_panda_files(tmp_path):
    """The lowered program is the same few operations for one state and for 100,000, and for
    the file with exact and with 11-digit rotations; its values equal numpy's."""
    exact, digits = panda_files(tmp_path)
    sizes = []
    for model in (exact, digits):
        qd, tau = jnp.ones(model.nv), jnp.zeros(model.nv)
        for n in (None, 1000, 100_000):
            q = jnp.zeros(model.nq) if n is None else jnp.zeros((n, model.nq))
            sizes.append(custom_calls_in(lambda q: sd.forward_dynamics(model, q, qd, tau), q))
        Q = np.stack([sd.random_configuration(model, s) for s in range(50)])
        got = jax.jit(jax.vmap(lambda q: sd.forward_dynamics(model, q, qd, tau)))(jnp.asarray(Q))
        assert np.max(np.abs(np.asarray(got) - sd.forward_dynamics(model, Q, np.ones(model.nv),
                                                                   np.zeros(model.nv)))) < 1e-12
    assert all(calls == 1 for calls, _ in sizes), sizes
    assert max(ops for _, ops in sizes) < 20, sizes  # a few broadcasts and reshapes around it
    difference = sd.mass_matrix(exact, np.zeros(9)) - sd.mass_matrix(digits, np.zeros(9))
    assert 0 < np.max(np.abs(difference)) < 1e-9  # the same robot to the file's digits, unrounded


def test_repeated_calls_do_not_recompile():
    model = sd.robots.load("panda")
    f = jax.jit(lambda q, qd, tau: sd.forward_dynamics(model, q, qd, tau))
    g = jax.jit(jax.grad(lambda q, qd: sd.kinetic_energy(model, q, qd)))
    rng = np.random.default_rng(0)
    f(*(jnp.asarray(rng.normal(size=9)) for _ in range(3)))
    g(*(jnp.asarray(rng.normal(size=9)) for _ in range(2)))
    with jax.log_compiles():
        import logging

        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logger = logging.getLogger("jax")
        logger.addHandler(handler)
        try:
            for _ in range(5):
                f(*(jnp.asarray(rng.normal(size=9)) for _ in range(3)))
                g(*(jnp.asarray(rng.normal(size=9)) for _ in range(2)))
        finally:
            logger.removeHandler(handler)
    compiles = [r for r in records if "Compiling" in r.getMessage()]
    assert compiles == [], [r.getMessage() for r in compiles]


def test_the_model_as_an_argument_static_or_closed_over():
    panda, ur5 = sd.robots.load("panda"), sd.load_urdf(sd.robots.path("ur5"))
    f = jax.jit(sd.inverse_dynamics, static_argnums=0)
    for model in (panda, ur5, panda):
        q, qd, qdd = (jnp.asarray(a) for a in random_state(model, 1))
        assert np.max(np.abs(np.asarray(f(model, q, qd, qdd)) - sd.inverse_dynamics(
            model, *(np.asarray(a) for a in (q, qd, qdd))))) < 1e-12
    assert f._cache_size() == 2


def test_gradient_with_respect_to_inertial_parameters_is_the_regressor():
    model = sd.robots.load("panda")
    q, qd, qdd = random_state(model, 3)
    pi = jnp.asarray(model.inertial_parameters())

    def tau(pi, q):
        return sd.inverse_dynamics(model.with_inertial_parameters(pi), q, qd, qdd)

    assert plan.decide(sd.dynamics.FUNCTIONS["inverse_dynamics"], model, "spatial", "jax")[0] \
        == "custom_call"
    Y = sd.inverse_dynamics_regressor(model, q, qd, qdd)
    J = jax.jit(jax.jacrev(tau))(pi, jnp.asarray(q))
    assert np.max(np.abs(np.asarray(J).reshape(model.nv, -1) - Y)) < 1e-9
    # through forward dynamics: a jnp-path reference
    loss = lambda pi, q: jnp.sum(sd.forward_dynamics(  # noqa: E731
        model.with_inertial_parameters(pi), q, qd, jnp.asarray(qdd)) ** 2)
    got = jax.jit(jax.grad(loss))(pi, jnp.asarray(q))
    previous = plan.use_custom_calls(False)
    try:
        want = jax.grad(loss)(pi, jnp.asarray(q))
    finally:
        plan.use_custom_calls(previous)
    assert np.max(np.abs(np.asarray(got) - np.asarray(want))) < 1e-8 * np.max(np.abs(want))


def ffi_results(f, *args):
    """The shapes of the results of the custom calls in ``f``'s jaxpr (nested ones included)."""
    text = str(jax.make_jaxpr(f)(*args))
    return [tuple(int(n) for n in m.group(1).split(",") if n) for m in re.finditer(
        r":f64\[([\d,]*)\] = ffi_call\[", text)]


def fd_loss_gradient(model, q, qd, tau):
    """The gradient of sum(qdd**2), qdd = FD(pi, q, qd, tau), by the inertial parameters pi,
    in closed form: ID(pi, q, qd, qdd) = Y(q, qd, qdd) pi = tau, so d qdd / d pi = -M^-1 Y and
    the gradient is -2 Y^T M^-1 qdd (the regressor, the mass matrix and FD on numpy)."""
    qdd = sd.forward_dynamics(model, q, qd, tau)
    Y = sd.inverse_dynamics_regressor(model, q, qd, qdd)
    return -2.0 * Y.T @ np.linalg.solve(sd.mass_matrix(model, q), qdd)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_grad_is_one_reverse_sweep_of_the_native_program(algebra):
    """jax.grad through a custom call transposes its tangent into the reverse-mode program
    (graph.vjp): no custom call returns a Jacobian (nv x parameters), and the gradient by the
    inertial parameters equals its closed form; vmap of it, jacrev and jacfwd agree."""
    model = sd.robots.load("panda")
    q, qd, tau = random_state(model, 5)
    pi = jnp.asarray(model.inertial_parameters())

    def loss(pi, q):
        return jnp.sum(sd.forward_dynamics(model.with_inertial_parameters(pi), q, qd, tau,
                                           algebra=algebra) ** 2)

    shapes = ffi_results(jax.grad(loss), pi, jnp.asarray(q))
    assert shapes and max(int(np.prod(s)) for s in shapes) == pi.size, shapes
    got = jax.jit(jax.grad(loss))(pi, jnp.asarray(q))
    want = fd_loss_gradient(model, q, qd, tau)
    assert np.max(np.abs(np.asarray(got).reshape(-1) - want)) < 1e-9 * np.max(np.abs(want))
    # per state, under vmap: the reverse program runs one state per row
    qs = np.stack([random_state(model, k)[0] for k in range(3)])
    batched = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0)))(pi, jnp.asarray(qs))
    for k in range(3):
        want = fd_loss_gradient(model, qs[k], qd, tau)
        assert np.max(np.abs(np.asarray(batched[k]).reshape(-1) - want)) < \
            1e-9 * np.max(np.abs(want))
    # reverse and forward Jacobians of ID by the state, every input at once
    qdd = jnp.asarray(tau)
    f = lambda q, qd: sd.inverse_dynamics(model, q, qd, qdd, algebra=algebra)  # noqa: E731
    rev = jax.jacrev(f, argnums=(0, 1))(jnp.asarray(q), jnp.asarray(qd))
    fwd = jax.jacfwd(f, argnums=(0, 1))(jnp.asarray(q), jnp.asarray(qd))
    for r, w in zip(rev, fwd):
        np.testing.assert_allclose(np.asarray(r), np.asarray(w), rtol=1e-12, atol=1e-9)
    # a NaN state gives a NaN gradient, not a number
    bad = np.array(q)
    bad[2] = np.nan
    assert np.all(np.isnan(np.asarray(jax.grad(loss)(pi, jnp.asarray(bad)))))


@pytest.mark.slow  # forward-mode references of two large MJCF models: CI's slow tier
def test_reverse_mode_through_mujoco_free_and_ball_joints():
    """dm_control's humanoid (MuJoCo's free joint: quaternion products and normalisation in the
    program, armature) and quadruped: jax.grad of a loss and jax.jacrev of forward dynamics,
    through the reverse programs, equal forward mode (jacfwd: one dense Jacobian program per
    model and algebra, the loss's gradient from it by the chain rule), every algebra."""
    import os

    dm_control = pytest.importorskip("dm_control")
    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    for name in ("humanoid", "quadruped"):
        model = sd.load_mjcf(os.path.join(suite, f"{name}.xml"))
        q, qd, tau = (jnp.asarray(a) for a in random_state(model, 12))
        for algebra in ALGEBRAS:
            def fd(q, qd, algebra=algebra):
                return sd.forward_dynamics(model, q, qd, tau, algebra=algebra)

            Jq, Jqd = jax.jacfwd(fd, argnums=(0, 1))(q, qd)
            c = jnp.cos(fd(q, qd))
            got = jax.jit(jax.grad(lambda q, qd: jnp.sum(jnp.sin(fd(q, qd))), argnums=(0, 1)))(
                q, qd)
            for g, J in zip(got, (Jq, Jqd)):
                w = c @ J
                assert float(jnp.max(jnp.abs(g - w))) < 1e-10 * float(jnp.max(jnp.abs(w))), \
                    (name, algebra)
            rev = jax.jacrev(fd, argnums=1)(q, qd)
            assert float(jnp.max(jnp.abs(rev - Jqd))) < 1e-10 * float(jnp.max(jnp.abs(Jqd)))


def test_grad_through_a_rollout_equals_forward_mode():
    """jax.grad of the final state of 200 Panda steps (the forward dynamics' custom call inside
    a scan) by the initial velocity: the reverse programs inside the transposed scan equal
    forward mode (jacfwd: J t programs), column for column."""
    model = sd.robots.load("panda")
    q0 = jnp.asarray(sd.random_configuration(model, seed=0))

    def loss(qd0):
        q, qd = sd.sim.rollout(model, q0, qd0, None, 200, 1e-3)
        return jnp.sum(q[-1] ** 2) + jnp.sum(jnp.sin(qd[-1]))

    x = jnp.linspace(-0.5, 0.5, model.nv)
    got = jax.jit(jax.grad(loss))(x)
    want = jax.jacfwd(loss)(x)
    assert float(jnp.max(jnp.abs(got - want))) < 1e-10 * float(jnp.max(jnp.abs(want)))


@pytest.mark.slow  # Talos's reverse program: CI's slow tier
def test_grad_of_forward_dynamics_on_talos_by_its_inertial_parameters():
    """The issue's case: a scalar of FD on Talos (a free flyer, 39 bodies' parameters), its
    jit(grad) by the inertial parameters equal to the closed form -2 Y^T M^-1 qdd."""
    model = sd.load_urdf(erd_urdf("talos_data/robots/talos_reduced.urdf"),
                         floating_base=True, joint_order="name")
    q, qd, tau = random_state(model, 8)
    pi = jnp.asarray(model.inertial_parameters())

    def loss(pi):
        return jnp.sum(sd.forward_dynamics(model.with_inertial_parameters(pi), q, qd, tau) ** 2)

    got = np.asarray(jax.jit(jax.grad(loss))(pi)).reshape(-1)
    want = fd_loss_gradient(model, q, qd, tau)
    assert np.max(np.abs(got - want)) < 1e-9 * np.max(np.abs(want))


def test_bad_inputs_under_tracing():
    model = sd.robots.load("panda")
    f = jax.jit(lambda q: sd.inverse_dynamics(model, q, jnp.zeros(9), jnp.zeros(9)))
    with pytest.raises(ValueError, match=r"\(\.\.\., 9\)"):
        f(jnp.zeros(8))
    with pytest.raises(ValueError, match="axis"):
        jax.vmap(lambda q, qd: sd.inverse_dynamics(model, q, qd, jnp.zeros(9)))(
            jnp.zeros((3, 9)), jnp.zeros((4, 9)))
    # empty batches, NaN per state
    assert jax.jit(lambda q: sd.mass_matrix(model, q))(jnp.zeros((0, 9))).shape == (0, 9, 9)
    q = jnp.zeros((3, 9)).at[1, 0].set(jnp.nan)
    tau = np.asarray(jax.jit(lambda q: sd.inverse_dynamics(model, q, jnp.zeros(9),
                                                           jnp.zeros(9)))(q))
    assert np.isnan(tau[1]).all() and np.isfinite(tau[[0, 2]]).all()


def public_calls(model, link):
    """Every public array function of one state, as f(q, qd, u) -> array."""
    return {
        "forward_kinematics": lambda q, qd, u, a: sd.forward_kinematics(model, q, algebra=a),
        "jacobian": lambda q, qd, u, a: sd.jacobian(model, q, link, algebra=a),
        "jacobian_local": lambda q, qd, u, a: sd.jacobian(model, q, link, frame="local",
                                                           algebra=a),
        "inverse_dynamics": lambda q, qd, u, a: sd.inverse_dynamics(model, q, qd, u, algebra=a),
        "forward_dynamics": lambda q, qd, u, a: sd.forward_dynamics(model, q, qd, u, algebra=a),
        "mass_matrix": lambda q, qd, u, a: sd.mass_matrix(model, q, algebra=a),
        "bias_forces": lambda q, qd, u, a: sd.bias_forces(model, q, qd, algebra=a),
        "gravity_torques": lambda q, qd, u, a: sd.gravity_torques(model, q, algebra=a),
        "coriolis_matrix": lambda q, qd, u, a: sd.coriolis_matrix(model, q, qd, algebra=a),
        "kinetic_energy": lambda q, qd, u, a: sd.kinetic_energy(model, q, qd, algebra=a),
        "potential_energy": lambda q, qd, u, a: sd.potential_energy(model, q, algebra=a),
        "center_of_mass": lambda q, qd, u, a: sd.center_of_mass(model, q),
        "link_velocities": lambda q, qd, u, a: sd.link_velocities(model, q, qd),
        "regressor": lambda q, qd, u, a: sd.inverse_dynamics_regressor(model, q, qd, u,
                                                                       algebra=a),
        "with_gravity": lambda q, qd, u, a: sd.inverse_dynamics(
            model, q, qd, u, gravity=jnp.asarray([0.0, 1.0, -9.0]) + 0 * qd[..., :3],
            algebra=a),
        "with_f_ext": lambda q, qd, u, a: sd.forward_dynamics(
            model, q, qd, u, f_ext=jnp.ones((model.nlinks, 6)) * qd[..., :1, None],
            algebra=a),
    }


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_every_public_function_under_jit_vmap_and_grad(algebra):
    model = random_tree(11, n=5, floating_base=True)
    link = model.link_names[-1]
    q, qd, u = random_state(model, 6, batch=(4,))
    for name, f in public_calls(model, link).items():
        expected = np.stack([np.asarray(f(q[i], qd[i], u[i], algebra)) for i in range(4)])
        args = [jnp.asarray(a) for a in (q, qd, u)]
        assert sd.plan(model, name if name in sd.dynamics.FUNCTIONS else "inverse_dynamics",
                       algebra="spatial", inputs="jax").path == "custom_call"
        jitted = jax.jit(jax.vmap(lambda q, qd, u: f(q, qd, u, algebra)))(*args)
        assert np.max(np.abs(np.asarray(jitted) - expected)) < 1e-11 * max(
            1.0, np.max(np.abs(expected))), name
        g = jax.jit(jax.grad(lambda q, qd: jnp.sum(jnp.sin(f(q, qd, args[2][0], algebra))),
                             argnums=(0, 1)))(args[0][0], args[1][0])
        previous = plan.use_custom_calls(False)
        try:
            w = jax.grad(lambda q, qd: jnp.sum(jnp.sin(f(q, qd, args[2][0], algebra))),
                         argnums=(0, 1))(args[0][0], args[1][0])
        finally:
            plan.use_custom_calls(previous)
        for a, b in zip(g, w):
            assert np.max(np.abs(np.asarray(a) - np.asarray(b))) < 1e-9 * max(
                1.0, float(np.max(np.abs(b)))), name


def test_dynamics_derivatives_with_jax_inputs_equal_numpy():
    model = sd.robots.load("panda")
    q, qd, qdd = random_state(model, 2, batch=(3,))
    d_np = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    d_jax = jax.jit(lambda q, qd, qdd: sd.dynamics_derivatives(model, q, qd, qdd=qdd))(
        *(jnp.asarray(a) for a in (q, qd, qdd)))
    for a, b in zip(d_np, d_jax):
        assert np.max(np.abs(np.asarray(a) - np.asarray(b))) < 1e-10


def _inverse_dynamics_target(model):
    """The name of the FFI target of ``model``'s inverse dynamics (inputs q, qd, qdd), the one
    the public path calls."""
    op = plan._custom_call_op(sd.dynamics.FUNCTIONS["inverse_dynamics"], model, "spatial",
                              ("q", "qd", "qdd"), ())
    assert op.native.input_names == ("q", "qd", "qdd") and op.native.output_shape == (9,)
    return op.target()


def test_the_ffi_target_called_directly_equals_numpy():
    """The registered target called by ``jax.ffi.ffi_call`` itself, bypassing the public
    path's casts: the same result as numpy, for a batch and with one input of one state
    (broadcast over the batch)."""
    model = sd.robots.load("panda")
    name = _inverse_dynamics_target(model)
    q, qd, qdd = random_state(model, 4, batch=(4,))
    out = jax.ShapeDtypeStruct((4, 9), jnp.float64)
    tau = jax.ffi.ffi_call(name, out)(*(jnp.asarray(a) for a in (q, qd, qdd)))
    assert np.array_equal(np.asarray(tau), sd.inverse_dynamics(model, q, qd, qdd))
    tau = jax.ffi.ffi_call(name, out)(jnp.asarray(q), jnp.asarray(qd[0]), jnp.asarray(qdd))
    assert np.array_equal(np.asarray(tau), sd.inverse_dynamics(model, q, qd[:1], qdd))


_HOSTILE_CHILD = textwrap.dedent("""
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import screwdyn as sd
    from test_custom_call import _inverse_dynamics_target

    name = _inverse_dynamics_target(sd.robots.load("panda"))
    x = [jnp.linspace(-1.0, 1.0, 36).reshape(4, 9) for _ in range(3)]
    out = jax.ShapeDtypeStruct((4, 9), jnp.float64)
    cases = {
        "float32 input": ([x[0], x[1].astype(jnp.float32), x[2]], out),
        "int32 input": ([x[0].astype(jnp.int32), x[1], x[2]], out),
        "short input": ([x[0], x[1][:, :5], x[2]], out),
        "result of more states": (x, jax.ShapeDtypeStruct((400, 9), jnp.float64)),
        "result of part of a state": (x, jax.ShapeDtypeStruct((5, 7), jnp.float64)),
        "float32 result": (x, jax.ShapeDtypeStruct((4, 9), jnp.float32)),
        "fewer operands": (x[:2], out),
        "more operands": (x + [x[0]], out),
        "two results": (x, (out, out)),
    }
    for case, (args, result) in cases.items():
        try:
            jax.block_until_ready(jax.ffi.ffi_call(name, result)(*args))
            print(case, "|", "no error", flush=True)
        except Exception as error:
            print(case, "|", type(error).__name__, "|", str(error).splitlines()[0], flush=True)
""")


def test_the_ffi_handler_refuses_bad_buffers_with_an_error():
    """Buffers of another dtype or size, or too many or too few, passed to the registered
    target directly (not through the public path, which casts and broadcasts): an XLA error
    naming the buffer, never a crash, an out-of-bounds read or write, or a wrong result. In a
    child process, so a regression crashes the child, not the tests."""
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests] + [p for p in sys.path if p]))
    child = subprocess.run([sys.executable, "-c", _HOSTILE_CHILD], capture_output=True,
                           text=True, env=env, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    results = dict(line.split(" | ", 1) for line in child.stdout.splitlines())
    want = {
        "float32 input": "input 1 (qd) is float32, expected float64",
        "int32 input": "input 0 (q) is int32, expected float64",
        "short input": "input 1 (qd) has 20 elements, expected 9 per state for the result's "
                       "4 states (36) or one state (9)",
        "result of more states": "input 0 (q) has 36 elements, expected 9 per state for the "
                                 "result's 400 states (3600) or one state (9)",
        "result of part of a state": "the result has 35 elements, not a whole number of "
                                     "states of 9",
        "float32 result": "the result is float32, expected float64",
        "fewer operands": "2 operands, expected 3 (q, qd, qdd)",
        "more operands": "4 operands, expected 3 (q, qd, qdd)",
        "two results": "2 results, expected 1",
    }
    assert set(results) == set(want), child.stdout
    for case, message in want.items():
        kind, _, text = results[case].partition(" | ")
        assert kind in ("XlaRuntimeError", "JaxRuntimeError"), (case, results[case])
        assert text.startswith("INVALID_ARGUMENT: screwdyn custom call screwdyn_"), text
        assert text.endswith(": " + message), (case, text)
