"""The READMEs' examples run as written against the real daemon.

Every ```python block runs: the first one is upstream's quick start, run
unchanged with the default ``deepseek`` provider pointed at a local fake
endpoint; each later one runs as a script and must print exactly the
```text block that follows it. (```py blocks need a listening daemon; the
network tests cover them.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import PYTHON_DIR

FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)

QUICK_START = """from deepseek_harness import DeepSeekHarness

with DeepSeekHarness() as harness:
    result = harness.run("Say hi.")
"""


def examples(readme: str) -> list[tuple[str, str | None]]:
    """(code, expected output or None) for each python block."""

    out: list[tuple[str, str | None]] = []
    for lang, body in FENCE.findall((PYTHON_DIR / readme).read_text(encoding="utf-8")):
        if lang == "python":
            out.append((body, None))
        elif lang == "text" and out and out[-1][1] is None:
            out[-1] = (out[-1][0], body)
    return out


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_quick_start_is_upstreams_and_runs(readme, harnessd_bin, fake_deepseek, tmp_path, monkeypatch):
    code, _ = examples(readme)[0]
    assert code == QUICK_START
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESSD_BIN", str(harnessd_bin))
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-readme")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", fake_deepseek.base_url)
    namespace: dict = {}
    exec(compile(code, f"{readme}:quick-start", "exec"), namespace)
    result = namespace["result"]
    assert (result.status, result.final_response) == ("ok", fake_deepseek.reply)
    assert fake_deepseek.requests[0]["body"]["model"] == "deepseek-v4-flash"


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_examples_print_what_they_show(readme, harnessd_bin, tmp_path):
    blocks = examples(readme)[1:]
    assert len(blocks) >= 3
    env = dict(os.environ, HARNESSD_BIN=str(harnessd_bin), PYTHONPATH=str(PYTHON_DIR))
    for index, (code, expected) in enumerate(blocks, start=1):
        assert expected is not None, f"python block {index} of {readme} has no output block"
        script = tmp_path / f"example{index}.py"
        script.write_text(code, encoding="utf-8")
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected, f"block {index} of {readme}"
    assert list((tmp_path / "demo-sessions").glob("*.jsonl"))
