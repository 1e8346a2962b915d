"""The README examples run as written against the real daemon."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import PYTHON_DIR

EXAMPLE = re.compile(r"```python\n(.*?)```", re.S)
OUTPUT = re.compile(r"```text\n(.*?)```", re.S)


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_example_runs(readme, harnessd_bin, tmp_path):
    text = (PYTHON_DIR / readme).read_text(encoding="utf-8")
    code = EXAMPLE.search(text).group(1)
    expected = OUTPUT.search(text).group(1)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ, HARNESSD_BIN=str(harnessd_bin), PYTHONPATH=str(PYTHON_DIR))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
    assert list((tmp_path / "demo-sessions").glob("*.jsonl"))
