"""Denavit-Hartenberg models and the DH-frame Newton-Euler recursion (``algebra="vector"``).

References: the shared spatial recursions (RNEA, CRBA, ABA), Robotics Toolbox for Python (RTB)
``DHRobot`` (``rne``, ``inertia``, ``gravload``, ``accel``, ``fkine_all``) and a closed-form
pendulum. RTB's gravity argument is the gravitational acceleration, as ours; its ``fext`` is the
wrench the end effector exerts on the environment, in the last DH frame (the negative of our
``f_ext`` on ``link{n}``); its ``rne`` adds the motor inertia G^2 Jm qdd (our ``armature``) and
friction, which the comparisons switch off on RTB's side with ``nofriction`` unless they test it.
"""
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.errors import InertiaWarning, ModelError
from screwdyn.model import robots
from screwdyn.model.dh import DHLink, from_dh, load_dh_table, parse_dh_table, save_dh_table

TOL_SPATIAL = 1e-10
TOL_RTB = 1e-9
GRAVITY = np.array([1.7, -3.2, -8.9])  # an odd direction


def rel_err(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


@pytest.fixture(scope="module")
def rtb():
    """Robotics Toolbox for Python, imported once for this module."""
    return pytest.importorskip("roboticstoolbox")


def port(robot, armature=True):
    """DHLinks from an RTB DHRobot's link attributes (the porting recipe in docs/dh.md)."""
    return [DHLink(a=L.a, alpha=L.alpha, d=L.d, offset=L.offset,
                   theta=L.theta if L.isprismatic else 0.0,
                   joint="prismatic" if L.isprismatic else "revolute", mass=L.m, com=L.r,
                   inertia=L.I, armature=L.Jm * L.G**2 if armature else 0.0)
            for L in robot.links]


def quiet_from_dh(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertiaWarning)
        return from_dh(*args, **kwargs)


def random_dh_links(seed, n=5):
    """A random serial arm with revolute and prismatic joints and full inertias."""
    rng = np.random.default_rng(seed)
    links = []
    for i in range(n):
        rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        second_moments = rng.uniform(0.005, 0.05, 3)  # of a real mass distribution
        inertia = rotation @ np.diag(second_moments.sum() - second_moments) @ rotation.T
        prismatic = i in (1, 3)
        links.append(DHLink(a=rng.normal(0, 0.3), alpha=rng.uniform(-np.pi, np.pi),
                            d=0.0 if prismatic else rng.normal(0, 0.3),
                            theta=rng.uniform(-np.pi, np.pi) if prismatic else 0.0,
                            offset=rng.normal(0, 0.3), mass=rng.uniform(0.5, 3),
                            joint="prismatic" if prismatic else "revolute",
                            com=rng.normal(0, 0.2, 3), inertia=inertia,
                            armature=rng.uniform(0, 0.2), damping=rng.uniform(0, 0.5)))
    return links


def states(model, shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-np.pi, np.pi, shape + (model.nq,)), rng.normal(size=shape + (model.nv,)),
            rng.normal(size=shape + (model.nv,)))


DH_MODELS = {
    "puma560": lambda: robots.load("puma560"),
    "stanford": lambda: robots.load("stanford"),
    "random_standard": lambda: from_dh(random_dh_links(1), "standard"),
    "random_modified": lambda: from_dh(random_dh_links(2), "modified"),
}


# -- the vector recursion against the spatial one ----------------------------------------------
@pytest.mark.parametrize("name", DH_MODELS)
def test_vector_matches_spatial(name):
    model = DH_MODELS[name]()
    if name in ("puma560", "stanford"):  # armature is on; add damping too
        model = model.with_joint_parameters(damping=0.3)
    q, qd, qdd = states(model, (2, 3), seed=7)
    f_ext = np.random.default_rng(8).normal(size=(2, 3, model.nlinks, 6))
    for kwargs in ({}, {"gravity": GRAVITY}, {"gravity": GRAVITY, "f_ext": f_ext}):
        tau = sd.inverse_dynamics(model, q, qd, qdd, **kwargs)
        tau_v = sd.inverse_dynamics(model, q, qd, qdd, algebra="vector", **kwargs)
        assert tau_v.shape == (2, 3, model.nv)
        assert rel_err(tau_v, tau) < TOL_SPATIAL
        a = sd.forward_dynamics(model, q, qd, tau, **kwargs)
        a_v = sd.forward_dynamics(model, q, qd, tau, algebra="vector", **kwargs)
        assert rel_err(a_v, a) < TOL_SPATIAL
        assert rel_err(a_v, qdd) < 1e-8  # FD(ID(qdd)) = qdd
    M, M_v = sd.mass_matrix(model, q), sd.mass_matrix(model, q, algebra="vector")
    assert M_v.shape == (2, 3, model.nv, model.nv)
    assert rel_err(M_v, M) < TOL_SPATIAL
    assert rel_err(sd.gravity_torques(model, q, GRAVITY, algebra="vector"),
                   sd.gravity_torques(model, q, GRAVITY)) < TOL_SPATIAL
    assert rel_err(sd.bias_forces(model, q, qd, GRAVITY, algebra="vector"),
                   sd.bias_forces(model, q, qd, GRAVITY)) < TOL_SPATIAL


def test_vector_mass_matrix_has_no_gravity_or_velocity():
    """M columns are the recursion at qd = 0 and gravity off: M qdd = ID(qdd) - ID(0)."""
    model = from_dh(random_dh_links(3), "standard")
    q, qd, qdd = states(model, (4,), seed=3)
    M = sd.mass_matrix(model, q, algebra="vector")
    b = sd.bias_forces(model, q, qd, GRAVITY, algebra="vector")
    tau = sd.inverse_dynamics(model, q, qd, qdd, gravity=GRAVITY, algebra="vector")
    assert rel_err(np.einsum("kij,kj->ki", M, qdd) + b, tau) < 1e-12
    assert np.allclose(M, np.swapaxes(M, -1, -2), atol=1e-13)
    assert np.all(np.linalg.eigvalsh(M) > 0)


def test_vector_needs_a_dh_model():
    builder = sd.ModelBuilder("pendulum")
    builder.add_link("base")
    builder.add_link("rod", mass=1.0, com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.01]))
    builder.add_joint("hinge", "revolute", parent="base", child="rod", axis=(0, 1, 0))
    model = builder.build()
    with pytest.raises(ValueError, match="algebra='vector' needs a model made by from_dh"):
        sd.inverse_dynamics(model, [0.1], [0.0], [0.0], algebra="vector")
    with pytest.raises(ValueError, match="from_dh"):
        sd.mass_matrix(model, [0.1], algebra="vector")
    with pytest.raises(ValueError, match="from_dh"):
        sd.forward_dynamics(model, [0.1], [0.0], [0.0], algebra="vector")


def test_vector_under_jax():
    """jit and grad through the vector recursion (vmap and the rest are the shared dispatch)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    model = from_dh(random_dh_links(4, n=3), "standard")
    q, qd, qdd = states(model, (3,), seed=4)
    tau = jax.jit(lambda *a: sd.inverse_dynamics(model, *a, algebra="vector"))(q, qd, qdd)
    assert rel_err(np.asarray(tau), sd.inverse_dynamics(model, q, qd, qdd)) < TOL_SPATIAL
    first = jax.jit(jax.grad(lambda x: sd.inverse_dynamics(model, x, qd[0], qdd[0],
                                                           algebra="vector")[0]))
    h = 1e-6 * np.eye(model.nq)
    central = [(sd.inverse_dynamics(model, q[0] + e, qd[0], qdd[0])[0]
                - sd.inverse_dynamics(model, q[0] - e, qd[0], qdd[0])[0]) / 2e-6 for e in h]
    assert rel_err(np.asarray(first(q[0])), np.array(central)) < 1e-7


# -- against the Robotics Toolbox -------------------------------------------------------------
RTB_ROBOTS = {"puma560": "Puma560", "stanford": "Stanford"}


@pytest.mark.parametrize("name", RTB_ROBOTS)
def test_bundled_table_is_rtbs(rtb, name):
    """The bundled CSV holds RTB's parameters (armature = Jm G^2)."""
    reference = getattr(rtb.models.DH, RTB_ROBOTS[name])()
    model = robots.load(name)
    assert model.dh_convention == "standard" and len(model.dh) == reference.n
    for ours, theirs in zip(model.dh, port(reference)):
        for field in ("a", "alpha", "d", "theta", "offset", "mass", "com", "inertia", "armature"):
            assert np.allclose(getattr(ours, field), getattr(theirs, field), rtol=1e-12,
                               atol=1e-15), (name, field)
        assert ours.joint == theirs.joint


@pytest.mark.parametrize("name", RTB_ROBOTS)
@pytest.mark.parametrize("algebra", ["vector", "spatial"])
def test_against_rtb(rtb, name, algebra):
    reference = getattr(rtb.models.DH, RTB_ROBOTS[name])().nofriction(coulomb=True, viscous=True)
    model = robots.load(name)  # armature on, as RTB's rne
    q, qd, qdd = states(model, (4,), seed=11)
    if name == "stanford":
        q[:, 2] = np.abs(q[:, 2])  # a positive extension, as the arm's limits
    T = sd.forward_kinematics(model, q)
    frames = [model.link_index(f"link{i}") for i in range(model.nv + 1)]
    T_rtb = np.array([[pose.A for pose in reference.fkine_all(x)] for x in q])
    assert rel_err(T[:, frames], T_rtb) < TOL_RTB
    tau_rtb = reference.rne(q, qd, qdd, gravity=GRAVITY)
    assert rel_err(sd.inverse_dynamics(model, q, qd, qdd, gravity=GRAVITY, algebra=algebra),
                   tau_rtb) < TOL_RTB
    assert rel_err(sd.mass_matrix(model, q, algebra=algebra),
                   np.array([reference.inertia(x) for x in q])) < TOL_RTB
    assert rel_err(sd.gravity_torques(model, q, GRAVITY, algebra=algebra),
                   np.array([reference.gravload(x, gravity=GRAVITY) for x in q])) < TOL_RTB
    assert rel_err(sd.forward_dynamics(model, q, qd, tau_rtb, gravity=GRAVITY, algebra=algebra),
                   np.array([reference.accel(*x, gravity=GRAVITY) for x in zip(q, qd, tau_rtb)])
                   ) < TOL_RTB


@pytest.mark.parametrize("name", RTB_ROBOTS)
def test_against_rtb_without_armature(rtb, name):
    """Armature off on both sides (RTB: Jm = 0)."""
    q, qd, qdd = states(robots.load(name), (3,), seed=12)
    reference = getattr(rtb.models.DH, RTB_ROBOTS[name])().nofriction(coulomb=True, viscous=True)
    for link in reference.links:
        link.Jm = 0.0
    model = robots.load(name).with_joint_parameters(armature=0.0)
    for algebra in ("vector", "spatial"):
        assert rel_err(sd.inverse_dynamics(model, q, qd, qdd, gravity=GRAVITY, algebra=algebra),
                       reference.rne(q, qd, qdd, gravity=GRAVITY)) < TOL_RTB
        assert rel_err(sd.mass_matrix(model, q, algebra=algebra),
                       np.array([reference.inertia(x) for x in q])) < TOL_RTB


def test_viscous_friction_against_rtb(rtb):
    """RTB's Puma viscous friction B G^2 qd as our damping (RTB: Coulomb friction removed)."""
    reference = rtb.models.DH.Puma560().nofriction(coulomb=True, viscous=False)
    model = robots.load("puma560")
    damping = {joint: L.B * L.G**2 for joint, L in zip(model.joint_names, reference.links)}
    assert all(value > 0 for value in damping.values())
    model = model.with_joint_parameters(damping=damping)
    q, qd, qdd = states(model, (3,), seed=16)
    tau_rtb = reference.rne(q, qd, qdd, gravity=GRAVITY)
    for algebra in ("vector", "spatial"):
        assert rel_err(sd.inverse_dynamics(model, q, qd, qdd, gravity=GRAVITY, algebra=algebra),
                       tau_rtb) < TOL_RTB


@pytest.mark.parametrize("name", RTB_ROBOTS)
def test_tool_wrench_against_rtb(rtb, name):
    reference = getattr(rtb.models.DH, RTB_ROBOTS[name])().nofriction(coulomb=True, viscous=True)
    model = robots.load(name)
    q, qd, qdd = states(model, (3,), seed=13)
    wrench = np.random.default_rng(14).normal(size=(3, 6)) * [20, 20, 20, 3, 3, 3]
    f_ext = np.zeros((3, model.nlinks, 6))
    f_ext[:, model.link_index(f"link{model.nv}")] = wrench
    tau_rtb = np.array([reference.rne(*x, gravity=GRAVITY, fext=-w)
                        for *x, w in zip(q, qd, qdd, wrench)])
    for algebra in ("vector", "spatial"):
        tau = sd.inverse_dynamics(model, q, qd, qdd, f_ext=f_ext, gravity=GRAVITY, algebra=algebra)
        assert rel_err(tau, tau_rtb) < TOL_RTB


def test_modified_dh_against_rtb_panda(rtb):
    """RTB's Panda is a modified-DH model: forward kinematics of every DH frame, and (the
    modified-DH recursion) inverse dynamics and mass matrix."""
    reference = rtb.models.DH.Panda()
    model = quiet_from_dh(port(reference), "modified", name="panda_mdh")
    assert model.dh_convention == "modified"
    q, qd, qdd = states(model, (4,), seed=15)
    T = sd.forward_kinematics(model, q)
    frames = [model.link_index(f"link{i}") for i in range(model.nv + 1)]
    T_rtb = np.array([[pose.A for pose in reference.fkine_all(x)] for x in q])
    assert rel_err(T[:, frames], T_rtb) < TOL_RTB
    tau_rtb = reference.rne(q, qd, qdd, gravity=GRAVITY)
    for algebra in ("vector", "spatial"):
        assert rel_err(sd.inverse_dynamics(model, q, qd, qdd, gravity=GRAVITY, algebra=algebra),
                       tau_rtb) < TOL_RTB
        assert rel_err(sd.mass_matrix(model, q, algebra=algebra),
                       np.array([reference.inertia(x) for x in q])) < TOL_RTB


def port_drive(robot):
    """DHLinks with RTB's drive parameters (Jm, G, B, Tc) as they are: the recipe of the
    README."""
    return [DHLink(a=L.a, alpha=L.alpha, d=L.d, offset=L.offset,
                   theta=L.theta if L.isprismatic else 0.0,
                   joint="prismatic" if L.isprismatic else "revolute", mass=L.m, com=L.r,
                   inertia=L.I, Jm=L.Jm, G=L.G, B=L.B, Tc=L.Tc) for L in robot.links]


@pytest.mark.parametrize("algebra", ["vector", "spatial", "cga", "dq"])
def test_puma_as_rtb_ships_it_with_base_and_tool(rtb, algebra):
    """RTB's Puma 560 with its motor inertia, gear ratios, viscous and Coulomb friction (on, as
    RTB ships it), a base and a tool transform, and gravity in an odd direction: rne, inertia,
    accel, fkine and fkine_all agree to 1e-12."""
    from spatialmath import SE3

    reference = rtb.models.DH.Puma560()
    assert any(L.Tc[0] for L in reference.links) and any(L.B for L in reference.links)
    reference.base = SE3(0.1, -0.2, 0.3) * SE3.RPY(0.2, -0.3, 0.5)
    reference.tool = SE3(0, 0, 0.1) * SE3.Rx(0.3)
    model = quiet_from_dh(port_drive(reference), base=reference.base, tool=reference.tool)
    q, qd, qdd = states(model, (4,), seed=21)
    qd[0, :3] = 0.0  # Coulomb friction at rest is zero on both sides
    tau_rtb = reference.rne(q, qd, qdd, gravity=GRAVITY)
    tau = sd.inverse_dynamics(model, q, qd, qdd, gravity=GRAVITY, algebra=algebra)
    assert rel_err(tau, tau_rtb) < 1e-12
    assert rel_err(sd.mass_matrix(model, q, algebra=algebra),
                   np.array([reference.inertia(x) for x in q])) < 1e-12
    assert rel_err(sd.forward_dynamics(model, q, qd, tau_rtb, gravity=GRAVITY, algebra=algebra),
                   np.array([reference.accel(*x, gravity=GRAVITY)
                             for x in zip(q, qd, tau_rtb)])) < 1e-12
    T = sd.forward_kinematics(model, q, algebra=algebra)
    assert rel_err(T[:, model.link_index("tool")], np.array([reference.fkine(x).A for x in q])
                   ) < 1e-12
    frames = [model.link_index(f"link{i}") for i in range(model.nv + 1)]
    assert rel_err(T[:, frames], np.array([[p.A for p in reference.fkine_all(x)] for x in q])
                   ) < 1e-12
    # the friction enters inverse dynamics: without it RTB and we differ by exactly it
    friction = np.array([[-L.friction(v) for L, v in zip(reference.links, x)] for x in qd])
    assert np.abs(friction).max() > 0.1
    bare = quiet_from_dh(port_drive(reference.nofriction(coulomb=True, viscous=True)),
                         base=reference.base, tool=reference.tool)
    assert rel_err(sd.inverse_dynamics(bare, q, qd, qdd, gravity=GRAVITY) + friction,
                   tau_rtb) < 1e-12


def test_prismatic_first_joint_with_gravity_off_z(rtb):
    """A prismatic first joint and gravity not along z, against Pinocchio (an independent
    recursion on the same tree) and RTB's pure-Python rne. RTB's compiled rne (``rne``, frne)
    is wrong here: for this robot it returns 32.92 N at joint 1 where its own rne_python,
    Pinocchio and every algebra of ours give 32.60 N (one prismatic link alone agrees)."""
    pin = pytest.importorskip("pinocchio")
    from conftest import pinocchio_model

    L1 = rtb.PrismaticDH(theta=0.3, a=0.1, alpha=np.pi / 2, m=2.0, r=[0.05, 0.1, -0.2],
                         I=[0.02, 0.03, 0.04, 0, 0, 0])
    L2 = rtb.RevoluteDH(a=0.4, d=0.1, alpha=0.3, m=1.5, r=[-0.2, 0.01, 0.02],
                        I=[0.01, 0.02, 0.015, 0, 0, 0])
    reference = rtb.DHRobot([L1, L2])
    model = from_dh(port_drive(reference), gravity=GRAVITY)
    pm = pinocchio_model(model)
    data = pm.createData()
    q, qd, qdd = states(model, (3,), seed=22)
    for x in zip(q, qd, qdd):
        want = pin.rnea(pm, data, *x)
        assert rel_err(reference.rne_python(*x, gravity=GRAVITY), want) < 1e-12
        for algebra in ("vector", "spatial", "cga", "dq"):
            assert rel_err(sd.inverse_dynamics(model, *x, algebra=algebra), want) < 1e-12


def test_drive_parameters_round_trip_through_the_table_file(tmp_path, rtb):
    model = quiet_from_dh(port_drive(rtb.models.DH.Puma560()), name="puma_drive")
    save_dh_table(tmp_path / "puma.csv", model)
    again = load_dh_table(tmp_path / "puma.csv")
    assert again == model and again.dh[0].Tc == model.dh[0].Tc and again.dh[0].G < 0


# -- closed form ----------------------------------------------------------------------------------
@pytest.mark.parametrize("algebra", ["vector", "spatial"])
def test_pendulum_closed_form(algebra):
    """One link of length l, mass m at frame 1's origin, inertia I about its centre of mass,
    swinging in the xy plane about z0 with gravity g along +x (the hanging direction):
    tau = (m l^2 + I + armature) qdd + damping qd + m g l sin(q)."""
    m, l, I, g, Ja, c = 2.5, 0.7, 0.03, 9.81, 0.1, 0.4
    model = from_dh([DHLink(a=l, mass=m, inertia=(0.01, 0.02, I), armature=Ja, damping=c)],
                    name="pendulum")
    q = np.linspace(-3, 3, 7)[:, None]
    qd, qdd = np.cos(3 * q), np.sin(2 * q) + 0.5
    tau = sd.inverse_dynamics(model, q, qd, qdd, gravity=(g, 0, 0), algebra=algebra)
    expected = (m * l**2 + I + Ja) * qdd + c * qd + m * g * l * np.sin(q)
    assert rel_err(tau, expected) < 1e-12
    assert rel_err(sd.mass_matrix(model, q, algebra=algebra)[:, 0],
                   np.full((7, 1), m * l**2 + I + Ja)) < 1e-12


# -- from_dh --------------------------------------------------------------------------------------
def test_from_dh_model_structure():
    links = random_dh_links(5, n=3)
    model = from_dh(links, "standard", name="arm", joint_names=["a", "b", "c"])
    assert model.name == "arm" and model.joint_names == ("a", "b", "c")
    assert model.dh == tuple(links) and model.dh_convention == "standard"
    assert [b.joint_model.type_name for b in model.bodies] == ["revolute", "prismatic", "revolute"]
    assert model.link_names == ("link0", "link1_proximal", "link1", "link2_proximal", "link2",
                                "link3_proximal", "link3")
    assert model.armature.tolist() == [L.armature for L in links]
    assert model.damping.tolist() == [L.damping for L in links]
    assert hash(model) == hash(from_dh(links, "standard", name="arm",
                                       joint_names=["a", "b", "c"]))
    modified = from_dh(links, "modified")
    assert modified.link_names == ("link0", "link1", "link2", "link3")
    assert modified.joint_names == ("joint1", "joint2", "joint3")
    assert hash(links[0]) == hash(DHLink(**{f: getattr(links[0], f) for f in
                                            links[0].__dataclass_fields__}))


def test_dh_link_inertia_forms():
    rtb_six = DHLink(inertia=[1, 2, 3, 0.1, 0.2, 0.3])  # RTB: Ixx Iyy Izz Ixy Iyz Ixz
    assert np.array_equal(rtb_six.inertia_matrix, [[1, 0.1, 0.3], [0.1, 2, 0.2], [0.3, 0.2, 3]])
    assert DHLink(inertia=[1, 2, 3]).inertia == (1.0, 0, 0, 0, 2.0, 0, 0, 0, 3.0)
    assert DHLink(inertia=np.eye(3)).inertia == DHLink(inertia=[1, 1, 1]).inertia
    assert isinstance(DHLink(com=np.array([1, 2, 3])).com, tuple)
    with pytest.raises(ModelError, match="inertia must be"):
        DHLink(inertia=[1, 2])


@pytest.mark.parametrize("bad, message", [
    (dict(mass=-1.0), "DH link 2: negative mass"),
    (dict(a=float("nan")), "DH link 2: a is not finite"),
    (dict(com=(0, float("inf"), 0)), "DH link 2: com is not finite"),
    (dict(joint="spherical"), "DH link 2: joint must be 'revolute' or 'prismatic'"),
    (dict(theta=0.3), "DH link 2: a revolute joint's angle is q \\+ offset"),
    (dict(joint="prismatic", d=0.3), "DH link 2: a prismatic joint's length is q \\+ offset"),
    (dict(armature=-0.1), "DH link 2: negative armature"),
    (dict(inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "DH link 2: inertia matrix is not sym"),
])
def test_from_dh_rejects(bad, message):
    links = [DHLink(a=0.3, mass=1.0), DHLink(**{"a": 0.2, "mass": 1.0, **bad})]
    with pytest.raises(ModelError, match=message):
        from_dh(links)


def test_from_dh_rejects_bad_table():
    with pytest.raises(ModelError, match="DH convention must be 'standard' or 'modified'"):
        from_dh([DHLink(a=1, mass=1)], convention="craig")
    with pytest.raises(ModelError, match="at least one link"):
        from_dh([])
    with pytest.raises(ModelError, match="DH link 1: expected a DHLink"):
        from_dh([(0, 0, 0)])
    with pytest.raises(ModelError, match="joint_names must be 2 distinct"):
        from_dh([DHLink(a=1, mass=1)] * 2, joint_names=["x", "x"])


def test_from_dh_warns_for_inconsistent_inertia():
    with pytest.warns(InertiaWarning, match="DH link 1"):
        from_dh([DHLink(mass=1, inertia=(0, 0.35, 0))])
    with pytest.raises(ModelError, match="DH link 1"):
        from_dh([DHLink(mass=1, inertia=(0, 0.35, 0))], strict=True)


# -- the DH table file ----------------------------------------------------------------------------
def test_table_round_trip(tmp_path):
    for convention in ("standard", "modified"):
        model = from_dh(random_dh_links(6), convention, name="random arm",
                        joint_names=[f"j{i}" for i in range(5)])
        save_dh_table(tmp_path / "arm.csv", model)
        again = load_dh_table(tmp_path / "arm.csv")
        assert again == model  # the same table, convention, names, bodies and links
    with pytest.raises(ModelError, match="has no DH table"):
        save_dh_table(tmp_path / "x.csv", robots.load("ur5"))


def test_table_format(tmp_path):
    text = """
    # A two-link arm; this comment has a comma, and is ignored.
    # convention: modified
    alpha, a, d, joint, offset, mass, cx, Izz, theta
    0, 0, 0.1, revolute, -pi/2, 1.5, 0.2, 0.01,
    -pi/2, 0.3, 0, prismatic, 0.05, 0.5, , 2*pi/3, 1e-1
    """
    path = tmp_path / "two_link.csv"
    path.write_text(text)
    with pytest.warns(InertiaWarning, match="DH link 1"):  # Izz alone: no real body
        model = load_dh_table(path)
    assert model.name == "two_link" and model.dh_convention == "modified"
    first, second = model.dh
    assert first == DHLink(d=0.1, offset=-np.pi / 2, mass=1.5, com=(0.2, 0, 0),
                           inertia=(0, 0, 0.01))
    assert second == DHLink(alpha=-np.pi / 2, a=0.3, joint="prismatic", offset=0.05, mass=0.5,
                            inertia=(0, 0, 2 * np.pi / 3), theta=0.1)


@pytest.mark.parametrize("text, message", [
    ("a, alpha, d, mass\n0, 0, 0, heavy\n", r"line 2, column 'mass': not a number: 'heavy'"),
    ("a, alpha, d, colour\n0, 0, 0, red\n", r"line 1: unknown column 'colour'"),
    ("a, alpha, mass\n0, 0, 1\n", r"line 1: missing required column\(s\) d"),
    ("a, alpha, d, a\n0, 0, 0, 0\n", r"line 1: column 'a' appears twice"),
    ("a, alpha, d\n0, 0\n", r"line 2: 2 fields, but the header names 3 columns"),
    ("a, alpha, d, joint\n0, 0, 0, ball\n", r"line 2, column 'joint': expected revolute or prism"),
    ("# convention: sideways\na, alpha, d\n0, 0, 0\n", r"line 1: convention must be"),
    ("# only comments\n", r"no DH table"),
    ("a, alpha, d, mass\n0, 0, 0, 1\n0, 0, 0, -2\n", r"line 3: DH link 2: negative mass"),
    ("a, alpha, d\n0, 0, inf\n", r"line 2, column 'd': not finite"),
    ("a, alpha, d\n0, pi/0, 0\n", r"line 2, column 'alpha': division by zero"),
])
def test_table_errors(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ModelError, match=message):
        load_dh_table(path)
    with pytest.raises(ModelError, match="cannot read DH table"):
        load_dh_table(tmp_path / "missing.csv")


def test_parse_table_from_text():
    model = parse_dh_table("a, alpha, d, mass, Ixx, Iyy, Izz\n0.5, 0, 0, 1, .1, .1, .1\n",
                           default_name="one")
    assert model.name == "one" and model.nv == 1 and model.dh[0].a == 0.5


def test_table_round_trip_of_awkward_names_and_a_byte_order_mark(tmp_path):
    """Joint names with commas, quotes, a leading '#' and unicode survive save and load; a file
    saved by a spreadsheet with a UTF-8 byte-order mark loads."""
    names = ['shoulder, yaw', 'elbow "main"', "#3", "Gelenk-ä"]
    model = quiet_from_dh(random_dh_links(7, n=4), joint_names=names, name="arm, v2")
    save_dh_table(tmp_path / "arm.csv", model)
    again = load_dh_table(tmp_path / "arm.csv")
    assert again.joint_names == tuple(names) and again == model
    text = (tmp_path / "arm.csv").read_text(encoding="utf-8")
    (tmp_path / "bom.csv").write_text("\ufeff" + text, encoding="utf-8")
    assert load_dh_table(tmp_path / "bom.csv") == model
