"""Body-body contact (issue 24 item 3): a ``Scene`` of objects with collision shapes, the rigid
contact solved between every pair and with the ground. A ball comes to rest on a box, a stack of
boxes stands still, the numpy, native and JAX backends agree, bad shapes are refused."""
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import collision

G = 9.81


def _stack(n, mu=0.6):
    scene = sd.Scene("stack")
    for i in range(n):
        scene.add_object(f"box{i}", collision.box((0.1, 0.1, 0.1)), mass=1.0,
                         position=(0, 0, 0.1 + 0.2 * i))
    return scene.build(mu=mu)


@pytest.mark.parametrize("support", [collision.box((0.1, 0.1, 0.1)),
                                     collision.cylinder(0.1, 0.1)], ids=["box", "cylinder"])
def test_ball_comes_to_rest_on_a_support(support):
    """A 0.05 m ball dropped from 0.5 m onto a 0.2 m cube, or onto the end face of a cylinder
    (radius 0.1 m, 0.2 m tall) standing on the ground: it bounces (dampratio 1: little), then
    rests on the top face, 0.25 m high, the support unmoved; the ground carries both weights
    and the support the ball's. Ten candidate points (sphere-box and sphere-cylinder: 1; the
    ball and the ground: 1; the support and the ground: 8): the native backend runs it."""
    scene = sd.Scene("ball_on_support")
    scene.add_object("support", support, mass=2.0, position=(0, 0, 0.1))
    scene.add_object("ball", collision.sphere(0.05), mass=0.5, position=(0.02, 0.01, 0.5))
    model, contact, q0 = scene.build(mu=0.5)
    traj = sd.simulate(model, q0, t_final=1.5, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler", record_contact_forces=True)
    assert traj.meta["backend"] == "native"
    below, ball = traj.q[-1, :7], traj.q[-1, 7:]
    assert ball[2] == pytest.approx(0.25, abs=1e-5)
    assert np.abs(ball[:2] - [0.02, 0.01]).max() < 1e-3  # it landed where it fell
    assert np.abs(below[:3] - [0, 0, 0.1]).max() < 1e-4
    assert np.abs(traj.qd[-1]).max() < 1e-4
    labels = traj.meta["contact"]["labels"]
    on_ground = [i for i, label in enumerate(labels) if label.startswith("support|ground")]
    assert traj.contact_force[-1, on_ground, 2].sum() == pytest.approx(2.5 * G, rel=1e-4)
    on_support = [i for i, label in enumerate(labels) if "ball" in label and "support" in label]
    assert np.linalg.norm(traj.contact_force[-1, on_support].sum(axis=0)) == pytest.approx(
        0.5 * G, rel=1e-4)


def _at_rest(scene):
    """Build ``scene`` (mu 0.8) and run it 1.5 s at 1 ms in native code: everything stays
    within 0.1 mm of where it was put and comes to rest. Returns ``between(a, b)``: the
    vertical force (N) between shapes a and b ("ground": the ground) at the end."""
    model, contact, q0 = scene.build(mu=0.8)
    traj = sd.simulate(model, q0, t_final=1.5, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler", record_contact_forces=True)
    assert traj.meta["backend"] == "native"
    assert np.abs(traj.q - q0).max() < 1e-4
    assert np.abs(traj.qd[-1]).max() < 1e-3
    labels = traj.meta["contact"]["labels"]
    force = traj.contact_force[-1, :, 2]

    def between(a, b):
        return abs(sum(force[i] for i, label in enumerate(labels)
                       if label.split("#")[0] in (f"{a}|{b}", f"{b}|{a}")))
    return between


def _cans(scene):
    can = collision.cylinder(0.05, 0.08)
    scene.add_object("cube", collision.box((0.1, 0.1, 0.1)), mass=2.0, position=(0, 0, 0.1))
    scene.add_object("can", can, mass=0.3, position=(0.02, -0.01, 0.28))
    scene.add_object("can2", can, mass=0.2, position=(0.03, 0.0, 0.44))
    return {("can2", "can"): 0.2, ("can", "cube"): 0.5, ("cube", "ground"): 2.5}


def _log(scene):
    scene.add_object("cube", collision.box((0.1, 0.1, 0.1)), mass=2.0, position=(0, 0, 0.1))
    scene.add_object("log", collision.cylinder(0.05, 0.2), mass=0.5, position=(0, 0.02, 0.25),
                     quaternion=(0.0, np.sqrt(0.5), 0.0, np.sqrt(0.5)))  # its axis along x
    return {("log", "cube"): 0.5, ("cube", "ground"): 2.5}


@pytest.mark.parametrize("build", [_cans, _log], ids=["cans", "log"])
def test_cylinders_stand_on_a_box_and_on_each_other_and_lie_across_a_box(build):
    """A can (a cylinder of radius 0.05 m, 0.16 m tall) standing on a 0.2 m cube on the
    ground and a second can on the first (flat on flat: cylinder-cylinder); a log (radius 0.05
    m, 0.4 m long) lying across a cube, overhanging it on both sides (its side on the face's
    two edges: cylinder-box). For 1.5 s at 1 ms everything stays where it was put (0.1 mm)
    and comes to rest; each support carries the weight above it (1e-3)."""
    scene = sd.Scene("cylinders")
    weights = build(scene)
    between = _at_rest(scene)
    for (a, b), mass in weights.items():
        assert between(a, b) == pytest.approx(mass * G, rel=1e-3), (a, b)


def test_convex_objects_rest_on_the_ground_and_on_a_box():
    """Convex polytopes (``collision.convex``: the hull of points, a mesh's vertices say) as
    objects. The hull of a box's corners has the box's mass properties. A hexagonal prism
    whose points are off its centre (so its frame is not its centre of mass) lies on the
    ground, and a tetrahedron stands on a cube: for 1.5 s at 1 ms they stay where they were
    put (0.1 mm) and come to rest, the ground carrying every weight (1e-3)."""
    from screwdyn.sim.scene import solid_centre, solid_inertia

    h = np.array([0.1, 0.2, 0.15])
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * h
    box_hull = collision.convex(corners + [0.3, -0.1, 0.2])
    np.testing.assert_allclose(solid_centre(box_hull), [0.3, -0.1, 0.2], atol=1e-15)
    np.testing.assert_allclose(solid_inertia(box_hull, 2.0),
                               solid_inertia(collision.box(h), 2.0), atol=1e-15)
    angles = np.arange(6) * np.pi / 3
    hexagon = np.c_[0.08 * np.cos(angles), 0.08 * np.sin(angles)]
    prism = collision.convex(np.r_[np.c_[hexagon, np.full(6, 0.0)],
                                   np.c_[hexagon, np.full(6, 0.1)]] + [0.05, 0.02, 0.0])
    tetra = collision.convex([[0, 0, 0.12], [0.08, 0, 0], [-0.04, 0.07, 0], [-0.04, -0.07, 0]])
    scene = sd.Scene("convex")
    scene.add_object("prism", prism, mass=0.7, position=(0.5, 0, 0.0))
    scene.add_object("cube", collision.box((0.1, 0.1, 0.1)), mass=2.0, position=(0, 0, 0.1))
    scene.add_object("tetra", tetra, mass=0.3, position=(0.01, -0.02, 0.2))
    between = _at_rest(scene)
    assert between("prism", "ground") + between("cube", "ground") == pytest.approx(3.0 * G,
                                                                                  rel=1e-3)
    assert between("tetra", "cube") == pytest.approx(0.3 * G, rel=1e-3)


def test_two_boxes_stand_and_backends_agree():
    """Two stacked cubes stand still; numpy, native code and JAX agree on the first steps (24
    candidate points: the native backend runs it)."""
    model, contact, q0 = _stack(2)
    short = {b: sd.simulate(model, q0, t_final=0.02, dt=1e-3, contact=contact, backend=b,
                            integrator="semi_implicit_euler") for b in ("numpy", "native", "jax")}
    np.testing.assert_allclose(short["native"].q, short["numpy"].q, atol=1e-10)
    np.testing.assert_allclose(short["jax"].q, short["numpy"].q, atol=1e-10)
    traj = sd.simulate(model, q0, t_final=0.5, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert traj.meta["backend"] == "native"
    assert np.abs(traj.q - q0).max() < 1e-4  # the first steps' settling, then still
    assert np.abs(traj.qd[-1]).max() < 1e-6


def test_a_point_apart_costs_no_sweep_in_native_code():
    """In the native program each pair's rows of the solver's sweep are a branch taken only
    while one of its points is within the margin (``loops.when``): two stacked cubes' 24
    points in 3 pairs are 3 whens inside the one loop of the sweeps. The traced program gives
    numpy's qdd where some points of a pair touch and some are apart (the cubes' corners
    against each other: a point apart in a pair that is in keeps no force), and where the top
    cube is lifted clear (its pair's points all apart)."""
    from screwdyn.execution import trace

    model, contact, q0 = _stack(2)
    solver = contact.resolve(model)

    def qdd(xp, q, qd):
        T = sd.forward_kinematics(model, q)
        M = sd.mass_matrix(model, q)
        qdd0 = sd.forward_dynamics(model, q, qd, 0.0 * qd)
        p = solver.params(xp)
        return solver.solve(xp, p, q, qd, qdd0, M, T, solver.initial_state(xp, p, T))[0]

    program = trace.trace(lambda q, qd: qdd(trace.xp, q.reshape(1, -1),
                                            qd.reshape(1, -1)).reshape(-1, 1),
                          {"q": model.nq, "qd": model.nv})
    g = program.graph
    sweeps = [i for i in program.schedule() if g.op[i] == "loop"]
    assert len(sweeps) == 1 and len(solver.labels) == 24
    assert solver.groups == ((0, 8), (8, 16), (16, 24))  # the pairs' points
    assert [g.op[i] for i in g.value[sweeps[0]].order].count("when") == 3
    qd = np.random.default_rng(3).uniform(-0.1, 0.1, model.nv)
    lifted = q0.copy()
    lifted[9] += 0.05  # the top cube 5 cm above the lower one
    tilted = q0.copy()  # the top cube tipped by 0.02 rad: half its corners on the lower one
    tilted[9] += 0.0015
    tilted[10:14] = [np.sin(0.01), 0.0, 0.0, np.cos(0.01)]
    T = sd.forward_kinematics(model, tilted)[None]
    touching = solver.depths(np, solver.params(np), T)[0, :8] > -solver.ground.margin
    assert 0 < touching.sum() < 8  # the cubes' pair in the solve, some of its points apart
    # a point apart in a pair that is in keeps no force, even approaching fast (the stabilisation
    # alone would pull it): the same as each point a group of its own
    fast = np.zeros(model.nv)
    fast[9] = -3.0  # the top cube tipping back at 3 rad/s, its raised corners coming down
    grouped = qdd(np, tilted[None], fast[None])
    solver.__dict__["groups"] = tuple((i, i + 1) for i in range(24))
    np.testing.assert_allclose(qdd(np, tilted[None], fast[None]), grouped, rtol=1e-12,
                               atol=1e-12)
    del solver.__dict__["groups"]
    for q in (q0, lifted, tilted):
        np.testing.assert_allclose(program.evaluate(q=q, qd=qd), qdd(np, q[None], qd[None])[0],
                                   rtol=1e-12, atol=1e-12)


def test_a_rows_force_moves_only_its_own_trees_in_native_code(monkeypatch):
    """Objects are trees of their own: M is block diagonal over them, so a row's column of
    M^-1 J^T is exactly zero outside its two shapes' trees, and the traced sweep updates only
    theirs (``contact_solver.tree_spans``): three stacked cubes, 6 or 12 of 18 coordinates a
    row. The traced program computes the same bits as with every coordinate updated, in
    fewer operations."""
    from screwdyn.execution import trace
    from screwdyn.sim import contact_solver

    model, contact, q0 = _stack(3)
    solver = contact.resolve(model)
    rows = solver.block(np, solver.params(np), q0[None], 0.0 * q0[None, :model.nv],
                        sd.forward_kinematics(model, q0)[None], solver.initial_state(
                            np, solver.params(np), sd.forward_kinematics(model, q0)[None]))
    spans = contact_solver.tree_spans(model, [rows])
    pairs = [label.split("#")[0] for label in solver.labels]
    want = {"box0|box1": ((0, 12),), "box1|box2": ((6, 18),),  # box0|box2: two runs
            "box0|box2": ((0, 6), (12, 18)), "box0|ground": ((0, 6),),
            "box1|ground": ((6, 12),), "box2|ground": ((12, 18),)}
    assert set(pairs) == set(want)
    assert spans == tuple(want[pair] for pair in pairs for _ in range(3))

    def program():
        def qdd(q, qd):
            q, qd = q.reshape(1, -1), qd.reshape(1, -1)
            T = sd.forward_kinematics(model, q)
            M = sd.mass_matrix(model, q)
            qdd0 = sd.forward_dynamics(model, q, qd, 0.0 * qd)
            p = solver.params(trace.xp)
            state = solver.initial_state(trace.xp, p, T)
            return solver.solve(trace.xp, p, q, qd, qdd0, M, T, state)[0].reshape(-1, 1)

        return trace.trace(qdd, {"q": model.nq, "qd": model.nv})

    def body(program):  # the operations of the loop of the sweeps, its branches' included
        g = program.graph

        def count(order):
            return sum(1 + (count(g.value[i].order) if g.op[i] in ("loop", "when") else 0)
                       for i in order)

        return count(g.value[next(i for i in program.schedule() if g.op[i] == "loop")].order)

    sparse = program()
    monkeypatch.setattr(contact_solver, "tree_spans", lambda model, blocks: None)
    dense = program()
    assert body(sparse) < 0.85 * body(dense)  # 9,852 operations, where 12,498
    qd = np.random.default_rng(5).uniform(-0.2, 0.2, model.nv)
    tilted = q0.copy()
    tilted[10:14] = [np.sin(0.01), 0.0, 0.0, np.cos(0.01)]
    for q in (q0, tilted):
        assert np.array_equal(sparse.evaluate(q=q, qd=qd), dense.evaluate(q=q, qd=qd))


def test_a_when_on_numpy_runs_its_body_only_if_some_state_needs_it():
    """``loops.when`` on numpy: where the condition holds for no state the body does not run
    and the values come back as they were (NaN included); where it holds for some, the body's
    values there and the passed ones elsewhere, as ``where`` gives them."""
    from screwdyn.sim import loops

    calls = []

    def body(x):
        calls.append(1)
        f, u = x
        return f * 2.0 + 1.0, u - f[:, :1]

    f = np.array([[1.0, np.nan], [3.0, 4.0], [-5.0, 6.0]])
    u = np.array([[0.5, 0.25, -1.0], [2.0, np.inf, 0.0], [7.0, 8.0, 9.0]])
    out = loops.when(np, np.zeros(3, dtype=bool), body, (f, u))
    assert calls == []
    np.testing.assert_array_equal(out[0], f)
    np.testing.assert_array_equal(out[1], u)
    some = np.array([False, True, False])
    out = loops.when(np, some, body, (f, u))
    assert calls == [1]
    new = body((f, u))
    for got, changed, kept in zip(out, new, (f, u)):
        np.testing.assert_array_equal(got, np.where(some[:, None], changed, kept))


def test_a_batch_whose_states_touch_in_some_lanes_equals_each_state_alone():
    """Native batches run four states in the vector lanes, and a point's rows are taken where
    it touches in any lane, then selected lane by lane: five states of the two stacked cubes,
    the top one resting or lifted by 0.5 to 10 mm, with RK4 (its stages a loop holding the map
    of M^-1 J^T and the sweeps' whens) and semi-implicit Euler, give each state's trajectory
    alone exactly, and numpy's to 1e-12."""
    model, contact, q0 = _stack(2)
    Q = np.tile(q0, (5, 1))
    Q[:, 9] += [0.0, 0.0005, 0.003, 0.0, 0.01]
    for integrator in ("semi_implicit_euler", "rk4"):
        run = dict(t_final=0.03, dt=1e-3, contact=contact, integrator=integrator)
        batch = sd.simulate(model, Q, backend="native", **run).q
        for k in range(5):
            np.testing.assert_array_equal(batch[k],
                                          sd.simulate(model, Q[k], backend="native", **run).q)
        np.testing.assert_allclose(batch, sd.simulate(model, Q, backend="numpy", **run).q,
                                   rtol=0, atol=1e-12)


def test_large_scenes_warn_at_build(monkeypatch):
    """The native program's size is, per candidate point, the degrees of freedom that move it.
    Four stacked cubes: 6 box pairs of 8 points moved by 12 degrees of freedom and 4 boxes on
    the ground, 8 points by 6 each, so 768; with the limit lowered below that, ``build`` warns
    (naming the size, the points and the pairs), and the scene still runs natively."""
    model, contact, q0 = _stack(4)
    assert contact.resolve(model).native_size == 6 * 8 * 12 + 4 * 8 * 6
    monkeypatch.setattr(sd.sim.scene, "LARGE_SCENE", 700)
    with pytest.warns(sd.LargeSceneWarning, match="80 candidate contact points in 10 pairs.*: "
                                                  "768 .more than LARGE_SCENE = 700"):
        model, contact, q0 = _stack(4)
    traj = sd.simulate(model, q0, t_final=0.01, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert traj.meta["backend"] == "native"


def test_the_dofs_that_move_a_point_are_its_jacobians_columns_on_a_coupled_model():
    """``point_dofs`` (the native size, and the sweeps' ``Rows.dofs``) from the tree's paths,
    through the coupling's G for mimic joints: per candidate point, exactly the columns of its
    pair's links' Jacobians that are nonzero at a random configuration (Panda with its fingers
    coupled, 8 coordinates, and a free box: 14). A coupled model's rows keep no ``dofs``."""
    from conftest import erd_urdf

    panda = sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"), mimic="couple")
    scene = sd.Scene("coupled")
    scene.add_robot(panda)
    scene.add_object("box", collision.box((0.05, 0.05, 0.05)), 0.2, position=(0.4, 0, 0.05))
    model, contact, _ = scene.build()
    assert model.coupled and model.nv == 14
    resolved = contact.resolve(model)
    q = sd.random_configuration(model, 3)
    moved = {l: set(np.flatnonzero(np.any(np.asarray(sd.jacobian(model, q, l)) != 0.0,
                                          axis=0)).tolist()) for l in resolved.links}
    expected = [set().union(*(moved[l] for l in links)) for links in resolved.point_links()]
    assert [set(d) for d in resolved.point_dofs] == expected
    names = [tuple(model.links[l].name for l in links) for links in resolved.point_links()]
    sizes = {n: len(d) for n, d in zip(names, expected)}
    assert sizes[("panda_leftfinger", "panda_rightfinger")] == 8  # one finger coordinate
    assert sizes[("panda_link2",)] == 2 and sizes[("box",)] == 6
    assert sizes[("panda_leftfinger", "box")] == 14
    assert resolved.native_size == sum(map(len, expected))
    assert resolved._row_dofs(3) is None


CHAIN = """<robot name="chain3"><link name="base"/>{links}</robot>"""
LINK = """<link name="l{i}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"
ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j{i}" type="revolute"><parent link="{parent}"/><child
link="l{i}"/><origin xyz="0 0 0.3"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="9"
velocity="9"/></joint>"""


def test_native_size_counts_the_degrees_of_freedom_that_move_each_point():
    """The size counts degrees of freedom, not only points: 325 candidate points (25 balls,
    every pair and each ball on the ground: 1 point each) are 300 * 12 + 25 * 6 = 3,750; a
    three-link arm's spheres: l1-l3 (moved by 3 joints) and l2, l3 on the ground (2, 3; l1's,
    turning 0.3 m up about its joint's origin, never reaches it: no pair)."""
    scene = sd.Scene("balls")
    for i in range(25):
        scene.add_object(f"ball{i}", collision.sphere(0.05), mass=0.1,
                         position=(0.2 * (i % 5), 0.2 * (i // 5), 0.06))
    model, contact, _ = scene.build()
    balls = contact.resolve(model)
    assert sum(balls.counts) == 325 and balls.native_size == 3750
    links = "".join(LINK.format(i=i, parent="base" if i == 1 else f"l{i - 1}") for i in (1, 2, 3))
    arm = sd.Scene("arm")
    arm.add_robot(sd.load_urdf(CHAIN.format(links=links)), shapes=False)
    for i in (1, 2, 3):
        arm.add_shape(f"l{i}", collision.sphere(0.05))
    model, contact, _ = arm.build()
    assert contact.resolve(model).native_size == 3 + 2 + 3


@pytest.mark.slow
def test_stack_of_three_boxes_stands_still_for_ten_seconds():
    """Three 0.2 m cubes stacked on the ground for 10 s (native: 48 candidate points): within
    0.1 mm of where they started, and still to 1e-5 after the first second."""
    model, contact, q0 = _stack(3)
    traj = sd.simulate(model, q0, t_final=10.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert np.abs(traj.q - q0).max() < 1e-4
    # after the first second: what is left of creep, from the 30 sweeps not fully converging
    # on the boxes' redundant corners (measured: 3.4e-6 m or rad over the 9 s, then at rest:
    # velocities of 1e-13 at the end; 9.3e-6 and 1.4e-4 while each tangent took its own step)
    late = traj.t >= 1.0
    assert np.abs(traj.q[late] - traj.q[late][0]).max() < 1e-5
    assert np.abs(traj.qd[-1]).max() < 1e-6


def test_bad_scenes_are_refused():
    scene = sd.Scene("bad")
    with pytest.raises(ValueError,
                       match="collision.sphere, capsule, box, cylinder, ellipsoid, convex or "
                             "plane"):
        scene.add_shape("world", "a box")
    with pytest.raises(ValueError, match="quaternion"):
        scene.add_object("b", collision.box((0.1, 0.1, 0.1)), 1.0, quaternion=(0, 0, 0, 0))
    with pytest.raises(ValueError, match="mass"):
        scene.add_object("c", collision.sphere(0.1), -1.0)
    scene.add_object("d", collision.sphere(0.1), 1.0, position=(0, 0, 0.05))  # 5 cm in
    model, contact, q0 = scene.build()
    with pytest.warns(sd.PenetrationWarning, match="'d\\|ground#0' 5 cm inside .* leave it out"):
        sd.simulate(model, q0, t_final=0.01, dt=1e-3, contact=contact, energy_limit=None)
    # a shape inside another: a cylinder coinciding with a box, whose surface points are all
    # shallow (1e-9 from the box's faces): the axis of least overlap, 40 cm (either's height)
    inside = sd.Scene("inside")
    inside.add_object("box", collision.box((0.2, 0.2, 0.2)), 1.0, position=(0, 0, 1.0))
    inside.add_object("can", collision.cylinder(0.2, 0.2), 1.0, position=(0, 0, 1.0))
    model2, contact2, q2 = inside.build()
    with pytest.warns(sd.PenetrationWarning,
                      match=r"'(can|box)' and '(box|can)' overlap by 40 cm \('box\|can#20'\)"):
        sd.simulate(model2, q2, t_final=0.002, dt=1e-3, contact=contact2, energy_limit=None)
    # two coinciding cylinders: every surface point shallow (their centres 20 cm deep): the
    # axis of least overlap, 40 cm
    cans = sd.Scene("cans")
    for name in ("can", "tin"):
        cans.add_object(name, collision.cylinder(0.2, 0.2), 1.0, position=(0, 0, 1.0))
    model3, contact3, q3 = cans.build()
    with pytest.warns(sd.PenetrationWarning,
                      match=r"'(can|tin)' and '(tin|can)' overlap by 40 cm "
                            r"\('(can|tin)\|(tin|can)#22'\)"):
        sd.simulate(model3, q3, t_final=0.002, dt=1e-3, contact=contact3, energy_limit=None)
    ghost = sd.sim.ShapeContact(shapes=(sd.sim.scene.Shape("x", "nowhere",
                                                           collision.sphere(0.1)),))
    with pytest.raises(sd.ModelError, match="nowhere"):
        sd.simulate(model, q0, t_final=0.01, dt=1e-3, contact=ghost)


@pytest.mark.slow
def test_gripper_lifts_a_box():
    """examples/gripper_lift.py: two finger plates squeeze a 0.2 kg cube (10 N each, mu = 1)
    and the carriage rises 0.2 m: the box rises with it (native: 48 candidate points), within
    2 mm (its slip as the lift starts, and the contacts' settling)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
    import gripper_lift

    traj = gripper_lift.lift_box()
    carriage, box = traj.q[:, 0], traj.q[:, 5]
    assert carriage[-1] == pytest.approx(gripper_lift.LIFT, abs=1e-3)
    assert box[-1] - 0.05 == pytest.approx(carriage[-1], abs=2e-3)  # lifted with it
    assert np.abs(traj.q[-1, 1:3] - 0.06).max() < 1e-3  # the fingers on the box's faces
    assert np.abs(traj.qd[-1, 3:]).max() < 0.05  # held, not sliding out


def test_pairs_and_the_adjacent_link_filter():
    """An object on a free joint touches a shape fixed to the world (a block on the ground
    falls onto it); a link does not touch its parent across a hinge; shapes fixed to the world
    touch neither each other nor the ground; the arm, turning 0.5 m up, never reaches the
    ground (its capsule spans 0.22 m from the hinge): no pair."""
    scene = sd.Scene("pairs")
    scene.add_shape("world", collision.box((0.2, 0.2, 0.05)), xyz=(0, 0, 0.05), name="table")
    scene.add_shape("world", collision.sphere(0.05), xyz=(1, 0, 0.05), name="post")
    scene.builder.add_link("arm", mass=1.0, inertia=np.eye(3) * 0.01)
    scene.builder.add_joint("hinge", "revolute", "world", "arm", xyz=(0, 1, 0.5),
                            axis=(0, 1, 0))
    scene.add_shape("arm", collision.capsule(0.02, 0.2), name="arm")
    scene.add_object("box", collision.box((0.05, 0.05, 0.05)), mass=1.0,
                     position=(0, 0, 0.3))
    model, contact, q0 = scene.build()
    pairs = contact.resolve(model).describe(contact.resolve(model).params())["pairs"]
    assert sorted(pairs) == sorted(["table|box", "post|box", "arm|box", "box|ground"])
    traj = sd.simulate(model, q0, t_final=0.6, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert traj.q[-1, 3] == pytest.approx(0.15, abs=1e-4)  # on the table (0.1 high), not through


def test_rk4_with_rigid_contact_agrees_on_every_backend():
    """RK4 carries the contact solver's warm start through its four stages (on JAX a scan and
    in native code a loop: the last stage's forces are the next step's start), so a ball
    dropped on a box takes the same path on numpy, in native code and on JAX (to 1e-12). JAX
    failed here before (the state left its scan)."""
    scene = sd.Scene("ball_on_box")
    scene.add_object("box", collision.box((0.1, 0.1, 0.1)), mass=2.0, position=(0, 0, 0.1))
    scene.add_object("ball", collision.sphere(0.05), mass=0.5, position=(0.02, 0.01, 0.26))
    model, contact, q0 = scene.build(mu=0.5)
    runs = {b: sd.simulate(model, q0, t_final=0.06, dt=1e-3, contact=contact, integrator="rk4",
                           backend=b) for b in ("numpy", "native", "jax")}
    assert runs["numpy"].q[-1, 9] < 0.255  # it fell onto the box and is held there
    for b in ("native", "jax"):
        assert runs[b].meta["backend"] == b
        np.testing.assert_allclose(runs[b].q, runs["numpy"].q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(runs[b].qd, runs["numpy"].qd, rtol=0, atol=1e-10)


def test_an_objects_inertia_is_its_solid_shapes_as_mujoco_computes_it():
    """add_object's mass properties (solid, uniform density) equal those MuJoCo compiles for a
    geom of the same shape and mass (its body_inertia, the principal moments, and body_ipos):
    sphere, box, cylinder, ellipsoid, and capsule (a cylinder and two half balls: it was the
    cylinder's alone, 41% short across the axis and 5% over along it on this one). A plane
    cannot be an object: ValueError."""
    mujoco = pytest.importorskip("mujoco")
    shapes = {"sphere": (collision.sphere(0.07), 'type="sphere" size="0.07"'),
              "box": (collision.box((0.1, 0.2, 0.05)), 'type="box" size="0.1 0.2 0.05"'),
              "cylinder": (collision.cylinder(0.05, 0.15), 'type="cylinder" size="0.05 0.15"'),
              "capsule": (collision.capsule(0.05, 0.1), 'type="capsule" size="0.05 0.1"'),
              "ellipsoid": (collision.ellipsoid((0.1, 0.05, 0.07)),
                            'type="ellipsoid" size="0.1 0.05 0.07"')}
    bodies = "".join(f'<body name="{k}"><freejoint/><geom {xml} mass="1.3"/></body>'
                     for k, (_, xml) in shapes.items())
    m = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{bodies}</worldbody></mujoco>")
    scene = sd.Scene("inertias")
    for k, (shape, _) in shapes.items():
        scene.add_object(k, shape, mass=1.3, position=(0, 0, 1))
    model = scene.build(ground=False)[0]
    for k in shapes:
        body = next(b for b in model.bodies if b.link == k)
        i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, k)
        np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(np.reshape(body.inertia,
                                                                         (3, 3)))),
                                   np.sort(m.body_inertia[i]), rtol=1e-12, err_msg=k)
        assert body.mass == pytest.approx(m.body_mass[i], rel=1e-12)
        np.testing.assert_allclose(body.com, m.body_ipos[i], atol=1e-15)
    with pytest.raises(ValueError, match="a plane is infinite, not an object"):
        scene.add_object("wall", collision.plane(), mass=1.0)


def test_pairs_that_can_never_touch_are_left_out(monkeypatch):
    """A static broad phase: a link whose joints up to the world all turn about their origins
    (revolute, spherical) stays in a ball about its top joint, whatever q, limits or not; a
    pair whose two balls (a fixed shape's own ball, a plane) stay more than 1 mm apart is left
    out. dm_control's finger (a two-link finger and a spinner on hinges, 0.4 m up): 3 pairs of
    15 are kept, the fingertip against the spinner's three geoms (its caps do touch); at 2,000
    random configurations none of the 12 left out comes within 1 mm (the ground, the proximal
    link). The manipulator (an arm, objects on slides and hinges): 35 of 316 left out, none
    within 1 mm. A free object keeps every pair."""
    from screwdyn.sim import scene as scenes

    path = os.path.join(os.path.dirname(pytest.importorskip("dm_control").__file__), "suite")
    kept_all = scenes._within_reach
    for name, counts in (("finger", (15, 3)), ("manipulator", (316, 281))):
        scene = sd.Scene(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scene.add_robot(sd.load_mjcf(os.path.join(path, f"{name}.xml")))
        model, contact, q0 = scene.build()
        kept = {(a.name, b and b.name) for a, _, b, _ in contact.resolve(model).pairs}
        monkeypatch.setattr(scenes, "_within_reach", lambda *args: True)
        every = contact.resolve(model)
        monkeypatch.setattr(scenes, "_within_reach", kept_all)
        assert (len(every.pairs), len(kept)) == counts
        rng = np.random.default_rng(0)
        q = np.stack([sd.random_configuration(model, rng) for _ in range(2000)])
        depth = np.asarray(every.depths(np, every.params(), sd.forward_kinematics(model, q)))
        first, touched = 0, set()
        for (a, _, b, _), K in zip(every.pairs, every.counts):
            deepest = depth[:, first:first + K].max()
            first += K
            if (a.name, b and b.name) not in kept:
                assert deepest < -1e-3, (a.name, b and b.name)
            elif deepest > 0:
                touched.add((a.name, b and b.name))
        if name == "finger":  # the fingertip reaches the spinner's caps
            assert {("distal/fingertip", "spinner/cap1"),
                    ("distal/fingertip", "spinner/cap2")} <= touched
    scene = sd.Scene("far")
    scene.add_object("ball", collision.sphere(0.1), mass=1.0, position=(0, 0, 5))
    scene.add_shape("world", collision.box((0.1, 0.1, 0.1)), xyz=(100, 0, 0), name="far box")
    model, contact, q0 = scene.build()
    assert len(contact.resolve(model).pairs) == 2
