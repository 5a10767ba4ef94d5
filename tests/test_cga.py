"""Conformal geometric algebra (``algebra="cga"`` and ``screwdyn.algebra.cga_types``): the
multiplication table and the algebra's identities, the inertia tensor (eqs. 15-19), the CGA
recursions against the spatial algebra on every example-robot-data URDF, bundled robot and random
tree, pygafro's own bindings as a reference, JAX, and bad input."""
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.algebra import _cga_products, get_algebra
from screwdyn.algebra import cga_types as cga
from screwdyn.algorithms import kinematics
from screwdyn.model import robots
from conftest import erd_urdfs, random_state, random_tree

ODD_GRAVITY = (0.3, -4.0, -8.5)
REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_cga_products", REPO / "tools" / "generate_cga_products.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


def rel_err(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-300)


def random_motor(rng, shape=()):
    return cga.exp(cga.Twist(rng.normal(size=tuple(shape) + (6,))))


def random_inertia(rng):
    a = rng.uniform(0.01, 0.1, size=3)
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return Q @ np.diag([a[1] + a[2], a[0] + a[2], a[0] + a[1]]) @ Q.T


# -- the generated products and the multiplication table -----------------------------------------
def test_generated_products_are_up_to_date():
    assert GENERATOR.generate() == Path(_cga_products.__file__).read_text(), \
        "run python tools/generate_cga_products.py"


def test_multiplication_table_has_the_conformal_metric():
    gp, b = GENERATOR.geometric_product, GENERATOR.blade
    assert gp(b("e0"), b("e0")) == {} and gp(b("ei"), b("ei")) == {}
    assert gp(b("e0"), b("ei")) == {(): -1, ("0", "i"): 1}  # e0 . ei = -1, e0 ^ ei = e0i
    assert gp(b("ei"), b("e0")) == {(): -1, ("0", "i"): -1}
    assert gp(b("e1"), b("e1")) == {(): 1} and gp(b("e23"), b("e23")) == {(): -1}
    assert gp(b("e123i"), b("e123i")) == {}  # the pseudoscalar of infinity is null


def test_multiplication_table_agrees_with_pygafro_blade_by_blade():
    g = pytest.importorskip("pygafro")
    names = [n for n in GENERATOR.TYPES["EvenMultivector"] if n != "1"] + [
        "e0", "e1", "e2", "e3", "ei", "e123", "e012", "e013", "e023", "e12i", "e13i", "e23i",
        "e01i", "e02i", "e03i", "e0123i"]
    for a in names:
        for b in names:
            ours = {GENERATOR._name_of(k): c for k, c in
                    GENERATOR.geometric_product(GENERATOR.blade(a), GENERATOR.blade(b)).items()}
            assert _gafro_dict(_gafro_blade(g, a) * _gafro_blade(g, b)) == ours, (a, b)


def _gafro_blade(g, name):
    return getattr(g, f"Multivector_{name}")([1.0])


def _gafro_dict(mv):
    out = {}
    for bits, c in zip(mv.blades(), mv.vector()):
        if c:
            name = "".join(v for k, v in enumerate("0123i") if bits >> k & 1)
            out["e" + name if name else "1"] = c
    return out


@pytest.mark.parametrize("key", sorted(_cga_products.PRODUCTS))
def test_every_generated_product_equals_the_table(key):
    """Each closed-form kernel against the product summed blade by blade from the table."""
    op, left, right = key
    kernel, result, blades = _cga_products.PRODUCTS[key]
    rng = np.random.default_rng(sorted(_cga_products.PRODUCTS).index(key))
    a = dict(zip(GENERATOR.TYPES[left], rng.normal(size=(8, 3))))
    b = dict(zip(GENERATOR.TYPES[right], rng.normal(size=(8, 3))))
    expected = _table_product(a, b, GENERATOR.PRODUCTS[op])
    got = kernel(list(a.values()), list(b.values()))
    got = {"1": got} if result == "scalar" else dict(zip(blades, got))
    assert set(got) == {k for k, v in expected.items() if np.any(v)}
    for name, value in got.items():
        np.testing.assert_allclose(value, expected[name], rtol=0, atol=1e-13)


# -- the algebra ---------------------------------------------------------------------------------
def test_geometric_product_is_associative_on_motors_and_twists():
    rng = np.random.default_rng(0)
    A, B, C = (random_motor(rng, (5,)) for _ in range(3))
    U, V = cga.Twist(rng.normal(size=(5, 6))), cga.Twist(rng.normal(size=(5, 6)))
    for x, y, z in ((A, B, C), (A, U, B), (U, V, A), (U, V, U), (A, U, V)):
        np.testing.assert_allclose(((x * y) * z).coefficients, (x * (y * z)).coefficients,
                                   rtol=0, atol=1e-12)


def test_motor_product_is_the_product_of_homogeneous_matrices():
    rng = np.random.default_rng(1)
    A, B = random_motor(rng, (4, 3)), random_motor(rng, (3,))
    np.testing.assert_allclose((A * B).matrix(), A.matrix() @ B.matrix(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(A.inverse().matrix(), np.linalg.inv(A.matrix()), rtol=0, atol=1e-12)
    T = A.matrix()
    np.testing.assert_allclose(cga.Motor.from_matrix(T).matrix(), T, rtol=0, atol=1e-12)
    for axis, angle in (([0, 0, 1], np.pi / 2), ([1, 0, 0], 0.3), ([0, 1, 0], -2.0)):
        R = cga.rotor(axis, angle).matrix()[:3, :3]  # right-handed rotations (Rodrigues)
        K = np.cross(np.eye(3), axis)
        np.testing.assert_allclose(R, np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K,
                                   rtol=0, atol=1e-15)
    np.testing.assert_allclose(cga.translator([1, 2, 3]).matrix()[:3, 3], [1, 2, 3], atol=1e-15)


def test_exp_is_the_exponential_series_and_log_inverts_it():
    rng = np.random.default_rng(2)
    B = cga.Twist(0.7 * rng.normal(size=6))
    series, term = cga.Motor.identity(), cga.Motor.identity()
    for k in range(1, 30):
        term = term * B / k
        series = series + term
    np.testing.assert_allclose(cga.exp(B).coefficients, series.coefficients, rtol=0, atol=1e-14)
    for scale in (1.5, 1e-3, 1e-9, 0.0):  # down to the series branch and pure translations
        b = rng.normal(size=(7, 6))
        b[:, :3] *= scale * rng.uniform(0, 1, (7, 1)) / np.linalg.norm(b[:, :3], axis=1)[:, None]
        B = cga.Twist(b)  # rotation angle |B_rotation| <= 1.5 < pi / 2: log's principal branch
        np.testing.assert_allclose(cga.log(cga.exp(B)).coefficients, B.coefficients,
                                   rtol=0, atol=1e-12)
    M = random_motor(rng, (50,))
    back = cga.exp(M.log())
    sign = np.sign(M["1"] * back["1"])[:, None]
    np.testing.assert_allclose(back.coefficients * sign, M.coefficients, rtol=0, atol=1e-12)


def test_exp_of_a_twist_is_pinocchios_se3_exponential():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(3)
    for scale in (2.0, 1e-6, 0.0):
        v = scale * rng.normal(size=6)
        v[:3] += rng.normal(size=3)
        M = cga.exp(-cga.Twist.from_vector(v) / 2)  # a frame moving with the body twist v
        np.testing.assert_allclose(M.matrix(), pin.exp6(pin.Motion(v)).homogeneous, atol=1e-14)


def test_sandwich_preserves_grade_and_is_the_adjoint():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(4)
    M = random_motor(rng)
    V, W = cga.Twist(rng.normal(size=6)), cga.Wrench(rng.normal(size=6))
    full = M * V * ~M  # the geometric products, with every component they produce
    assert abs(full["1"]) < 1e-14 and abs(full["e123i"]) < 1e-14
    np.testing.assert_allclose(full.project(cga.Twist).coefficients, M.apply(V).coefficients,
                               atol=1e-14)
    # a wrench goes to a bivector (also on e1i, e2i, e3i, e0i) whose wrench part is M.apply(W)
    full_w = _table_product(_table_product(_as_dict(M), _as_dict(W)), _as_dict(~M))
    assert all(abs(c) < 1e-13 for b, c in full_w.items() if b not in cga.Bivector.blades)
    np.testing.assert_allclose([full_w.get(b, 0) for b in cga.Wrench.blades],
                               M.apply(W).coefficients, atol=1e-13)
    X = pin.SE3(M.matrix())
    np.testing.assert_allclose(M.apply(V).vector(), X.act(pin.Motion(V.vector())).vector,
                               atol=1e-13)
    np.testing.assert_allclose(M.apply(W).vector(), X.act(pin.Force(W.vector())).vector,
                               atol=1e-13)


def _as_dict(x):
    return dict(zip(x.blades, x.coefficients))


def _table_product(x, y, product=GENERATOR.geometric_product):
    """The product of {blade: coefficient} multivectors, summed blade by blade from the table
    (no generated kernel)."""
    out = {}
    for a, ca in x.items():
        for b, cb in y.items():
            for k, c in product(GENERATOR.blade(a), GENERATOR.blade(b)).items():
                name = GENERATOR._name_of(k)
                out[name] = out.get(name, 0.0) + float(c) * ca * cb
    return out


def test_six_vector_mapping_brackets_and_power():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(5)
    v, m, f = rng.normal(size=(3, 4, 6))
    np.testing.assert_array_equal(cga.Twist.from_vector(v).vector(), v)
    np.testing.assert_array_equal(cga.Wrench.from_vector(f).vector(), f)
    about_z, about_y = cga.Twist.from_vector([0, 0, 0, 0, 0, 1]), cga.Twist.from_vector(
        [0, 0, 0, 0, 1, 0])
    assert about_z["e12"] == 1 and about_y["e13"] == -1  # the documented signs
    V, Mv, F = cga.Twist.from_vector(v), cga.Twist.from_vector(m), cga.Wrench.from_vector(f)
    np.testing.assert_allclose(-(V | F), (v * f).sum(-1), atol=1e-14)  # eq. 9
    for k in range(4):
        crm = pin.Motion(v[k]).cross(pin.Motion(m[k])).vector
        crf = pin.Motion(v[k]).cross(pin.Force(f[k])).vector
        np.testing.assert_allclose(Mv[k].commutator(V[k]).vector(), crm, atol=1e-14)
        np.testing.assert_allclose(-V[k].commutator(F[k]).project(cga.Wrench).vector(), crf,
                                   atol=1e-14)
    alg = get_algebra("cga")
    np.testing.assert_array_equal(alg.twist(v.T), V.coefficients.T)
    np.testing.assert_array_equal(alg.wrench_vector(alg.wrench(f.T)), f.T)


# -- the inertia tensor (eqs. 12-19) ---------------------------------------------------------------
def test_inertia_tensor_elements_are_eq_18():
    I3 = np.array([[1.0, 0.1, 0.2], [0.1, 2.0, 0.3], [0.2, 0.3, 3.0]])
    I = cga.InertiaTensor.from_mass(4.0, inertia=I3)
    (ixx, ixy, ixz), (_, iyy, iyz), (_, _, izz) = I3
    assert np.allclose(I["e23"].coefficients, [ixx, -ixy, ixz, 0, 0, 0])
    assert np.allclose(I["e13"].coefficients, [-ixy, iyy, -iyz, 0, 0, 0])
    assert np.allclose(I["e12"].coefficients, [ixz, -iyz, izz, 0, 0, 0])
    for k, blade in enumerate(("e01", "e02", "e03")):
        assert np.allclose(I[blade].coefficients, 4.0 * np.eye(6)[3 + k])


def test_inertia_tensor_is_the_spatial_inertia_in_any_frame():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(6)
    for _ in range(5):
        mass, com, I3 = rng.uniform(0.5, 3), rng.normal(size=3), random_inertia(rng)
        R = pin.Quaternion(*(lambda q: q / np.linalg.norm(q))(rng.normal(size=4))).matrix()
        I = cga.InertiaTensor.from_mass(mass, com, I3, rotation=R)  # eq. 19, rotated frame
        reference = pin.Inertia(mass, com, R @ I3 @ R.T)
        np.testing.assert_allclose(I.matrix(), reference.matrix(), atol=1e-13)
        v = rng.normal(size=6)
        np.testing.assert_allclose(I(cga.Twist.from_vector(v)).vector(), reference.matrix() @ v,
                                   atol=1e-13)  # eq. 15
        M = random_motor(rng)
        np.testing.assert_allclose(M.apply(I).matrix(),  # eq. 16
                                   pin.SE3(M.matrix()).act(reference).matrix(), atol=1e-12)


def test_equivariance_eq_17_on_random_batches():
    rng = np.random.default_rng(7)
    for trial in range(10):
        M = random_motor(rng, (16,))
        I = cga.InertiaTensor.from_mass(rng.uniform(0.1, 5, 16), rng.normal(size=(16, 3)),
                                        np.stack([random_inertia(rng) for _ in range(16)]))
        V = cga.Twist(rng.normal(size=(16, 6)))
        np.testing.assert_allclose(M.apply(I(V)).coefficients, M.apply(I)(M.apply(V)).coefficients,
                                   rtol=0, atol=1e-12 * (1 + np.abs(I(V).coefficients).max()))


# -- the CGA recursions against the spatial algebra ------------------------------------------------
def _models():
    out = [pytest.param(("robot", name), id=name) for name in robots.names()]
    out += [pytest.param(("tree", seed, fb), id=f"random_tree{seed}{'_floating' if fb else ''}")
            for seed in range(4) for fb in (False, True)]
    for path in erd_urdfs():
        name = path.split("robots/")[-1]
        out += [pytest.param(("urdf", path, fb), id=name + ("_floating" if fb else ""))
                for fb in (False, True)]
    return out


def _load(spec):
    if spec[0] == "robot":
        return robots.load(spec[1])
    if spec[0] == "tree":
        return random_tree(spec[1], floating_base=spec[2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        try:
            return sd.load_urdf(spec[1], floating_base=spec[2])
        except sd.ModelError as e:  # e.g. ur3.urdf, an empty xacro wrapper (see test_urdf.py)
            pytest.skip(f"screwdyn refuses this file: {e}")


@pytest.mark.parametrize("spec", _models())
def test_cga_dynamics_agree_with_the_spatial_algebra(spec):
    """ID, FD, M and forward kinematics through motors, batched, with external wrenches on every
    link and gravity in an odd direction, to 1e-10 relative. Forward dynamics solves M qdd = b,
    so where M is ill-conditioned (cond(M) > 1e5: iCub's is 5e8) rounding alone moves qdd by
    about cond(M) * 1e-16 in any algebra: there the bound grows with cond(M), and on every model
    CGA's accelerations reproduce the joint forces through the spatial RNEA to 1e-10."""
    model = _load(spec)
    if model.nv == 0:
        pytest.skip("no degrees of freedom")
    q, qd, qdd = random_state(model, 11, (2, 2))
    f_ext = np.random.default_rng(12).normal(size=(2, 2, model.nlinks, 6))
    kw = dict(f_ext=f_ext, gravity=ODD_GRAVITY)
    tau = sd.inverse_dynamics(model, q, qd, qdd, **kw)
    assert rel_err(sd.inverse_dynamics(model, q, qd, qdd, algebra="cga", **kw), tau) < 1e-10
    assert rel_err(sd.mass_matrix(model, q, algebra="cga"), sd.mass_matrix(model, q)) < 1e-10
    alg = get_algebra("cga")
    poses = kinematics.link_poses(alg, model, kinematics.world_poses(
        alg, model, kinematics.joint_poses(alg, model, q.reshape(4, -1).T)))
    T = np.stack([alg.to_matrix(T_l) + np.zeros(4) for T_l in poses])
    assert rel_err(np.moveaxis(T, -1, 0).reshape(q.shape[:-1] + T.shape[:3]),
                   sd.forward_kinematics(model, q)) < 1e-10
    try:
        qdd_spatial = sd.forward_dynamics(model, q, qd, tau, **kw)
    except sd.ModelError:  # a massless moving subtree: CGA says so too, instead of NaN
        with pytest.raises(sd.ModelError, match="no mass"):
            sd.forward_dynamics(model, q, qd, tau, algebra="cga", **kw)
        return
    qdd_cga = sd.forward_dynamics(model, q, qd, tau, algebra="cga", **kw)
    conditioning = np.linalg.cond(sd.mass_matrix(model, q)).max()
    assert rel_err(qdd_cga, qdd_spatial) < 1e-10 * max(1.0, conditioning / 1e5)
    assert rel_err(sd.inverse_dynamics(model, q, qd, qdd_cga, **kw), tau) < 1e-10


def test_cga_runs_on_motors():
    """The CGA path computes with motors and bivectors: its poses are motors (8 components), its
    twists are bivectors whose e12 component is a rotation about z."""
    alg = get_algebra("cga")
    assert type(alg).__name__ == "CGA"
    X = alg.revolute((0.0, 0.0, 1.0), np.array([0.4]))
    assert len(X.motor) == 8 and np.isclose(X.motor[0], np.cos(0.2))
    assert np.isclose(X.motor[3], -np.sin(0.2))  # -sin(angle/2) e12
    S = alg.twist(np.array([0, 0, 0, 0, 0, 1.0])[:, None])
    assert S[2, 0] == 1 and np.count_nonzero(S) == 1


# -- pygafro's own bindings ------------------------------------------------------------------------
GAFRO_MOTOR = ("1", "e12", "e13", "e23", "e1i", "e2i", "e3i", "e123i")
GAFRO_TWIST = ("e12", "e13", "e23", "e1i", "e2i", "e3i")
GAFRO_WRENCH = ("e01", "e02", "e12", "e03", "e13", "e23")


def _to_gafro(x, order):
    return np.array([x[b] for b in order])


def _from_gafro(vector, order, cls):
    return cls(np.array([vector[order.index(b)] for b in cls.blades]))


def _gafro_panda(g, robot):
    """gafro's Panda (FrankaEmikaRobot) rebuilt from its own bindings: joint frames, axes,
    masses, centres of mass (translators) and inertia tensors (gafro's blade order). ``robot``
    must outlive the system the bindings hand out."""
    system = robot.getSystem()
    builder = sd.ModelBuilder("gafro_panda")
    for link in system.getLinks():
        T = link.getInertia().getTensor()  # rows and columns e01, e02, e12, e03, e13, e23
        I3 = np.array([[T[5, 5], -T[5, 4], T[5, 2]], [-T[5, 4], T[4, 4], -T[4, 2]],
                       [T[5, 2], -T[4, 2], T[2, 2]]])  # eq. 18 read backwards
        builder.add_link(link.getName(), mass=link.getMass(),
                         com=-2 * link.getCenterOfMass().vector()[1:], inertia=I3)
    kinds = {g.Joint.Type.REVOLUTE: "revolute", g.Joint.Type.FIXED: "fixed",
             g.Joint.Type.PRISMATIC: "fixed"}  # gafro's 7-dof chain keeps the fingers still
    seen = set()
    for joint in system.getJoints():  # the binding lists some joints more than once
        if joint.getName() in seen:
            continue
        seen.add(joint.getName())
        H = joint.getFrame().toTransformationMatrix()
        kind = kinds[joint.getType()]
        axis = (0.0, 0.0, 1.0)
        if kind == "revolute":
            b12, b13, b23 = joint.getAxis().vector()  # rotor generator e12, e13, e23
            axis = (b23, -b13, b12)
        builder.add_joint(joint.getName(), kind, joint.getParentLink().getName(),
                          joint.getChildLink().getName(), xyz=H[:3, 3], rotation=H[:3, :3],
                          axis=axis)
    return builder.build()


def test_dynamics_agree_with_pygafro_on_its_panda():
    g = pytest.importorskip("pygafro")
    robot = g.FrankaEmikaRobot()
    model = _gafro_panda(g, robot)
    rng = np.random.default_rng(13)
    q, qd, qdd = rng.uniform(-2, 2, (3, 8, 7))
    tau = sd.inverse_dynamics(model, q, qd, qdd, algebra="cga")
    qdd_cga = sd.forward_dynamics(model, q, qd, tau, algebra="cga")
    M = sd.mass_matrix(model, q, algebra="cga")
    for k in range(8):  # the bindings take one state at a time; gravity 9.81 along -z
        assert rel_err(tau[k], np.ravel(robot.getJointTorques(q[k], qd[k], qdd[k]))) < 1e-9
        reference = robot.getJointAccelerations(q[k], qd[k], tau[k])
        assert rel_err(qdd_cga[k], np.ravel(reference)) < 1e-9
        assert rel_err(M[k], robot.getMassMatrix(list(q[k]))) < 1e-9


def test_single_operations_agree_with_pygafro():
    """Blade names mean the same in gafro and here, so the mapping is a permutation by name."""
    g = pytest.importorskip("pygafro")
    rng = np.random.default_rng(14)
    A, B = random_motor(rng), random_motor(rng)
    V, W = cga.Twist(rng.normal(size=6)), cga.Wrench(rng.normal(size=6))
    gA, gB = g.Motor(_to_gafro(A, GAFRO_MOTOR)), g.Motor(_to_gafro(B, GAFRO_MOTOR))
    gV, gW = g.Twist(_to_gafro(V, GAFRO_TWIST)), g.Wrench(_to_gafro(W, GAFRO_WRENCH))
    product = _from_gafro((gA * gB).vector(), GAFRO_MOTOR, cga.Motor)
    np.testing.assert_allclose(product.coefficients, (A * B).coefficients, atol=1e-14)
    np.testing.assert_allclose(_from_gafro(gV.transform(gA).vector(), GAFRO_TWIST, cga.Twist)
                               .coefficients, A.apply(V).coefficients, atol=1e-14)
    np.testing.assert_allclose(_from_gafro(gW.transform(gA).vector(), GAFRO_WRENCH, cga.Wrench)
                               .coefficients, A.apply(W).coefficients, atol=1e-14)
    commutator, ours = _gafro_dict(gV.commute(gW)), _as_dict(V.commutator(W))
    for blade in set(commutator) | set(ours):  # gafro keeps the cancelled blades, at ~1e-17
        assert abs(commutator.get(blade, 0.0) - ours.get(blade, 0.0)) < 1e-14, blade
    mass, I3 = 1.7, random_inertia(rng)
    gI, I = g.Inertia(mass, I3), cga.InertiaTensor.from_mass(mass, inertia=I3)
    for gI_, I_ in ((gI, I), (gI.transform(gA), A.apply(I))):  # eq. 18, then eq. 16
        elements = {"e01": gI_.getElement01(), "e02": gI_.getElement02(),
                    "e03": gI_.getElement03(), "e12": gI_.getElement12(),
                    "e13": gI_.getElement13(), "e23": gI_.getElement23()}
        for blade, element in elements.items():
            np.testing.assert_allclose(_from_gafro(element.vector(), GAFRO_WRENCH, cga.Wrench)
                                       .coefficients, I_[blade].coefficients, atol=1e-14)


# -- JAX -------------------------------------------------------------------------------------------
def test_jax_jit_of_cga_dynamics_and_objects_equals_numpy():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    floating = random_tree(3, n=4, floating_base=True)  # small models: XLA compiles quickly
    q, qd, qdd = random_state(floating, 15, (5,))
    tau = jax.jit(lambda *a: sd.inverse_dynamics(floating, *a, algebra="cga"))(q, qd, qdd)
    assert rel_err(tau, sd.inverse_dynamics(floating, q, qd, qdd)) < 1e-12
    chain = random_tree(4, n=3)  # revolute, continuous and prismatic joints
    q, qd, qdd = random_state(chain, 16, (5,))
    tau = sd.inverse_dynamics(chain, q, qd, qdd, gravity=ODD_GRAVITY)
    forward = jax.jit(lambda *a: sd.forward_dynamics(chain, *a, gravity=ODD_GRAVITY,
                                                     algebra="cga"))
    assert rel_err(forward(q, qd, tau), qdd) < 1e-10
    rng = np.random.default_rng(16)
    M, V = random_motor(rng, (3,)), cga.Twist(rng.normal(size=(3, 6)))
    moved = jax.jit(lambda M, V: M.apply(cga.exp(V)) * M)(M, V)
    assert isinstance(moved, cga.Motor)
    np.testing.assert_allclose(moved.coefficients, (M.apply(cga.exp(V)) * M).coefficients,
                               atol=1e-13)
    grad = jax.grad(lambda c: cga.exp(cga.Twist(c)).matrix()[0, 3].sum())(np.zeros(6))
    assert np.all(np.isfinite(grad))  # the series branch at zero rotation is differentiable


# -- bad input -------------------------------------------------------------------------------------
def test_bad_input_raises_clear_value_errors():
    rng = np.random.default_rng(17)
    V, W, M = cga.Twist(rng.normal(size=6)), cga.Wrench(rng.normal(size=6)), random_motor(rng)
    not_unit = cga.Motor(2 * M.coefficients)
    for use in (lambda: not_unit.apply(V), lambda: not_unit.matrix(), lambda: not_unit.log(),
                lambda: not_unit.inverse()):
        with pytest.raises(ValueError, match="needs a unit motor"):
            use()
    with pytest.raises(ValueError, match=r"a Twist has 6 components .* got shape \(8,\)"):
        cga.Twist(M.coefficients)
    with pytest.raises(ValueError, match="exp takes a Twist"):
        cga.exp(W)
    with pytest.raises(ValueError, match="maps a Twist to a Wrench, not a Wrench"):
        cga.InertiaTensor.from_mass(1.0)(W)
    with pytest.raises(ValueError, match="not a Twist: it has nonzero components on e01"):
        (V.commutator(W)).cast(cga.Twist)
    with pytest.raises(ValueError, match="applies to a Twist, Wrench, Motor or InertiaTensor"):
        M.apply(V.commutator(W))
    with pytest.raises(ValueError, match=r"batch shapes do not broadcast: Motor \(3,\) and "
                                         r"Twist \(4,\)"):
        random_motor(rng, (3,)).apply(cga.Twist(rng.normal(size=(4, 6))))
    with pytest.raises(ValueError, match="not a rigid motion"):
        cga.Motor.from_matrix(np.diag([1.0, 2.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="unit vector"):
        cga.rotor([0, 0, 2.0], 0.1)
    with pytest.raises(ValueError, match="real numeric"):
        cga.Twist(["a"] * 6)
    with pytest.raises(ValueError, match="symmetric"):
        cga.InertiaTensor.from_mass(1.0, inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match="shape"):
        cga.Wrench.from_vector(np.zeros(5))
    with pytest.raises(TypeError, match="not generated"):
        V * V.commutator(W)


def test_massless_subtree_gives_a_clear_error_not_nan():
    b = sd.ModelBuilder("massless_tip")
    b.add_link("base").add_link("arm", mass=1.0, com=(0.5, 0, 0), inertia=np.eye(3) * 0.01)
    b.add_link("tip")  # no mass, no inertia
    b.add_joint("shoulder", "revolute", "base", "arm", axis=(0, 0, 1))
    b.add_joint("wrist", "revolute", "arm", "tip", xyz=(1, 0, 0), axis=(0, 0, 1))
    model = b.build()
    with pytest.raises(sd.ModelError, match="'wrist' moves a subtree with no mass"):
        sd.forward_dynamics(model, [0.1, 0.2], [0.0, 0.0], [0.0, 0.0], algebra="cga")
    assert np.all(np.isfinite(sd.inverse_dynamics(model, [0.1, 0.2], [1, 2], [3, 4],
                                                  algebra="cga")))


# -- the public API of the paper's objects: adjoint matrices, articulated and inverse inertia ------
def _blade_map():
    """P with Twist/Wrench coefficients = P @ the public 6-vector (gafro's signs)."""
    from screwdyn.algebra.cga import _FROM_VECTOR

    P = np.zeros((6, 6))
    for row, (k, sign) in enumerate(_FROM_VECTOR):
        P[row, k] = sign
    return P


def test_adjoint_matrices_are_pinocchios_action_matrices():
    """Motor.adjoint/coadjoint are SE3.action/dualAction, Twist.ad/coad are Motion.action/
    dualAction (crm and crf), in blade coordinates; batched, and Ad M V = M V ~M."""
    pin = pytest.importorskip("pinocchio")
    P = _blade_map()
    rng = np.random.default_rng(7)
    for _ in range(3):
        T = pin.SE3.Random()
        M = cga.Motor.from_matrix(T.homogeneous)
        np.testing.assert_allclose(P.T @ M.adjoint() @ P, T.toActionMatrix(), atol=1e-14)
        np.testing.assert_allclose(P.T @ M.coadjoint() @ P, T.toDualActionMatrix(), atol=1e-14)
        v = rng.normal(size=6)
        V = cga.Twist.from_vector(v)
        np.testing.assert_allclose(P.T @ V.ad() @ P, pin.Motion(v).action, atol=1e-14)
        np.testing.assert_allclose(P.T @ V.coad() @ P, pin.Motion(v).dualAction, atol=1e-14)
    Ms = random_motor(rng, (4,))
    Vs = cga.Twist(rng.normal(size=(4, 6)))
    assert Ms.adjoint().shape == (4, 6, 6)
    np.testing.assert_allclose(np.einsum("bij,bj->bi", Ms.adjoint(), Vs.coefficients),
                               Ms.apply(Vs).coefficients, atol=1e-13)
    W = cga.Wrench(rng.normal(size=6))  # the pairing: coad is -ad^T, Ad* is Ad^-T
    np.testing.assert_allclose(Vs[0].coad(), -Vs[0].ad().T, atol=1e-15)
    np.testing.assert_allclose(Ms[0].coadjoint(), np.linalg.inv(Ms[0].adjoint()).T, atol=1e-13)
    assert W.shape == ()


def test_articulated_inertia_is_pinocchios_and_transmits_no_force_along_the_axis():
    """Leaf to root on a real UR5, the paper's articulated-body inertia, with this API only:
    IA = I + sum M * Ia_child, Ia = IA.articulated(S); each Ia equals Pinocchio's (data.Yaba
    after aba holds Ia for every joint but the first) and Ia[S] = 0."""
    pin = pytest.importorskip("pinocchio")
    from conftest import erd_urdf

    P = _blade_map()
    model = pin.buildModelFromUrdf(erd_urdf("ur_description/urdf/ur5_robot.urdf"))
    data = model.createData()
    q = pin.randomConfiguration(model)
    pin.aba(model, data, q, np.zeros(model.nv), np.zeros(model.nv))
    n = model.njoints - 1
    IA = cga.InertiaTensor(P @ model.inertias[n].matrix() @ P.T)
    for j in range(n, 1, -1):
        S = cga.Twist.from_vector(np.asarray(data.joints[j].S).reshape(-1))
        Ia = IA.articulated(S)
        np.testing.assert_allclose(Ia.matrix(), data.Yaba[j], atol=1e-12)
        assert np.abs(Ia(S).coefficients).max() < 1e-12
        M = cga.Motor.from_matrix(data.liMi[j].homogeneous)
        IA = cga.InertiaTensor(P @ model.inertias[j - 1].matrix() @ P.T) + M.apply(Ia)
    two = IA.articulated([cga.Twist.from_vector(e) for e in np.eye(6)[[3, 4]]])  # two axes
    assert np.abs(two(cga.Twist.from_vector(np.eye(6)[4])).coefficients).max() < 1e-12
    with pytest.raises(ValueError, match="axis as a Twist"):
        IA.articulated(cga.Wrench(np.zeros(6)))


def test_inverse_inertia_map():
    rng = np.random.default_rng(8)
    I = cga.InertiaTensor.from_mass(rng.uniform(1, 3, 5), com=rng.normal(size=(5, 3)) * 0.1,
                                    inertia=np.diag([0.02, 0.03, 0.04]))
    W = cga.Wrench.from_vector(rng.normal(size=(5, 6)))
    V = I.inverse()(W)
    assert isinstance(V, cga.Twist) and V.shape == (5,)
    np.testing.assert_allclose(I(V).coefficients, W.coefficients, atol=1e-12)
    np.testing.assert_allclose(I.inverse().matrix(), np.linalg.inv(I.matrix()), atol=1e-10)
    with pytest.raises(ValueError, match="singular"):
        cga.InertiaTensor.from_mass(0.0).inverse()
    with pytest.raises(ValueError, match="maps a Wrench to a Twist"):
        I.inverse()(V)
