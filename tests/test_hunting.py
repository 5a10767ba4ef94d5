"""A test suite that hunts (issue 17): hypothesis generates random small models (random trees of
every joint type, random and degenerate inertias), random batch shapes, dtypes and non-finite
values for every public function of screwdyn that takes arrays, and mutated real robot files;
each call must give a result of the documented shape and dtype or one of the documented
exceptions (``ValueError``, ``ModelError``, ``TypeError``; ``SimulationError`` for a
simulation), never another exception and never a hang. Non-finite states must propagate per
state: the finite states of a batch give what they give alone.

The examples are the same on every run (the "ci" profile of tests/conftest.py derandomizes);
``SCREWDYN_HYPOTHESIS=hunt pytest tests/test_hunting.py`` hunts with many random ones."""
import datetime
import inspect
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdfs

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DOCUMENTED = (ValueError, TypeError)  # ModelError is a ValueError
#: a tiny model's call that takes this long is a hang (generous: 2 shared cores)
HANG = datetime.timedelta(seconds=30)
KINDS = ["revolute", "continuous", "prismatic", "spherical", "planar", "helical", "free",
         "fixed"]
ALGEBRAS = ["spatial", "cga", "dq", "vector"]


# -- random models ------------------------------------------------------------------------------
finite = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
vec3 = st.tuples(finite, finite, finite)


@st.composite
def inertias(draw):
    """(mass, com, inertia): consistent, zero, a rod (rank 2), a point mass, or inconsistent
    (an ``InertiaWarning``: loaded anyway, as Pinocchio does)."""
    form = draw(st.sampled_from(["box"] * 5 + ["zero", "rod", "point", "any"]))
    mass = draw(st.floats(0.1, 5.0)) if form != "zero" else 0.0
    a, b, c = (draw(st.floats(0.001, 0.1)) for _ in range(3))
    inertia = {"box": np.diag([b + c, a + c, a + b]), "zero": np.zeros((3, 3)),
               "rod": np.diag([a, a, 0.0]), "point": np.zeros((3, 3)),
               "any": np.diag([a, b, 2 * (a + b) + c])}[form]  # breaks the triangle rule
    return mass, draw(vec3), inertia


@st.composite
def models(draw, max_bodies=4):
    """A random tree of up to ``max_bodies`` joints of any type, or the ModelError that the
    builder gives for it (a zero axis, a massless moving subtree is fine: dynamics say so)."""
    b = sd.ModelBuilder("hunted")
    mass, com, inertia = draw(inertias())
    try:
        b.add_link("base", mass=mass, com=com, inertia=inertia)
    except sd.ModelError:  # a negative moment of inertia: refused, named
        return None
    links = ["base"]
    for i in range(draw(st.integers(1, max_bodies))):
        mass, com, inertia = draw(inertias())
        axis = ((0.0, 0.0, 0.0) if draw(st.integers(0, 15)) == 0  # refused: ModelError
                else draw(st.tuples(finite, finite, st.floats(0.1, 2.0))))
        try:  # a negative moment of inertia, a zero axis: refused, named
            b.add_link(f"l{i}", mass=mass, com=com, inertia=inertia)
            b.add_joint(f"j{i}", draw(st.sampled_from(KINDS)),
                        parent=links[draw(st.integers(0, len(links) - 1))], child=f"l{i}",
                        xyz=draw(vec3), rpy=draw(vec3), axis=axis,
                        pitch=draw(st.floats(-0.2, 0.2)))
        except sd.ModelError:
            return None
        links.append(f"l{i}")
    base = draw(st.sampled_from([False, True, "planar"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # InertiaWarning for the inconsistent ones
        try:
            model = b.build(floating_base=base)
        except sd.ModelError:
            return None
    return draw(constrained(model))


@st.composite
def constrained(draw, model):
    """The model, or (sometimes) the model with a random equality constraint: a Connect of
    two links' points (a loop, maybe redundant or unreachable) or a Coupling of two
    one-coordinate joints; ModelError (a constraint on one rigid body) gives the model."""
    kind = draw(st.sampled_from(["none", "none", "connect", "coupling"]))
    scalar = [j for j, s in zip(model.joint_names, model.q_slices) if s.stop - s.start == 1]
    try:
        if kind == "connect" and model.nlinks >= 2:
            a, b = draw(st.lists(st.sampled_from(model.link_names), min_size=2, max_size=2,
                                 unique=True))
            return model.with_constraints(sd.constraints.Connect(a, b, draw(vec3), draw(vec3)))
        if kind == "coupling" and len(scalar) >= 2:
            target, source = draw(st.lists(st.sampled_from(scalar), min_size=2, max_size=2,
                                           unique=True))
            return model.with_constraints(sd.constraints.Coupling(
                target, source, polynomial=(draw(finite), draw(finite))))
    except sd.ModelError:
        pass
    return model


# -- random arguments ---------------------------------------------------------------------------
BATCHES = [(), (0,), (1,), (3,), (2, 1), (1, 2), (2, 0)]
DTYPES = [np.float64, np.float32, np.float16, np.int32, np.bool_]


def _core(model, name):
    return {"q": (model.nq,), "q0": (model.nq,), "q1": (model.nq,), "qd": (model.nv,),
            "qdd": (model.nv,), "tau": (model.nv,), "v": (model.nv,),
            "f_ext": (model.nlinks, 6), "gravity": (3,)}[name]


@st.composite
def argument(draw, model, name, batch, hostile=True):
    """(value, expected): an argument of ``batch`` (or a shape broadcasting to it) with maybe
    non-finite entries, expected "ok"; or, rarely, a bad one expected to raise. ``hostile``:
    False gives good, finite values only."""
    core = _core(model, name)
    bad = draw(st.sampled_from(["none"] * 12 + ["None", "string", "complex", "shape", "ragged",
                                                "object"])) if hostile else "none"
    if bad == "None":
        return None, "error"
    if bad == "string":
        return "0.5", "error"
    if bad == "object":
        return {"q": 1}, "error"
    if bad == "ragged":
        return [[0.0], [0.0, 1.0]], "error"
    own = tuple(d if draw(st.booleans()) else 1 for d in batch)[
        draw(st.integers(0, len(batch))):]  # a suffix of batch with some 1s: broadcasts
    shape = own + core
    if bad == "shape":
        shape = own + core[:-1] + (core[-1] + 1,)
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    if name in ("q", "q0", "q1"):
        count = int(np.prod(own, dtype=int))
        rows = [sd.random_configuration(model, rng) for _ in range(count)]
        value = (np.array(rows) if rows else np.zeros((0, model.nq))).reshape(own + core)
        if bad == "shape":
            value = np.zeros(shape)
    else:
        value = rng.normal(size=shape)
    if value.size and hostile and draw(st.booleans()):  # non-finite entries in some states
        flat = value.reshape(-1)
        for k in draw(st.lists(st.integers(0, flat.size - 1), max_size=3)):
            flat[k] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if bad == "complex":
        return value + 1j, "error"
    dtype = draw(st.sampled_from(DTYPES if hostile else [np.float64, np.float32]))
    with np.errstate(invalid="ignore", over="ignore"):
        value = value.astype(dtype)
    return value, ("error" if bad == "shape" else "ok")


FUNCTIONS = {  # name: (array arguments, per-state result shape)
    "inverse_dynamics": (("q", "qd", "qdd"), lambda m: (m.nv,)),
    "forward_dynamics": (("q", "qd", "tau"), lambda m: (m.nv,)),
    "mass_matrix": (("q",), lambda m: (m.nv, m.nv)),
    "bias_forces": (("q", "qd"), lambda m: (m.nv,)),
    "gravity_torques": (("q",), lambda m: (m.nv,)),
    "coriolis_matrix": (("q", "qd"), lambda m: (m.nv, m.nv)),
    "forward_kinematics": (("q",), lambda m: (m.nlinks, 4, 4)),
    "jacobian": (("q",), lambda m: (6, m.nv)),
    "kinetic_energy": (("q", "qd"), lambda m: ()),
    "potential_energy": (("q",), lambda m: ()),
    "center_of_mass": (("q",), lambda m: (3,)),
    "link_velocities": (("q", "qd"), lambda m: (m.nlinks, 6)),
    "constrained_forward_dynamics": (("q", "qd", "tau"), lambda m: (m.nv,)),
    "constraint_forces": (("q", "qd", "tau"), lambda m: (m.nconstraints,)),
    "constraint_residual": (("q",), lambda m: (m.nconstraints,)),
    "constraint_jacobian": (("q",), lambda m: (m.nconstraints, m.nv)),
    "inverse_dynamics_regressor": (("q", "qd", "qdd"), lambda m: (m.nv, 10 * m.nbodies)),
    "inverse_dynamics_derivatives": (("q", "qd", "qdd"), lambda m: (m.nv, 3 * m.nv)),
    "forward_dynamics_derivatives": (("q", "qd", "tau"), lambda m: (m.nv, 3 * m.nv)),
    "integrate": (("q", "v"), lambda m: (m.nq,)),
    "difference": (("q0", "q1"), lambda m: (m.nv,)),
}


def test_every_public_function_taking_arrays_is_hunted():
    """The table above covers the public functions of screwdyn that take state arrays (the
    others are hunted below: random_configuration, dynamics_derivatives, simulate)."""
    hunted = set(FUNCTIONS) | {"random_configuration", "dynamics_derivatives", "simulate"}
    takes_states = {name for name in sd.__all__ if callable(getattr(sd, name))
                    and not inspect.isclass(getattr(sd, name))
                    and {"q", "q0"} & set(inspect.signature(getattr(sd, name)).parameters)}
    assert takes_states - {"compile", "view", "rollouts"} <= hunted


def _call(name, model, args, extra):
    function = getattr(sd, name)
    if name == "jacobian":
        extra = dict(extra, link=model.link_names[-1])
    parameters = inspect.signature(function).parameters
    return function(model, *args, **{k: v for k, v in extra.items() if k in parameters})


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if not np.all(np.isfinite(b)) or np.abs(b).max(initial=0.0) > 1e8:
        return True  # ill-conditioned or non-finite alone: nothing to compare
    return np.allclose(a, b, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(b).max(initial=0.0)))


@settings(max_examples=300, deadline=HANG)
@given(st.data())
def test_public_functions_give_a_result_or_a_documented_error(data):
    model = data.draw(models())
    hypothesis.event("model built" if model is not None else "model refused (ModelError)")
    if model is None:
        return
    name = data.draw(st.sampled_from(sorted(FUNCTIONS)))
    names, result_core = FUNCTIONS[name]
    batch = data.draw(st.sampled_from(BATCHES))
    drawn = [data.draw(argument(model, n, batch)) for n in names]
    args = [value for value, _ in drawn]
    extra = {"algebra": data.draw(st.sampled_from(ALGEBRAS))}
    f_ext_shape = ()
    if name in ("inverse_dynamics", "forward_dynamics", "inverse_dynamics_derivatives",
                "forward_dynamics_derivatives") and data.draw(st.booleans()):
        f_ext, how = data.draw(argument(model, "f_ext", batch))
        extra["f_ext"] = f_ext
        if f_ext is None:
            how = "ok"  # an optional argument: None means not given
        elif how == "ok":  # its batch dimensions broadcast with the states'
            f_ext_shape = np.shape(f_ext)[:np.ndim(f_ext) - 2]
        drawn.append((f_ext, how))
    expected_error = any(how == "error" for _, how in drawn)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # IEEE propagation is silent
            warnings.filterwarnings("ignore", category=sd.InertiaWarning)
            result = _call(name, model, args, extra)
    except DOCUMENTED as error:
        hypothesis.event(f"documented error: {type(error).__name__}")
        assert str(error)  # a message, naming what is wrong
        return
    hypothesis.event("result")
    assert not expected_error, f"{name} accepted a bad argument"
    shapes = [np.shape(a)[:np.ndim(a) - len(_core(model, n))] for a, n in zip(args, names)]
    full_batch = np.broadcast_shapes(*shapes, f_ext_shape)
    assert result.shape == full_batch + result_core(model)
    assert result.dtype == np.float64
    # per state: a finite state's result does not depend on the non-finite states beside it
    full = [np.broadcast_to(np.asarray(a, dtype=float), full_batch + _core(model, n))
            for a, n in zip(args, names)]
    for index in list(np.ndindex(full_batch))[:3]:
        state = [a[index] for a in full]
        if all(np.all(np.isfinite(s)) for s in state) and "f_ext" not in extra:
            alone = _call(name, model, state, extra)
            assert _close(result[index], alone), (name, index)


@settings(max_examples=40, deadline=HANG)
@given(models(), st.one_of(st.integers(-5, 2 ** 40), st.none(), st.just("seed"),
                           st.just(1.5), st.just([1, 2])))
def test_random_configuration_is_a_configuration_or_a_documented_error(model, seed):
    if model is None:
        return
    try:
        q = sd.random_configuration(model, seed)
    except DOCUMENTED as error:
        assert str(error)
        return
    assert q.shape == (model.nq,) and q.dtype == np.float64 and np.all(np.isfinite(q))
    np.testing.assert_allclose(sd.integrate(model, q, np.zeros(model.nv)), q, atol=1e-12)


@settings(max_examples=40, deadline=HANG)
@given(st.data())
def test_simulate_gives_a_trajectory_or_a_documented_error(data):
    model = data.draw(models(max_bodies=3))
    if model is None:
        return
    batch = data.draw(st.sampled_from([(), (0,), (2,)]))
    hostile = data.draw(st.integers(0, 2)) == 0
    q0, how_q = data.draw(argument(model, "q", batch, hostile))
    qd0, how_qd = data.draw(argument(model, "qd", batch, hostile))
    dt = data.draw(st.sampled_from([1e-3, 0.01, 0.5, 0.0, -1e-3, float("nan")]) if hostile
                   else st.sampled_from([1e-3, 2.5e-3]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traj = sd.simulate(model, q0, qd0, t_final=0.005, dt=dt, backend="numpy")
    except (sd.SimulationError, *DOCUMENTED) as error:
        hypothesis.event(f"documented error: {type(error).__name__}")
        assert str(error)
        return
    hypothesis.event("trajectory")
    assert how_q == how_qd == "ok"
    assert np.all(np.isfinite(np.asarray(q0, dtype=float)))  # simulate refuses non-finite
    assert traj.q.shape[-1] == model.nq and traj.qd.shape[-1] == model.nv
    assert traj.q.shape[-2] == len(traj.t) >= 2
    assert np.all(np.isfinite(traj.q))


DERIVATIVE_MODELS = [sd.robots.load("puma560")]


@settings(max_examples=4, deadline=None)  # compiles with JAX: no deadline
@given(st.data())
def test_dynamics_derivatives_give_float64_results_or_a_documented_error(data):
    model = DERIVATIVE_MODELS[0]
    batch = data.draw(st.sampled_from([(), (2,)]))  # each shape compiles once
    (q, how_q), (qd, how_qd), (u, how_u) = (data.draw(argument(model, n, batch))
                                            for n in ("q", "qd", "qdd"))
    which = data.draw(st.sampled_from(["qdd", "tau"]))
    try:
        D = sd.dynamics_derivatives(model, q, qd, **{which: u})
    except DOCUMENTED as error:
        assert str(error)
        return
    assert how_q == how_qd == how_u == "ok"
    full_batch = np.broadcast_shapes(*(np.shape(a)[:-1] for a in (q, qd, u)))
    for a in D:
        assert a.shape == full_batch + (model.nv, model.nv) and a.dtype == np.float64


# -- non-finite states in every algebra, every function (deterministic) ----------------------------
def _every_joint_type():
    b = sd.ModelBuilder("every_joint")
    b.add_link("base")
    parent = "base"
    for i, kind in enumerate(KINDS[:-1]):
        b.add_link(f"l{i}", mass=1.0, com=(0.0, 0.05, 0.1), inertia=np.diag([0.02, 0.03, 0.04]))
        b.add_joint(f"j{i}", kind, parent=parent, child=f"l{i}", xyz=(0.1, 0.0, 0.2),
                    axis=(0.0, 0.6, 0.8), pitch=0.05)
        parent = f"l{i}"
    return b.build()


@pytest.mark.parametrize("model", [_every_joint_type(), sd.robots.load("puma560")],
                         ids=["every_joint_type", "puma560_dh"])
@pytest.mark.parametrize("algebra", ALGEBRAS)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_non_finite_state_never_raises_nor_spoils_the_others(model, algebra, value):
    """A batch of a good state, a state with a non-finite q, one with a non-finite velocity and
    one with a non-finite acceleration or force: every function of every algebra returns the
    good state's value alone, silently (no RuntimeWarning), without an exception."""
    if algebra == "vector" and not model.dh:
        pytest.skip("algebra='vector' is for DH models")
    rng = np.random.default_rng(3)
    q = np.stack([sd.random_configuration(model, rng) for _ in range(4)])
    v = rng.normal(size=(4, model.nv))
    q[1, :] = value
    v[2, :] = value
    u = rng.normal(size=(4, model.nv))
    u[3, :] = value
    for name, (names, _) in FUNCTIONS.items():
        if name == "inverse_dynamics_regressor" and algebra == "vector":
            continue  # the DH recursion has no regressor: a documented ValueError (test_regressor)
        args = [{"q": q, "q0": q, "q1": q[[0, 3, 2, 1]], "qd": v, "v": v, "qdd": u, "tau": u}[n]
                for n in names]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            batch = _call(name, model, args, {"algebra": algebra})
            alone = _call(name, model, [a[0] for a in args], {"algebra": algebra})
        assert batch.shape[0] == 4
        np.testing.assert_allclose(batch[0], alone, rtol=1e-10, atol=1e-10, err_msg=name)


# -- mutated real files ---------------------------------------------------------------------------
def _small_erd_urdfs():
    paths = [p for p in erd_urdfs() if os.path.getsize(p) < 40_000]
    return paths[:: max(1, len(paths) // 12)]  # a dozen robots across the collection


SMALL_URDFS = _small_erd_urdfs()
CORRUPT = ["nan", "inf", "", "abc", "1e999", "-1", "0 0", "1 2 3 4", "&amp;", "\u00e9"]


@pytest.mark.skipif(not SMALL_URDFS, reason="example-robot-data is not installed")
@settings(max_examples=80, deadline=HANG)
@given(data=st.data())
def test_mutated_example_robot_urdfs_load_or_raise_a_model_error(data, tmp_path_factory):
    """A real URDF from example-robot-data with a few elements deleted, duplicated or moved, or
    attributes corrupted, written to a file: a Model or a ModelError naming the problem."""
    path = data.draw(st.sampled_from(SMALL_URDFS))
    root = ET.parse(path).getroot()
    for _ in range(data.draw(st.integers(1, 3))):
        elements = [(parent, child) for parent in root.iter() for child in parent]
        if not elements:
            break
        parent, child = data.draw(st.sampled_from(elements))
        action = data.draw(st.sampled_from(["delete", "duplicate", "corrupt", "move"]))
        if action == "delete":
            parent.remove(child)
        elif action == "duplicate":
            parent.append(ET.fromstring(ET.tostring(child)))
        elif action == "move":
            parent.remove(child)
            data.draw(st.sampled_from(list(root.iter()))).append(child)
        elif child.attrib:
            key = data.draw(st.sampled_from(sorted(child.attrib)))
            child.set(key, data.draw(st.sampled_from(CORRUPT)))
    folder = tmp_path_factory.mktemp("urdf")
    mutated = folder / "mutated.urdf"
    mutated.write_bytes(ET.tostring(root, encoding="utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = sd.load_urdf(str(mutated), floating_base=data.draw(st.booleans()))
        except sd.ModelError as error:
            assert str(error)
            return
        q = model.neutral
        tau = sd.inverse_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv))
    assert tau.shape == (model.nv,) and np.all(np.isfinite(tau))


DH_FILES = [sd.model.robots.path("puma560"), sd.model.robots.path("stanford")]


@settings(max_examples=80, deadline=HANG)
@given(data=st.data())
def test_mutated_dh_csv_files_load_or_raise_a_model_error(data, tmp_path_factory):
    """A DH table file (the bundled Puma 560 and Stanford arm) with lines deleted, duplicated or
    swapped, fields corrupted, quotes or a byte-order mark added: a Model or a ModelError."""
    lines = open(data.draw(st.sampled_from(DH_FILES)), encoding="utf-8").read().splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        if not lines:
            break
        k = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["delete", "duplicate", "swap", "field", "quote"]))
        if action == "delete":
            del lines[k]
        elif action == "duplicate":
            lines.insert(k, lines[k])
        elif action == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[k], lines[j] = lines[j], lines[k]
        else:
            fields = lines[k].split(",")
            i = data.draw(st.integers(0, len(fields) - 1))
            fields[i] = (data.draw(st.sampled_from(CORRUPT + ["pi/0", "2*pi", "prismatic"]))
                         if action == "field" else '"' + fields[i])
            lines[k] = ",".join(fields)
    text = "\n".join(lines)
    bom = "\ufeff" if data.draw(st.booleans()) else ""
    path = tmp_path_factory.mktemp("dh") / "mutated.csv"
    path.write_text(bom + text, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = sd.load_dh_table(str(path))
        except (sd.ModelError, ValueError) as error:
            assert str(error)
            return
        tau = sd.inverse_dynamics(model, model.neutral, np.zeros(model.nv), np.zeros(model.nv))
    assert tau.shape == (model.nv,) and np.all(np.isfinite(tau))


# -- saves round-trip -----------------------------------------------------------------------------
NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1,
                max_size=12).filter(lambda s: s == s.strip())


@settings(max_examples=30, deadline=HANG)
@given(names=st.lists(NAMES, min_size=2, max_size=2, unique=True), robot=NAMES, bom=st.booleans())
def test_dh_tables_round_trip_any_names(names, robot, bom, tmp_path_factory):
    """Commas, quotes, '#', any Unicode in joint and robot names; a byte-order mark on read."""
    links = [sd.DHLink(a=0.2, alpha=0.3, d=0.1, mass=1.0, com=(0.0, 0.0, 0.1),
                       inertia=(0.1, 0.2, 0.3)) for _ in names]
    model = sd.from_dh(links, name=robot, joint_names=names)
    path = tmp_path_factory.mktemp("dh") / "table.csv"
    sd.save_dh_table(path, model)
    if bom:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    back = sd.load_dh_table(path)
    assert (back.joint_names, back.name, back.dh) == (model.joint_names, model.name, model.dh)


def test_dh_names_that_cannot_be_written_are_refused_before_writing(tmp_path):
    links = [sd.DHLink(a=0.2, mass=1.0)]
    path = tmp_path / "table.csv"
    for names, name in ((["a\nb"], "r"), (["a"], " padded "), (["a "], "r")):
        with pytest.raises(sd.ModelError, match="cannot be written in a DH table"):
            sd.save_dh_table(path, sd.from_dh(links, name=name, joint_names=names))
        assert not path.exists()
