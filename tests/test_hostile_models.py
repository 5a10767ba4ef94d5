"""Hunting for crashes in the loaders: real URDF, MJCF and DH table files, mutated at random
(hypothesis), load into a Model or fail with a ModelError naming what is wrong: never another
exception, never a model that computes garbage silently."""
import re
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.model import robots

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
PANDA = open(robots.path("panda"), encoding="utf-8").read()
PUMA = open(robots.path("puma560"), encoding="utf-8").read()
GARBAGE = ["nan", "inf", "-inf", "1e309", "", "x", "1 2", "0x10", "-0", "1e-320", "--1",
           "3,5", "１"]


def _mutations(text):
    """Strategies of single edits of an XML or CSV text: a number replaced by garbage, an
    attribute or element removed, an element duplicated, a name changed."""
    numbers = [m.span() for m in re.finditer(r"-?\d+\.?\d*(?:[eE][-+]?\d+)?", text)]
    attributes = [m.span() for m in re.finditer(r'\s\w+="[^"]*"', text)]
    elements = [m.span() for m in re.finditer(r"<(\w+)[^<>]*/>", text)]
    names = [m.span(1) for m in re.finditer(r'(?:name|link|joint)="([^"]*)"', text)]

    def replace(span, new):
        return text[:span[0]] + new + text[span[1]:]

    options = []
    if numbers:
        options.append(st.tuples(st.sampled_from(numbers), st.sampled_from(GARBAGE))
                       .map(lambda a: replace(*a)))
    if attributes:
        options.append(st.sampled_from(attributes).map(lambda s: replace(s, "")))
    if elements:
        options.append(st.sampled_from(elements).map(lambda s: replace(s, "")))
        options.append(st.sampled_from(elements).map(lambda s: replace(s, text[s[0]:s[1]] * 2)))
    if names:
        options.append(st.tuples(st.sampled_from(names), st.sampled_from(["", "a", "world",
                                                                          "panda_link0"]))
                       .map(lambda a: replace(*a)))
    return st.one_of(*options)


def _exercise(model):
    """A loaded model computes finite dynamics at its neutral configuration, or forward
    dynamics says clearly that it is undefined."""
    q, zero = model.neutral, np.zeros(model.nv)
    tau = sd.inverse_dynamics(model, q, zero, zero)
    assert tau.shape == (model.nv,) and np.all(np.isfinite(tau))
    M = sd.mass_matrix(model, q)
    assert np.all(np.isfinite(M))
    try:
        qdd = sd.forward_dynamics(model, q, zero, zero)
    except sd.ModelError as error:
        assert "forward dynamics is undefined" in str(error)
    else:
        assert np.all(np.isfinite(qdd))


@SETTINGS
@given(_mutations(PANDA))
def test_mutated_urdf_loads_or_names_the_problem(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = sd.load_urdf(text)
        except sd.ModelError as error:
            assert str(error)
            return
    _exercise(model)


@SETTINGS
@given(_mutations(PUMA))
def test_mutated_dh_table_loads_or_names_the_problem(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = sd.model.dh.parse_dh_table(text)
        except sd.ModelError as error:
            assert str(error)
            return
    _exercise(model)


MJCF = """<mujoco model="m"><compiler angle="radian"/><worldbody>
  <body name="a" pos="0 0 1"><freejoint/><geom type="box" size="0.1 0.2 0.3"/>
    <body name="b" pos="0.2 0 0"><joint name="h" type="hinge" axis="0 1 0" range="-1 1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.05"/>
      <body name="c" pos="0 0 -0.3"><joint name="s" type="slide" axis="1 0 0"/>
        <joint name="b2" type="ball" pos="0.1 0 0"/><geom type="sphere" size="0.05"/></body>
    </body></body></worldbody></mujoco>"""


@SETTINGS
@given(_mutations(MJCF))
def test_mutated_mjcf_loads_or_names_the_problem(text):
    mujoco = pytest.importorskip("mujoco")
    try:
        m = mujoco.MjModel.from_xml_string(text)
    except ValueError:
        return  # MuJoCo's compiler refuses it (load_mjcf turns that into a ModelError)
    try:
        model = sd.from_mujoco(m)
    except sd.ModelError as error:
        assert str(error)
        return
    assert (model.nq, model.nv) == (m.nq, m.nv)
    _exercise(model)


joint_kinds = st.sampled_from(["revolute", "continuous", "prismatic", "helical", "planar",
                               "spherical", "free", "fixed", "ball", "universal", "", None])
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.just(0.0), st.just(1.0))


@SETTINGS
@given(st.lists(st.tuples(joint_kinds, st.lists(numbers, min_size=3, max_size=3), numbers,
                          numbers, st.integers(0, 5)), min_size=1, max_size=6))
def test_random_builder_input_is_a_model_or_a_model_error(spec):
    """Random joint types, axes, masses and limits through ModelBuilder."""
    b = sd.ModelBuilder("random")
    try:
        b.add_link("l0", mass=1.0, inertia=np.eye(3) * 0.1)
        for i, (kind, axis, mass, limit, parent) in enumerate(spec, 1):
            b.add_link(f"l{i}", mass=mass, inertia=np.eye(3) * 0.01)
            b.add_joint(f"j{i}", kind, f"l{min(parent, i - 1)}", f"l{i}", axis=axis,
                        limits={"lower": -abs(limit), "upper": abs(limit)}
                        if kind in ("revolute", "prismatic") else None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = b.build()
    except sd.ModelError as error:
        assert str(error)
        return
    _exercise(model)
