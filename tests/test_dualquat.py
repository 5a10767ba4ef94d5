"""Dual quaternions: the algebra's identities, and the recursions run in it against the spatial
algebra on real URDFs (fixed and floating base, external wrenches), closed forms, JAX."""
import numpy as np
import pytest
from scipy.linalg import expm
from scipy.spatial.transform import Rotation

import screwdyn as sd
from conftest import erd_urdf, erd_urdfs, random_state, random_tree
from screwdyn.algebra import dualquat as dq
from screwdyn.algebra import get_algebra

RNG = np.random.default_rng(42)
B = 7  # batch size of the identity tests


def _poses(n=B, rng=RNG):
    """Random unit dual quaternions and their matrices; half the rotations near pi (w ~ 0)."""
    angles = np.where(np.arange(n) % 2, rng.uniform(0, np.pi, n), np.pi - rng.uniform(0, 1e-3, n))
    axes = rng.normal(size=(n, 3))
    T = np.tile(np.eye(4), (n, 1, 1))
    T[:, :3, :3] = Rotation.from_rotvec(axes / np.linalg.norm(axes, axis=1)[:, None]
                                        * angles[:, None]).as_matrix()
    T[:, :3, 3] = rng.normal(size=(n, 3))
    return dq.from_matrix(T), T


def _skew(w):
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


def _pure(x, atol=1e-12):
    """The 6 coordinates of a dual quaternion whose scalar parts vanish."""
    assert np.abs(x[..., [0, 4]]).max() < atol
    return x[..., [1, 2, 3, 5, 6, 7]]


# -- the algebra ----------------------------------------------------------------------------------
def test_product_is_associative_and_conjugate_inverts_unit_ones():
    a, b, c = RNG.normal(size=(3, B, 8))
    np.testing.assert_allclose(dq.mul(dq.mul(a, b), c), dq.mul(a, dq.mul(b, c)), atol=1e-12)
    x, _ = _poses()
    one = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(dq.mul(x, dq.conj(x)), np.broadcast_to(one, (B, 8)), atol=1e-12)
    np.testing.assert_allclose(dq.conj(dq.mul(a, b)), dq.mul(dq.conj(b), dq.conj(a)), atol=1e-12)
    np.testing.assert_allclose(dq.dual_conj(dq.dual_conj(a)), a)


def test_matrix_round_trip_and_composition():
    x, T = _poses()
    np.testing.assert_allclose(dq.to_matrix(x), T, atol=1e-12)
    y, U = _poses(rng=np.random.default_rng(1))
    np.testing.assert_allclose(dq.to_matrix(dq.mul(x, y)), T @ U, atol=1e-12)
    _same_pose(dq.from_matrix(dq.to_matrix(x)), x)
    # the pose convention: x = r + eps p r / 2
    p = np.array([1.0, -2.0, 0.5])
    T = np.eye(4)
    T[:3, 3] = p
    np.testing.assert_allclose(dq.from_matrix(T), [1, 0, 0, 0, 0, *(p / 2)])


def test_ad_is_the_sandwich_and_a_homomorphism():
    x, _ = _poses()
    y, _ = _poses(rng=np.random.default_rng(2))
    h = RNG.normal(size=(B, 6))
    np.testing.assert_allclose(dq.Ad(x, h), _pure(dq.mul(dq.mul(x, dq.embed(h)), dq.conj(x))),
                               atol=1e-12)
    np.testing.assert_allclose(dq.Ad(dq.mul(x, y), h), dq.Ad(x, dq.Ad(y, h)), atol=1e-11)
    np.testing.assert_allclose(dq.Ad(dq.conj(x), dq.Ad(x, h)), h, atol=1e-11)


def test_ad_moves_twists_and_wrenches_as_spatial_transforms():
    """Against Pinocchio's SE3 action on Motion and Force (the spatial algebra if it is absent)."""
    x, T = _poses()
    V, F = RNG.normal(size=(2, B, 6))  # public [linear; angular] twist, [force; torque] wrench
    twist = dq.twist_vector(dq.Ad(x, dq.twist(V)))
    wrench = dq.Ad(x, F)
    try:
        import pinocchio as pin
    except ImportError:
        spatial = get_algebra("spatial")
        X = spatial.pose(np.moveaxis(T[:, :3, :3], 0, -1), np.moveaxis(T[:, :3, 3], 0, -1))
        expected_twist = spatial.act_twist(X, V.T).T
        expected_wrench = spatial.act_wrench(X, F.T).T
    else:
        expected_twist = np.array([pin.SE3(Tk).act(pin.Motion(Vk)).vector for Tk, Vk in zip(T, V)])
        expected_wrench = np.array([pin.SE3(Tk).act(pin.Force(Fk)).vector for Tk, Fk in zip(T, F)])
    np.testing.assert_allclose(twist, expected_twist, atol=1e-12)
    np.testing.assert_allclose(wrench, expected_wrench, atol=1e-12)


def test_power_is_invariant_under_ad_and_brackets_are_the_spatial_ones():
    x, _ = _poses()
    xi, zeta = dq.twist(RNG.normal(size=(B, 6))), RNG.normal(size=(B, 6))
    power = dq.dot(xi, zeta)[..., 1]
    np.testing.assert_allclose(dq.dot(dq.Ad(x, xi), dq.Ad(x, zeta))[..., 1], power, atol=1e-12)
    v, w = dq.twist_vector(xi)[..., :3], dq.twist_vector(xi)[..., 3:]
    np.testing.assert_allclose(power, (v * zeta[..., :3] + w * zeta[..., 3:]).sum(-1), atol=1e-12)
    # cross and dot are the commutator and anticommutator of the product
    ab, ba = (dq.mul(dq.embed(a), dq.embed(b)) for a, b in ((xi, zeta), (zeta, xi)))
    np.testing.assert_allclose(dq.cross(xi, zeta), _pure((ab - ba) / 2), atol=1e-12)
    np.testing.assert_allclose(dq.dot(xi, zeta), -((ab + ba) / 2)[..., [0, 4]], atol=1e-12)
    # cross(twist, twist) = crm, cross(twist, wrench) = crf (Featherstone, [v; w] layout)
    f, n = zeta[..., :3], zeta[..., 3:]
    eta = RNG.normal(size=(B, 6))
    np.testing.assert_allclose(dq.twist_vector(dq.cross(xi, dq.twist(eta))), np.concatenate(
        [np.cross(w, eta[..., :3]) + np.cross(v, eta[..., 3:]), np.cross(w, eta[..., 3:])], -1),
        atol=1e-12)
    np.testing.assert_allclose(dq.cross(xi, zeta), np.concatenate(
        [np.cross(w, f), np.cross(w, n) + np.cross(v, f)], -1), atol=1e-12)


def test_twist_is_twice_the_conjugate_times_the_derivative():
    """xi = 2 x* xdot is the body twist: T^-1 dT/dt = [[omega x, v], [0, 0]]."""
    _, T0 = _poses(1)
    A, C = (_se3(RNG.normal(size=6)) for _ in range(2))
    path = lambda t: T0[0] @ expm(A * t) @ expm(C * t * t)  # noqa: E731 (a smooth rigid motion)
    h, t = 1e-6, 0.3
    xdot = (dq.from_matrix(path(t + h)) - dq.from_matrix(path(t - h))) / (2 * h)
    xi = _pure(2 * dq.mul(dq.conj(dq.from_matrix(path(t))), xdot), atol=1e-8)
    body = np.linalg.inv(path(t)) @ (path(t + h) - path(t - h)) / (2 * h)
    expected = dq.twist(np.concatenate([body[:3, 3], [body[2, 1], body[0, 2], body[1, 0]]]))
    np.testing.assert_allclose(xi, expected, atol=1e-8)


def _se3(V):
    """The 4x4 matrix of a public twist [v; omega]."""
    S = np.zeros((4, 4))
    S[:3, :3], S[:3, 3] = _skew(V[3:]), V[:3]
    return S


def _same_pose(a, b):
    """a == b up to the sign of the whole dual quaternion (x and -x are one pose)."""
    np.testing.assert_allclose(a * np.sign((a * b).sum(-1))[..., None], b, atol=1e-12)


def test_exp_is_the_screw_motion_and_log_its_inverse():
    """exp(xi / 2) is the displacement by the constant body twist xi in unit time: the matrix
    exponential of [[omega x, v], [0, 0]]; log inverts it, also for tiny and large angles."""
    V = RNG.normal(size=(B, 6)) * np.array([1, 1, 1, 0.7, 0.7, 0.7])
    V[0, 3:] *= 1e-9  # the series branch
    V[1, 3:] = [0, 0, 0]
    V[2, 3:] *= np.pi * 0.99 / np.linalg.norm(V[2, 3:])  # rotation angle close to pi
    x = dq.exp(dq.twist(V) / 2)
    for Vk, Tk in zip(V, dq.to_matrix(x)):
        np.testing.assert_allclose(Tk, expm(_se3(Vk)), atol=1e-12)
    np.testing.assert_allclose(dq.log(x), dq.twist(V) / 2, atol=1e-12)
    y, _ = _poses()
    _same_pose(dq.exp(dq.log(y)), y)


def test_public_functions_check_shapes():
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 8\)"):
        dq.conj(np.zeros(6))
    with pytest.raises(ValueError, match=r"T must have shape \(\.\.\., 4, 4\)"):
        dq.from_matrix(np.eye(3))


# -- dynamics in dual quaternions agree with the spatial algebra ----------------------------------
@pytest.mark.filterwarnings("ignore::screwdyn.InertiaWarning")  # loaded as Pinocchio does
@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_dq_agrees_with_spatial_on_every_example_robot(floating):
    """Every example-robot-data URDF screwdyn loads: inverse dynamics with external wrenches and
    another gravity, mass matrix, forward dynamics (where it is defined), batched."""
    paths = erd_urdfs()
    if not paths:
        pytest.skip("example-robot-data is not installed")
    checked = 0
    for path in paths:
        try:
            model = sd.load_urdf(path, floating_base=floating)
        except sd.ModelError:  # not a robot (no links), checked in test_urdf
            continue
        if model.nv:
            _agree(model, seed=checked, batch=(2,))
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("seed", [0, 1])
def test_dq_agrees_with_spatial_on_random_trees(seed):
    """Continuous, prismatic and fixed joints, rotated inertial frames, floating bases."""
    _agree(random_tree(seed, n=8, floating_base=bool(seed)), seed, batch=(2, 3))


def _agree(model, seed, batch):
    q, qd, qdd = random_state(model, seed, batch=batch)
    f_ext = np.random.default_rng(seed).normal(size=batch + (model.nlinks, 6))
    for name, args in (("inverse_dynamics", (q, qd, qdd)), ("forward_dynamics", (q, qd, qdd)),
                       ("mass_matrix", (q,))):
        kwargs = {} if name == "mass_matrix" else {"f_ext": f_ext, "gravity": [1.0, -2.0, -9.0]}
        try:
            expected = getattr(sd, name)(model, *args, **kwargs)
        except sd.ModelError:  # forward dynamics undefined: a massless subtree
            continue
        result = getattr(sd, name)(model, *args, algebra="dq", **kwargs)
        assert result.shape == expected.shape
        assert np.abs(result - expected).max() <= 1e-10 * np.abs(expected).max(), (model.name, name)


def test_prismatic_joint_force_is_the_dual_part_of_the_projection():
    """Pitfall 1 of the note: tau = D(dot(zeta, s)); P(.) would give 0. A mass on a prismatic joint
    along a tilted axis, pushed with acceleration a: tau = m (a - g . axis) exactly."""
    b = sd.ModelBuilder("slider")
    b.add_link("rail")
    b.add_link("cart", mass=3.0, com=(0.1, 0.2, -0.3), inertia=np.diag([0.1, 0.2, 0.25]))
    b.add_joint("slide", "prismatic", "rail", "cart", rpy=(0.2, -0.3, 0.1), axis=(0, 0, 1))
    model = b.build()
    axis = sd.forward_kinematics(model, np.zeros(1))[1, :3, 2]  # the joint's z, in the world
    for a in (0.0, 1.5):
        tau = sd.inverse_dynamics(model, [0.7], [0.4], [a], algebra="dq")
        np.testing.assert_allclose(tau, [3.0 * (a - np.array([0, 0, -9.81]) @ axis)], rtol=1e-13)


def test_mass_matrix_is_not_newton_euler_columns_with_gravity():
    """Pitfall 2 of the note: the columns of M are inverse dynamics at rest *without* gravity; with
    gravity on each column also carries g(q)."""
    model = sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"))
    q, _, _ = random_state(model, 3)
    M = sd.mass_matrix(model, q, algebra="dq")
    eye, rest = np.eye(model.nv), np.zeros(model.nv)
    columns = sd.inverse_dynamics(model, q, rest, eye, gravity=[0, 0, 0], algebra="dq")
    np.testing.assert_allclose(M, columns.T, atol=1e-12)
    g = sd.gravity_torques(model, q, algebra="dq")
    with_gravity = sd.inverse_dynamics(model, q, rest, eye, algebra="dq")
    np.testing.assert_allclose(with_gravity - g, columns, atol=1e-12)
    assert np.abs(g).max() > 1.0


def test_jit_equals_numpy():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    model = random_tree(1, n=6, floating_base=True)
    q, qd, qdd = random_state(model, 4, batch=(3,))
    f_ext = np.random.default_rng(4).normal(size=(3, model.nlinks, 6))
    jq, jqd, jqdd, jf = map(jax.numpy.asarray, (q, qd, qdd, f_ext))
    # inverse dynamics first, then the mass matrix: its trace reuses the cached model constants,
    # which must hold no tracers of the first
    tau = jax.jit(lambda *a: sd.inverse_dynamics(model, *a, algebra="dq"))(jq, jqd, jqdd, jf)
    np.testing.assert_allclose(tau, sd.inverse_dynamics(model, q, qd, qdd, f_ext, algebra="dq"),
                               rtol=1e-12, atol=1e-10)
    M = jax.jit(lambda q: sd.mass_matrix(model, q, algebra="dq"))(jq)
    np.testing.assert_allclose(M, sd.mass_matrix(model, q, algebra="dq"), atol=1e-12)
    x, _ = _poses()
    h = RNG.normal(size=(B, 6))
    public = jax.jit(lambda x, h: dq.log(dq.exp(dq.Ad(x, h) / 4)))
    np.testing.assert_allclose(public(jax.numpy.asarray(x), jax.numpy.asarray(h)),
                               dq.log(dq.exp(dq.Ad(x, h) / 4)), atol=1e-12)


# -- the paper's Newton-Euler at the centres of mass -----------------------------------------------
@pytest.mark.filterwarnings("ignore::screwdyn.InertiaWarning")  # loaded as Pinocchio does
def test_inverse_dynamics_is_the_centre_of_mass_recursion_to_1e_12():
    """algebra="dq" inverse dynamics runs algorithms/dq_newton_euler.py: on every example robot
    (fixed and floating base) it agrees with the spatial algebra to 1e-12 relative, and the
    recursion itself calls no spatial helper (the 6x6 congruence of the body-frame variant)."""
    from screwdyn.algebra import dualquat
    from screwdyn.algorithms import dq_newton_euler

    paths = erd_urdfs()
    if not paths:
        pytest.skip("example-robot-data is not installed")
    worst = 0.0
    for floating in (False, True):
        for path in paths[::3]:
            try:
                model = sd.load_urdf(path, floating_base=floating)
            except sd.ModelError:
                continue
            if not model.nv:
                continue
            q, qd, qdd = random_state(model, 1, batch=(2,))
            f_ext = np.random.default_rng(1).normal(size=(2, model.nlinks, 6))
            expected = sd.inverse_dynamics(model, q, qd, qdd, f_ext=f_ext, gravity=[1, -2, -9])
            result = sd.inverse_dynamics(model, q, qd, qdd, f_ext=f_ext, gravity=[1, -2, -9],
                                         algebra="dq")
            worst = max(worst, np.abs(result - expected).max() / np.abs(expected).max())
    assert worst < 1e-12
    model = random_tree(2, n=8, floating_base=True)
    q, qd, qdd = random_state(model, 2)
    previous = sd.execution.use_native(False)  # on numpy, whose algebra's model constants (made
    try:  # with the spatial helpers, once per model) are then cached before the check below
        expected = sd.inverse_dynamics(model, q, qd, qdd, algebra="dq")
    finally:
        sd.execution.use_native(previous)

    def forbidden(*args, **kwargs):
        raise AssertionError("a spatial helper ran inside the dual-quaternion recursion")

    original = dualquat.force_congruence
    try:
        dualquat.force_congruence = forbidden
        alg = sd.dynamics._Call(model, "dq", entries=True, q=q).alg
        X, S, xi, xidot, zeta = dq_newton_euler.forward(alg, model, q[:, None], qd[:, None],
                                                     qdd[:, None], alg.twist(
                                                         np.array([0, 0, 9.81, 0, 0, 0.])[:, None]))
        tau = dq_newton_euler.backward(alg, model, X, S, zeta, qd[:, None], qdd[:, None])[0]
    finally:
        dualquat.force_congruence = original
    np.testing.assert_allclose(np.asarray(tau)[:, 0], expected, rtol=1e-12, atol=1e-12)


# -- DQ Robotics as a reference ----------------------------------------------------------------------
def test_products_agree_with_dq_robotics():
    dqr = pytest.importorskip("dqrobotics")
    x, _ = _poses()
    a, b = RNG.normal(size=(2, B, 6))
    for k in range(3):
        X = dqr.DQ(x[k])
        A, Bq = (dqr.DQ(dq.embed(h[k])) for h in (a, b))
        np.testing.assert_allclose(dqr.vec8(X * A), dq.mul(x[k], dq.embed(a[k])), atol=1e-14)
        np.testing.assert_allclose(dqr.vec8(dqr.Ad(X, A)), dq.embed(dq.Ad(x[k], a[k])),
                                   atol=1e-14)
        np.testing.assert_allclose(dqr.vec8(dqr.cross(A, Bq)), dq.embed(dq.cross(a[k], b[k])),
                                   atol=1e-14)
        dot = dqr.vec8(dqr.dot(A, Bq))  # a dual number: primary and dual scalar parts
        np.testing.assert_allclose([dot[0], dot[4]], dq.dot(a[k], b[k]), atol=1e-14)


def test_exp_and_log_against_dq_robotics_decoupled_convention():
    """DQ Robotics' exp(a + eps b) = exp(a) + eps b exp(a) (rotation, then translation 2b) is
    the screw exponential only when b is parallel to a; its log has the same primary part and
    half the translation as dual part. Each exp inverts its own log."""
    dqr = pytest.importorskip("dqrobotics")
    rng = np.random.default_rng(11)
    for _ in range(3):
        a, b = rng.normal(size=(2, 3)) * 0.5
        h = np.concatenate([a, b])
        theirs = dqr.vec8(dqr.exp(dqr.DQ(dq.embed(h))))
        r = np.concatenate([[np.cos(np.linalg.norm(a))], np.sin(np.linalg.norm(a)) * a /
                            np.linalg.norm(a)])
        np.testing.assert_allclose(theirs[:4], r, atol=1e-14)  # the rotation exp(a)
        np.testing.assert_allclose(theirs[:4], dq.exp(h)[:4], atol=1e-14)  # same primary part
        assert np.abs(theirs[4:] - dq.exp(h)[4:]).max() > 1e-3  # different translations
        parallel = np.concatenate([a, 0.7 * a])  # b parallel to a: the two agree
        np.testing.assert_allclose(dqr.vec8(dqr.exp(dqr.DQ(dq.embed(parallel)))),
                                   dq.exp(parallel), atol=1e-14)
        x = dq.exp(h)
        T = dq.to_matrix(x)
        log_theirs = dqr.vec8(dqr.log(dqr.DQ(x)))
        np.testing.assert_allclose(log_theirs[1:4], dq.log(x)[:3], atol=1e-13)
        np.testing.assert_allclose(log_theirs[5:8], T[:3, 3] / 2, atol=1e-13)
        np.testing.assert_allclose(dqr.vec8(dqr.exp(dqr.log(dqr.DQ(x)))), x, atol=1e-13)
        np.testing.assert_allclose(dq.exp(dq.log(x)), x, atol=1e-13)
