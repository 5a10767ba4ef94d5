"""The documentation is true: the Python blocks of README.md and docs/*.md run as shown, in order,
one namespace per file."""
import glob
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
DOCUMENTS = ["README.md"] + sorted(os.path.relpath(p, ROOT)
                                   for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def python_blocks(document):
    with open(os.path.join(ROOT, document), encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_python_blocks_run(document, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")
    monkeypatch.chdir(tmp_path)  # blocks that save files write them here
    jax = pytest.importorskip("jax")
    cache_dir = jax.config.jax_compilation_cache_dir  # a block may set it: restored below
    namespace = {}
    blocks = python_blocks(document)
    assert blocks or document != "README.md", "the README shows no Python"
    try:
        for number, block in enumerate(blocks, 1):
            try:
                exec(compile(block, f"{document} python block {number}", "exec"), namespace)
            except Exception as e:  # name the block that is not true
                raise AssertionError(f"{document} python block {number} fails: {e!r}\n"
                                     f"{block}") from e
    finally:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
