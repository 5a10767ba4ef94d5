"""The README is true: its Python blocks run, in order, as shown."""
import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


def python_blocks():
    with open(README, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")
    monkeypatch.chdir(tmp_path)  # blocks that save files write them here
    namespace = {}
    blocks = python_blocks()
    assert blocks, "the README shows no Python"
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"README.md python block {number}", "exec"), namespace)
        except Exception as e:  # name the block that is not true
            raise AssertionError(f"README python block {number} fails: {e!r}\n{block}") from e
