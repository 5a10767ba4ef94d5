"""The API reference site and the typed surface: ``mkdocs build --strict`` passes (a broken
reference, link or docstring section fails it), every public name has its entry, the examples in
the docstrings run, and mypy accepts the typed modules (configured in pyproject.toml)."""
import glob
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest

import screwdyn as sd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
REFERENCE = sorted(glob.glob(os.path.join(ROOT, "docs", "reference", "*.md")))


def documented():
    """The identifiers of the reference pages' ``::: screwdyn.x.y`` entries."""
    names = []
    for page in REFERENCE:
        with open(page, encoding="utf-8") as f:
            names += re.findall(r"^::: (screwdyn[\w.]*)", f.read(), re.M)
    return names


def resolve(identifier):
    obj = sd
    for part in identifier.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def test_every_public_name_has_a_reference_entry():
    entries = documented()
    top = {name.split(".")[1] for name in entries if name.count(".") == 1}
    assert set(sd.__all__) <= top, f"not in docs/reference: {sorted(set(sd.__all__) - top)}"
    for name in entries:
        resolve(name)  # every entry names something that exists
    assert len(entries) == len(set(entries)), "an entry appears twice"


def test_docstring_examples_run(tmp_path, monkeypatch):
    """Every ```python block in the docstring of a documented object runs."""
    monkeypatch.chdir(tmp_path)
    ran = 0
    for name in documented():
        doc = inspect.getdoc(resolve(name)) or ""
        for block in re.findall(r"```python\n(.*?)```", doc, re.S):
            try:
                exec(compile(textwrap.dedent(block), f"{name} example", "exec"), {})
            except Exception as e:
                raise AssertionError(f"the example of {name} fails: {e!r}\n{block}") from e
            ran += 1
    assert ran >= 5


def test_api_reference_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), os.environ.get(
                   "PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                             str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "site" / "reference" / "dynamics" / "index.html",
              encoding="utf-8") as f:
        page = f.read()
    assert "inverse_dynamics" in page and "f_ext" in page and "(..., nv)" in page
    with open(tmp_path / "site" / "index.html", encoding="utf-8") as f:
        assert 'src="viewer_panda.png"' in f.read()  # the README, its links made relative


def test_public_surface_type_checks(tmp_path):
    pytest.importorskip("mypy")
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir",
                             str(tmp_path / "mypy_cache")], cwd=ROOT, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Success" in result.stdout


def test_public_functions_of_the_typed_modules_are_annotated():
    from screwdyn import dynamics, viewer

    for module in (dynamics, viewer):
        for name in getattr(module, "__all__", None) or dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or not inspect.isfunction(obj) \
                    or obj.__module__ != module.__name__:
                continue
            signature = inspect.signature(obj)
            missing = [p for p, v in signature.parameters.items()
                       if v.annotation is inspect.Parameter.empty]
            assert not missing and signature.return_annotation is not inspect.Signature.empty, \
                f"{module.__name__}.{name}: unannotated {missing or 'return'}"
