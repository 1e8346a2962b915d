"""A model that fixes a bug the way a real one does, against the OpenAI mock:
grep -> read -> edit -> bash (run the test) over the deepseek provider, in a
small git repository the test makes, over TCP. The model is offered exactly
what tools/list returns, and sees each tool's result in its next request.
The client approves each call that changes something (the network
listener's default policy is `ask`); the reads run without asking."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from harnessd_helpers import is_notification, is_response, result_of
from test_deepseek import ds_conn, ds_daemon, mock  # noqa: F401  (the mock fixture)

OK = {"status": "ok", "reason": {"kind": "completed"}}


def call(name: str, args: dict, call_id: str) -> dict:
    return {"id": call_id, "name": name, "arguments": json.dumps(args)}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_model_fixes_a_bug_in_a_git_repository(spawn, mock, tmp_path):  # noqa: F811
    root = tmp_path / "workspaces"
    repo = root / "calc"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text("import calc\nassert calc.add(2, 3) == 5, calc.add(2, 3)\nprint('tests pass')\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "."],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=repo, check=True)

    script = [
        {"tool_calls": [call("grep", {"pattern": r"def add", "include": "*.py"}, "c1"),
                        call("read", {"file_path": "calc.py"}, "c2")]},
        {"tool_calls": [call("edit", {"file_path": "calc.py", "old_string": "return a - b",
                                      "new_string": "return a + b"}, "c3")]},
        {"tool_calls": [call("bash", {"command": "python3 test_calc.py && git diff --stat",
                                      "description": "run the tests"}, "c4")]},
        {"text": "Fixed: add() subtracted. The tests pass."},
    ]
    m = mock(script)
    d = ds_daemon(spawn, m, args=["--workspace-root", str(root)])
    c = ds_conn(d, cwd="calc")
    offered = result_of(c.response(c.request("tools/list", {})))["tools"]
    start = len(c.frames)
    rid = c.prompt("fix", "add() is wrong; fix it and run the tests")
    approved = []
    scanned = start
    while not any(is_response(f.obj, rid) for f in c.frames[start:]):
        idx, frame = c.wait_frame(lambda o: is_response(o, rid) or (
            is_notification(o, "session.event") and o["params"]["event"]["type"] == "approval/requested"),
            timeout=60, start=scanned, what="an approval request or the response")
        scanned = idx + 1
        if is_response(frame, rid):
            break
        data = frame["params"]["event"]["data"]
        approved.append(data["toolName"])
        c.request("session/approve", {"sessionId": "fix", "approvalId": data["approvalId"], "outcome": "allowed-once"})
    idx, resp = c.response_index(rid)
    events = c.session_events("fix", idx, start)
    assert result_of(resp) == OK, resp
    assert approved == ["edit", "bash"], approved

    results = {e["data"]["callId"]: e["data"] for e in events if e["type"] == "tool/result"}
    assert [cid for cid in results] == ["c1", "c2", "c3", "c4"]
    assert "calc.py:1:def add(a, b):" in results["c1"]["content"][0]["text"]
    assert "-    return a - b" in results["c3"]["meta"]["diff"]
    bash = results["c4"]
    assert not bash["isError"], bash
    assert "tests pass" in bash["content"][0]["text"] and "[exit code: 0]" in bash["content"][0]["text"]
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"

    bodies = m.bodies()
    assert len(bodies) == 4
    # Offered exactly what tools/list returns.
    names = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert names == [t["name"] for t in offered]
    # Each step's request carries the previous step's results.
    last = bodies[3]["messages"]
    tool_messages = [msg for msg in last if msg["role"] == "tool"]
    assert [msg["tool_call_id"] for msg in tool_messages] == ["c1", "c2", "c3", "c4"]
    assert "tests pass" in tool_messages[-1]["content"]
