"""The analytic derivatives of inverse and forward dynamics (issue 27, item 1): Carpentier and
Mansard's recursion (``algorithms/derivatives.py``) against Pinocchio's computeRNEADerivatives
and computeABADerivatives, against forward-mode differentiation of the inverse dynamics program
(``graph.jacobian``, through JAX's custom call: an independent route), between the three
algebras, on its two assemblies (one straight-line program; world-frame factors for large
trees), with external wrenches, gravity, joint damping and armature, mimic couplings, MuJoCo's
free joint; and its bad inputs."""
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn import dynamics
from screwdyn.algebra import get_algebra
from screwdyn.execution import cache, native, plan

from conftest import erd_urdf, random_state, random_tree

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def _suite(name):
    dm_control = pytest.importorskip("dm_control")
    import os

    return os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{name}.xml")


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(1.0, np.abs(b).max()))


def _forward_mode(model, q, qd, qdd, f_ext=None, gravity=None):
    """(d tau/dq (tangent), d tau/dqd, d tau/dqdd) by jax.jacfwd of the inverse dynamics (JVPs
    of the traced RNEA program, ``graph.jacobian``): nothing of ``algorithms/derivatives``."""
    def tau(e, qd, qdd):
        moved = sd.integrate(model, jnp.asarray(q), e)
        return sd.inverse_dynamics(model, moved, qd, qdd, f_ext=f_ext, gravity=gravity)

    out = jax.jacfwd(tau, argnums=(0, 1, 2))(jnp.zeros(model.nv), jnp.asarray(qd),
                                             jnp.asarray(qdd))
    return tuple(np.asarray(a) for a in out)


def _talos(pin=None):
    path = erd_urdf("talos_data/robots/talos_reduced.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(path, floating_base=True, joint_order="name")
    if pin is None:
        return model
    return model, pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())


def _chain_urdf(n):
    axes = ("0 0 1", "0 1 0", "1 0 0")
    parts = ['<robot name="chain"><link name="base"/>']
    parent = "base"
    for i in range(n):
        parts.append(
            f'<link name="l{i}"><inertial><origin xyz="0.05 0 0.1"/><mass value="1"/>'
            '<inertia ixx="0.02" iyy="0.02" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'
            f'</link><joint name="j{i}" type="revolute"><parent link="{parent}"/>'
            f'<child link="l{i}"/><origin xyz="0 0 0.2"/><axis xyz="{axes[i % 3]}"/>'
            '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
        parent = f"l{i}"
    return "".join(parts) + "</robot>"


# -- against Pinocchio ------------------------------------------------------------------------
def test_a_floating_humanoid_equals_pinocchio_in_every_algebra():
    """Talos (38 DoF, a free flyer): ID and FD derivatives equal Pinocchio's to 1e-9 of their
    largest entry; the three algebras agree to 1e-12."""
    pin = pytest.importorskip("pinocchio")
    model, pm = _talos(pin)
    assert plan.factored(dynamics.FUNCTIONS["inverse_dynamics_derivatives"], model,
                         "spatial") is None  # one straight-line program
    pd = pm.createData()
    q, qd, u = random_state(model, 3, batch=(2,))
    results = {a: (sd.dynamics_derivatives(model, q, qd, qdd=u, algebra=a),
                   sd.dynamics_derivatives(model, q, qd, tau=u, algebra=a))
               for a in ("spatial", "cga", "dq")}
    for k in range(2):
        pin.computeRNEADerivatives(pm, pd, q[k], qd[k], u[k])
        M = np.triu(pd.M) + np.triu(pd.M, 1).T
        for got, want in zip(results["spatial"][0], (pd.dtau_dq, pd.dtau_dv, M)):
            assert _rel(got[k], want) < 1e-9
        pin.computeABADerivatives(pm, pd, q[k], qd[k], u[k])
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        for got, want in zip(results["spatial"][1], (pd.ddq_dq, pd.ddq_dv, Minv)):
            assert _rel(got[k], want) < 1e-9
    for algebra in ("cga", "dq"):
        for ours, spatial in zip(results[algebra][0] + results[algebra][1],
                                 results["spatial"][0] + results["spatial"][1]):
            assert _rel(ours, spatial) < 1e-12, algebra


def test_a_long_chain_runs_from_world_frame_factors_and_equals_pinocchio(tmp_path):
    """A 50-link chain relates 1,275 pairs of coordinates: the factored form (O(n) program,
    then matrix products), equal to Pinocchio's; batched, and under JAX."""
    pin = pytest.importorskip("pinocchio")
    path = tmp_path / "chain.urdf"
    path.write_text(_chain_urdf(50))
    model = sd.load_urdf(str(path))
    for name in ("inverse_dynamics_derivatives", "forward_dynamics_derivatives"):
        assert plan.factored(dynamics.FUNCTIONS[name], model, "spatial") is not None
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    q, qd, u = random_state(model, 5, batch=(20,))
    inverse = sd.dynamics_derivatives(model, q, qd, qdd=u)
    forward = sd.dynamics_derivatives(model, q, qd, tau=u)
    for k in (0, 19):
        pin.computeRNEADerivatives(pm, pd, q[k], qd[k], u[k])
        M = np.triu(pd.M) + np.triu(pd.M, 1).T
        for got, want in zip(inverse, (pd.dtau_dq, pd.dtau_dv, M)):
            assert _rel(got[k], want) < 1e-9
        pin.computeABADerivatives(pm, pd, q[k], qd[k], u[k])
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        for got, want in zip(forward, (pd.ddq_dq, pd.ddq_dv, Minv)):
            assert _rel(got[k], want) < 1e-9
    on_jax = sd.dynamics_derivatives(model, jnp.asarray(q[:3]), qd[:3], tau=u[:3])
    for got, want in zip(on_jax, forward):
        assert isinstance(got, jax.Array) and _rel(got, want[:3]) < 1e-10  # XLA's own inverse


def _damped():
    """A floating branched tree whose joints have armature and viscous damping (some of them:
    zeros left out), revolute, prismatic and ball joints."""
    rng = np.random.default_rng(12)
    b = sd.ModelBuilder("damped")
    b.add_link("base", mass=3.0, inertia=np.diag([0.1, 0.2, 0.15]))
    links = ["base"]
    for i, kind in enumerate(("revolute", "prismatic", "spherical", "revolute", "revolute")):
        b.add_link(f"l{i}", mass=rng.uniform(0.5, 2), com=rng.normal(size=3) * 0.1,
                   inertia=np.diag(rng.uniform(0.02, 0.05, 3)))
        b.add_joint(f"j{i}", kind, links[i // 2], f"l{i}", xyz=rng.normal(size=3) * 0.3,
                    axis=rng.normal(size=3), armature=0.1 * (i % 2), damping=0.7 * (i != 2))
        links.append(f"l{i}")
    return b.build(floating_base=True)


def test_the_two_assemblies_agree():
    """The straight-line program and the world-frame factors give the same derivatives, ID and
    FD, on branched floating trees: dm_control's humanoid (MuJoCo's free joint, armature) and
    a tree with damping and armature on a free flyer."""
    for model in (sd.load_mjcf(_suite("humanoid")), _damped()):
        assert model.armature.any() or model.damping.any()
        q, qd, u = random_state(model, 8, batch=(3,))
        for name in ("inverse_dynamics_derivatives", "forward_dynamics_derivatives"):
            function = dynamics.FUNCTIONS[name]
            straight = plan.run(function, model, "spatial", (q, qd, u), (None, None))
            form = function.factored
            factors = plan.run(form.columns, model, "spatial", (q, qd, u), (None, None))
            assert factors.shape == (3, 9, 6, model.nv)
            assert _rel(form.finish(np, model, factors), straight) < 1e-12, name


# -- against forward-mode differentiation ---------------------------------------------------------
def test_mujoco_free_joints_damping_and_armature_equal_forward_mode():
    """dm_control's humanoid and quadruped (MuJoCo's free joint, whose S depends on q;
    armature) and a tree with damping and armature: d tau/dq in the tangent space, d tau/dqd,
    M; FD's as -M^-1 d ID."""
    for name in ("humanoid", "quadruped", "damped"):
        model = _damped() if name == "damped" else sd.load_mjcf(_suite(name))
        assert (model.damping.any() if name == "damped" else
                model.bodies[0].joint_model.configuration_dependent)
        q, qd, qdd = (a[0] for a in random_state(model, 2, batch=(1,)))
        got = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
        want = _forward_mode(model, q, qd, qdd)
        for g, w in zip(got, want):
            assert _rel(g, w) < 1e-11, name
        tau = sd.inverse_dynamics(model, q, qd, qdd)
        fd = sd.dynamics_derivatives(model, q, qd, tau=tau)
        Minv = np.linalg.inv(want[2])
        for g, w in zip(fd, (-Minv @ want[0], -Minv @ want[1], Minv)):
            assert _rel(g, w) < 1e-9, name


def test_external_wrenches_and_gravity_are_differentiated():
    """Link wrenches (in link frames: they turn with their links) and a given gravity, on a
    random floating tree, every algebra."""
    model = random_tree(31, n=6, floating_base=True)
    q, qd, qdd = (a[0] for a in random_state(model, 9, batch=(1,)))
    rng = np.random.default_rng(4)
    f_ext = rng.normal(size=(model.nlinks, 6))
    gravity = np.array([0.3, -1.2, -9.0])
    want = _forward_mode(model, q, qd, qdd, f_ext=f_ext, gravity=gravity)
    for algebra in ("spatial", "cga", "dq"):
        got = sd.dynamics_derivatives(model, q, qd, qdd=qdd, f_ext=f_ext, gravity=gravity,
                                      algebra=algebra)
        for g, w in zip(got, want):
            assert _rel(g, w) < 1e-11, algebra
    plain = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    assert _rel(plain.dq, want[0]) > 1e-3  # the wrenches and gravity did change it


def test_mimic_couplings_in_the_models_coordinates():
    """The Panda with its finger tied to the other (``mimic="couple"``): derivatives in the
    model's 8 coordinates, G^T D G, equal forward mode; FD's d qdd/d tau is the coupled M^-1."""
    path = erd_urdf("panda_description/urdf/panda.urdf")
    model = sd.load_urdf(path, mimic="couple")
    assert model.coupling is not None and model.nv == 8
    q, qd, qdd = (a[0] for a in random_state(model, 6, batch=(1,)))
    got = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    for g, w in zip(got, _forward_mode(model, q, qd, qdd)):
        assert _rel(g, w) < 1e-11
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    fd = sd.dynamics_derivatives(model, q, qd, tau=tau)
    assert _rel(fd.du, np.linalg.inv(sd.mass_matrix(model, q))) < 1e-9
    assert _rel(fd.dq, -fd.du @ got.dq) < 1e-9


# -- the algebra operation they need ---------------------------------------------------------
@pytest.mark.parametrize("algebra", ["spatial", "cga", "dq"])
def test_inertia_variation_is_the_rate_of_the_moved_inertia(algebra):
    """inertia_variation(V, I) = d/dt inertia_act(exp(t V), I) at t = 0, by central differences
    of the algebra's own inertia_act on poses exp(+-h V) (scipy's matrix exponential)."""
    from scipy.linalg import expm

    alg = get_algebra(algebra)
    rng = np.random.default_rng(2)
    V = rng.normal(size=6)
    I = alg.inertia(1.7, rng.normal(size=3) * 0.2, np.diag([0.05, 0.08, 0.1]))
    twist = np.zeros((4, 4))
    twist[:3, :3] = [[0, -V[5], V[4]], [V[5], 0, -V[3]], [-V[4], V[3], 0]]
    twist[:3, 3] = V[:3]
    h = 1e-5
    moved = []
    for sign in (1, -1):
        T = expm(sign * h * twist)
        moved.append(np.asarray(alg.inertia_act(alg.pose(T[:3, :3], T[:3, 3]), I)))
    want = (moved[0] - moved[1]) / (2 * h)
    got = np.asarray(alg.inertia_variation(alg.twist(V[:, None]), I))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)
    if algebra == "dq":  # its matrix maps (omega, v) to (f, tau): symmetric with columns swapped
        got = got[:, [3, 4, 5, 0, 1, 2]]
    np.testing.assert_allclose(got[..., 0], got[..., 0].T, atol=1e-12)  # symmetric


# -- paths and bad input ----------------------------------------------------------------------
def test_compiled_registered_and_traced():
    """sd.compile and sd.plan take both; JAX in (custom call) equals numpy in, under jit and
    vmap; the three-part view splits the registered (..., nv, 3 nv)."""
    panda = sd.robots.load("panda")
    q, qd, tau = random_state(panda, 1, batch=(4,))
    D = sd.forward_dynamics_derivatives(panda, q, qd, tau)
    assert D.shape == (4, 9, 27)
    f = sd.compile(panda, "forward_dynamics_derivatives")
    np.testing.assert_allclose(f(q, qd, tau), D, rtol=1e-12, atol=1e-12)
    assert sd.plan(panda, "inverse_dynamics_derivatives").path == "native"
    view = sd.dynamics_derivatives(panda, q, qd, tau=tau)
    np.testing.assert_array_equal(np.concatenate(view, axis=-1), D)
    jitted = jax.jit(jax.vmap(lambda q, qd, tau: sd.forward_dynamics_derivatives(
        panda, q, qd, tau)))(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(tau))
    np.testing.assert_allclose(np.asarray(jitted), D, rtol=1e-11, atol=1e-11)
    previous = plan.use_native(False)
    try:
        np.testing.assert_allclose(sd.forward_dynamics_derivatives(panda, q, qd, tau), D,
                                   rtol=1e-10, atol=1e-10)
    finally:
        plan.use_native(previous)


def test_bad_inputs():
    panda = sd.robots.load("panda")
    q, qd, qdd = random_state(panda, 2, batch=(3,))
    with pytest.raises(ValueError, match="qd"):
        sd.dynamics_derivatives(panda, q, qd[:, :5], qdd=qdd)
    with pytest.raises(ValueError, match="exactly one of qdd"):
        sd.dynamics_derivatives(panda, q, qd)
    bad = q.copy()
    bad[1, 3] = np.nan
    d = sd.dynamics_derivatives(panda, bad, qd, tau=qdd)
    for part in d:
        assert np.isnan(part[1]).all() and np.isfinite(part[[0, 2]]).all()
    b = sd.ModelBuilder("massless_tip")
    b.add_link("world")
    b.add_link("arm", mass=1.0, com=(0.3, 0, 0), inertia=np.eye(3) * 0.01)
    b.add_link("tip")
    b.add_joint("shoulder", "revolute", "world", "arm", axis=(0, 0, 1))
    b.add_joint("wrist", "revolute", "arm", "tip", xyz=(0.6, 0, 0), axis=(0, 0, 1))
    model = b.build()
    with pytest.raises(sd.ModelError, match="joint 'wrist'"):
        sd.dynamics_derivatives(model, np.zeros(2), np.zeros(2), tau=np.zeros(2))
    np.testing.assert_allclose(  # inverse dynamics' are defined: M is singular, not needed
        sd.dynamics_derivatives(model, np.zeros(2), np.zeros(2), qdd=np.zeros(2)).du[1], 0.0)
    b = sd.ModelBuilder("no_dof")  # a model that does not move: empty derivatives
    b.add_link("base", mass=1.0, inertia=np.eye(3) * 0.1)
    rigid = b.build()
    for kw in ({"qdd": np.zeros((3, 0))}, {"tau": np.zeros((3, 0))}):
        for native in (True, False):
            previous = plan.use_native(native)
            try:
                d = sd.dynamics_derivatives(rigid, np.zeros((3, 0)), np.zeros((3, 0)), **kw)
            finally:
                plan.use_native(previous)
            assert all(a.shape == (3, 0, 0) for a in d)


def test_written_into_a_given_array_on_every_path(tmp_path):
    """``out=``: the same bits as a fresh result, written into the array given and returned (the
    fields are views of it), for one state, a batch of two axes, with external wrenches, on the
    numpy path and for a long chain's factored form; the program's optimised code is queued once
    the states run this way pass the fast entry's count."""
    panda = sd.robots.load("panda")
    q, qd, u = random_state(panda, 3, batch=(2, 600))
    f_ext = np.random.default_rng(3).normal(size=(2, 600, panda.nlinks, 6))
    path = tmp_path / "chain.urdf"
    path.write_text(_chain_urdf(50))
    chain = sd.load_urdf(str(path))
    cq, cqd, cu = random_state(chain, 4, batch=(3,))
    cases = [(panda, (q[0, 0], qd[0, 0], u[0, 0]), {}), (panda, (q, qd, u), {}),
             (panda, (q, qd, u), {"f_ext": f_ext}), (chain, (cq, cqd, cu), {})]
    for native in (True, False):
        previous = plan.use_native(native)
        try:
            for model, (a, b, c), options in cases:
                for name in ("qdd", "tau"):
                    fresh = np.concatenate(sd.dynamics_derivatives(model, a, b, **{name: c},
                                                                   **options), axis=-1)
                    out = np.full(fresh.shape, np.nan)
                    got = sd.dynamics_derivatives(model, a, b, **{name: c}, **options, out=out)
                    np.testing.assert_array_equal(out, fresh)
                    assert all(np.shares_memory(part, out) for part in got)
                    registered = getattr(sd, "inverse_dynamics_derivatives" if name == "qdd"
                                         else "forward_dynamics_derivatives")
                    assert registered(model, a, b, c, **options, out=out) is out
        finally:
            plan.use_native(previous)


def test_states_run_into_out_bring_the_optimised_code(tmp_path):
    """States run outside the fast entry (``out=``, or a batch of two axes) count towards the
    optimised code as the fast entry's do: past 1,000 it is compiled in the background."""
    previous = cache.directory()
    cache.set_directory(tmp_path / "cache")  # nothing optimised on disk
    native._PROGRAMS.clear()
    plan._forget()
    try:
        path = tmp_path / "chain.urdf"
        path.write_text(_chain_urdf(5))
        model = sd.load_urdf(str(path))
        program = plan.General(dynamics.FUNCTIONS["inverse_dynamics_derivatives"], model,
                               "spatial", ("q", "qd", "qdd"), ()).native()
        assert program.level == 0
        q, qd, u = random_state(model, 1, batch=(1200,))
        sd.dynamics_derivatives(model, q, qd, qdd=u, out=np.empty((1200, 5, 15)))
        native.wait_for_optimisation()
        assert program.level == native.LEVELS[-1] and program.optimise_time is not None
    finally:
        cache.set_directory(previous)
        native._PROGRAMS.clear()
        plan._forget()


def test_a_bad_out_is_refused_and_nothing_is_written():
    panda = sd.robots.load("panda")
    q, qd, qdd = random_state(panda, 2, batch=(3,))
    good = (3, 9, 27)
    read_only = np.zeros(good)
    read_only.flags.writeable = False
    for bad, says in ((np.zeros((3, 9, 18)), r"shape \(3, 9, 27\)"),
                      (np.zeros(good, dtype=np.float32), "float32"),
                      (np.zeros((3, 9, 54))[..., ::2], "not C-contiguous"),
                      (read_only, "read-only"), ([0.0] * 3, "numpy array, got list"),
                      (q, "shares memory with the input q")):
        with pytest.raises(ValueError, match=says):
            sd.dynamics_derivatives(panda, q, qd, qdd=qdd, out=bad)
    out = np.zeros(good)
    with pytest.raises(ValueError, match="qd must have shape"):
        sd.dynamics_derivatives(panda, q, qd[:, :5], qdd=qdd, out=out)
    with pytest.raises(ValueError, match="JAX arrays cannot be written into"):
        sd.dynamics_derivatives(panda, jnp.asarray(q), qd, qdd=qdd, out=out)
    assert not out.any()  # checked before a number is written


def test_a_large_trees_products_run_on_one_blas_thread(tmp_path, monkeypatch):
    """The factored form's finishing products and inverses (numpy, a few states at a time) run
    with numpy's BLAS on one thread, and the caller's BLAS threads are as they were afterwards
    (numpy's wheels bundle their OpenBLAS in numpy.libs; scipy's is another)."""
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info()
                if i["user_api"] == "blas" and "numpy" in i["filepath"]]

    path = tmp_path / "chain.urdf"
    path.write_text(_chain_urdf(50))
    chain = sd.load_urdf(str(path))
    form = dynamics.FUNCTIONS["forward_dynamics_derivatives"].factored
    finish, seen = form.finish, []

    def watched(*args):
        seen.append(blas_threads())
        return finish(*args)

    monkeypatch.setattr(form, "finish", watched)
    before = blas_threads()
    q, qd, tau = random_state(chain, 6, batch=(4,))
    sd.dynamics_derivatives(chain, q, qd, tau=tau)
    assert seen and seen[0] and all(n == 1 for n in seen[0]) and blas_threads() == before
