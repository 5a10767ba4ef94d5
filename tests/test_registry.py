"""One registry of public functions (issue 26): every public array function of ``screwdyn``'s
namespace is registered, and ``sd.plan`` and ``sd.compile`` (native and JAX) are built from the
registry, so every registered function plans, compiles and runs native in every algebra it has.
The program cache's fingerprint covers every module whose code reaches a program."""
import inspect
import os

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.execution import cache, plan

#: public functions of (model, q, ...) that are not in the registry, and why
NOT_REGISTERED = {
    "dynamics_derivatives": "a view in three parts of the registered "
                            "inverse_dynamics_derivatives and forward_dynamics_derivatives",
    "integrate": "configuration arithmetic (numpy expressions, no recursion)",
}


def _array_functions():
    """The names in ``sd.__all__`` of functions taking (model, q, ...)."""
    out = []
    for name in sd.__all__:
        obj = getattr(sd, name)
        if inspect.isfunction(obj):
            params = list(inspect.signature(obj).parameters)
            if params[:2] == ["model", "q"]:
                out.append(name)
    return sorted(out)


def test_every_public_array_function_is_registered():
    names = _array_functions()
    assert len(names) >= 14, names  # the enumeration finds them
    missing = [n for n in names if n not in plan.REGISTRY and n not in NOT_REGISTERED]
    assert not missing, f"public array functions outside the registry: {missing}"
    for name, function in plan.REGISTRY.items():
        assert getattr(sd, name) is function.public, name  # the registry's callable is public
        assert name in sd.__all__, name
        assert function.public.__doc__, name


def _args(model, function, seed=0):
    rng = np.random.default_rng(seed)
    sizes = {"q": model.nq, "qd": model.nv, "qdd": model.nv, "tau": model.nv}
    return [rng.uniform(-1, 1, (3, sizes[n])) for n in function.inputs]


STATIC = {"jacobian": {"link": "link6", "frame": "local"}, "link_velocities": {"frame": "world"}}


@pytest.mark.parametrize("algebra", ["spatial", "cga", "dq", "vector"])
def test_every_registered_function_plans_compiles_and_runs_native(algebra):
    """The Puma 560 (a DH robot: every algebra, the DH recursion included): the plan says
    native, the native program equals the numpy path, and ``sd.compile`` makes it (spatial)."""
    puma = sd.robots.load("puma560")
    for name, function in sorted(plan.REGISTRY.items()):
        try:
            used = plan.public_algebra(function, algebra)
        except ValueError as error:  # an algebra the function has not: said so, everywhere
            assert name in ("inverse_dynamics_regressor", "center_of_mass"), name
            for call in (lambda: sd.plan(puma, name, algebra, **STATIC.get(name, {})),
                         lambda: sd.compile(puma, name, algebra, **STATIC.get(name, {}))):
                with pytest.raises(ValueError, match=str(error).split(";")[0][:30]):
                    call()
            continue
        static = STATIC.get(name, {})
        keyword = {"algebra": algebra} if plan.takes(function, "algebra") else {}
        args = _args(puma, function)
        p = sd.plan(puma, name, algebra, **static)
        assert p.path == "native", (name, algebra, p.explain())
        assert p.algebra == used
        got = function.public(puma, *args, **static, **keyword)  # the native program
        previous = sd.execution.use_native(False)
        try:
            want = function.public(puma, *args, **static, **keyword)  # numpy
        finally:
            sd.execution.use_native(previous)
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=name)
        if algebra == "spatial":  # sd.compile's function (optimised code: once per function)
            f = sd.compile(puma, name, algebra, **static)
            np.testing.assert_allclose(f(*args), got, rtol=1e-12, atol=1e-12, err_msg=name)


def test_static_arguments_are_checked_by_plan_and_compile():
    panda = sd.robots.load("panda")
    with pytest.raises(ValueError, match="jacobian needs link="):
        sd.compile(panda, "jacobian")
    p = sd.plan(panda, "jacobian")  # the path needs no link; compiling does
    assert p.path == "native"
    with pytest.raises(ValueError, match=r"sd.plan\(model, 'jacobian', link=..., frame=...\)"):
        p.compile()
    assert sd.plan(panda, "jacobian", link="panda_hand").compile().output_shape == (6, 9)
    for call in (sd.plan, sd.compile):
        with pytest.raises(ValueError, match="inverse_dynamics takes no link"):
            call(panda, "inverse_dynamics", link="panda_hand")
        with pytest.raises(ValueError, match="frame must be 'world' or 'local'"):
            call(panda, "link_velocities", frame="body")
        with pytest.raises(ValueError, match="unknown function 'jacobians'; valid: bias_forces"):
            call(panda, "jacobians")
        with pytest.raises(ValueError, match="center_of_mass runs in the spatial algebra only"):
            call(panda, "center_of_mass", algebra="cga")
        with pytest.raises(ValueError, match="center_of_mass takes no gravity"):
            call(panda, "center_of_mass", gravity=np.zeros(3)) if call is sd.compile else \
                call(panda, "center_of_mass", gravity=True)
    with pytest.raises(Exception, match="panda_handle"):  # a link that does not exist
        sd.compile(panda, "jacobian", link="panda_handle")


def test_the_jax_compile_takes_every_registered_function():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    panda = sd.robots.load("panda")
    q, qd = panda.neutral, np.linspace(-1, 1, 9)
    for name in ("link_velocities", "jacobian", "inverse_dynamics_regressor"):
        function = plan.REGISTRY[name]
        static = {"link": "panda_hand"} if name == "jacobian" else {}
        f = sd.compile(panda, name, backend="jax", numpy=True, **static)
        args = [q, qd, qd][:len(function.inputs)]
        np.testing.assert_allclose(f(*args), function.public(panda, *args, **static),
                                   rtol=1e-12, atol=1e-12, err_msg=name)


def test_link_velocities_are_the_jacobians_times_qd_through_the_plan():
    panda = sd.robots.load("panda")
    rng = np.random.default_rng(1)
    q, qd = rng.uniform(-1, 1, (5, 9)), rng.uniform(-1, 1, (5, 9))
    for frame in ("local", "world"):
        v = sd.link_velocities(panda, q, qd, frame)
        assert v.shape == (5, panda.nlinks, 6)
        for k, link in enumerate(panda.link_names):
            J = sd.jacobian(panda, q, link, frame)
            np.testing.assert_allclose(v[:, k], np.einsum("nij,nj->ni", J, qd), atol=1e-12)
    assert sd.plan(panda, "link_velocities").path == "native"  # no longer beside the plan
    assert sd.link_velocities(panda, np.zeros((0, 9)), np.zeros((0, 9))).shape == (0, 13, 6)


def test_the_cache_fingerprint_covers_the_code_that_reaches_programs():
    package = os.path.dirname(sd.__file__)
    covered = {os.path.relpath(f, package) for f in cache.source_files()}
    for needed in ("identification.py", "algorithms/regressor.py", "dynamics.py",
                   "algorithms/rnea.py", "algebra/cga.py", "algebra/dualquat.py",
                   "model/joints.py", "execution/trace.py", "execution/llvm.py",
                   "sim/contact.py", "sim/integrators.py", "controllers.py"):
        assert needed in covered, needed
    for outside in ("viewer/viewer.py", "cli.py", "rollouts/dataset.py"):
        assert outside not in covered, outside  # editing them keeps the compiled programs


def test_the_fingerprint_is_kept_on_disk_for_the_same_sources(tmp_path, monkeypatch):
    """The digest of the reachable sources, computed once (parsing every module's imports),
    is read back by a later process with the same sources instead of parsed again; it equals
    the one computed."""
    package = os.path.dirname(sd.__file__)
    monkeypatch.setattr(cache, "_STATE", dict(cache._STATE, directory=str(tmp_path),
                                               source=None))
    first = cache.source_fingerprint()
    assert first == cache._fingerprint(package, cache._roots())
    monkeypatch.setitem(cache._STATE, "source", None)  # a new process, the same sources

    def parse_again(*args):
        raise AssertionError("the fingerprint was computed again")

    monkeypatch.setattr(cache, "_fingerprint", parse_again)
    assert cache.source_fingerprint() == first


def test_the_import_scanner_reads_every_form_of_import(tmp_path):
    """The fingerprint's file set comes from import statements read as text: every form (one
    or several levels up, parentheses over lines with comments, function-level, ``import a.b
    as c``, a backslash continuation) is found, and on every module of the package it finds
    at least what Python's own parser finds (``ast``; more only from examples in docstrings)."""
    import ast

    folder = tmp_path / "screwdyn" / "sim"
    folder.mkdir(parents=True)
    (folder / "mod.py").write_text(
        "from . import contact, loops as L\n"
        "from ..algorithms import (rnea,  # comment\n    aba as forward)\n"
        "import numpy as np, screwdyn.model.urdf as urdf\n"
        "def f():\n    from ..execution.trace import fori_loop\n"
        "    from .step import \\\n        stage\n")
    found = set(cache._imports(str(tmp_path / "screwdyn"), str(folder / "mod.py")))
    assert found == {"screwdyn.sim", "screwdyn.sim.contact", "screwdyn.sim.loops",
                     "screwdyn.algorithms", "screwdyn.algorithms.rnea",
                     "screwdyn.algorithms.aba", "screwdyn.model.urdf",
                     "screwdyn.execution.trace", "screwdyn.execution.trace.fori_loop",
                     "screwdyn.sim.step", "screwdyn.sim.step.stage"}

    package = os.path.dirname(sd.__file__)
    for file in cache._package_files(package):
        here = os.path.relpath(file, os.path.dirname(package))[:-3].split(os.sep)[:-1]
        parsed = set()
        for node in ast.walk(ast.parse(open(file, encoding="utf-8").read())):
            if isinstance(node, ast.Import):
                parsed |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = (here[:len(here) - node.level + 1] if node.level else []) + (
                    node.module.split(".") if node.module else [])
                parsed |= {".".join(base)} | {".".join(base + [a.name]) for a in node.names}
        parsed = {m for m in parsed if m.startswith("screwdyn.")}
        assert parsed <= set(cache._imports(package, file)), file
