"""The SDK's view of harnessd's tools: ``tools_list()`` (typed ToolInfo
models, on the fake runtime and on the real daemon) and the ``sandbox``
option sent as ``initialize.sandbox``.
"""

from __future__ import annotations

import json

import pytest

from deepseek_harness import DeepSeekHarness, HarnessClient
from deepseek_harness.models import SANDBOX_VALUES, ToolInfo, ToolsListResponse


def test_tools_models_validate_the_wire_shape():
    info = ToolInfo.model_validate({"name": "bash", "description": "Run a command.", "readOnly": False,
                                    "source": "builtin", "inputSchema": {"type": "object"}, "extra": 1})
    assert (info.name, info.description, info.read_only, info.source) == ("bash", "Run a command.", False, "builtin")
    assert info.input_schema == {"type": "object"}
    assert info.model_dump(by_alias=True) == {"name": "bash", "description": "Run a command.",
                                              "inputSchema": {"type": "object"}, "readOnly": False,
                                              "source": "builtin"}
    assert ToolsListResponse.model_validate({"tools": []}).tools == []
    for bad in ({}, {"tools": {}}, {"tools": [{"name": "x"}]}, {"tools": [{"name": 1, "inputSchema": {}}]},
                {"tools": [{"name": "x", "inputSchema": {}, "readOnly": "yes"}]}):
        with pytest.raises(ValueError):
            ToolsListResponse.model_validate(bad)


def test_tools_sandbox_is_checked_before_sending():
    assert SANDBOX_VALUES == ("read-only", "workspace-write", "danger-full-access")
    client = HarnessClient()
    with pytest.raises(ValueError, match="sandbox"):
        client.initialize(cwd=".", provider="scripted", model="m", sandbox="none")


def test_tools_list_and_sandbox_on_the_fake(fake_client, fake_harness):
    tools = fake_client("echo_runtime.py").tools_list()
    assert [(t.name, t.read_only, t.source) for t in tools] == [
        ("read", True, "builtin"), ("mcp__everything__echo", False, "mcp:everything")]
    assert tools[0].input_schema["required"] == ["file_path"]
    assert all(isinstance(t, ToolInfo) for t in tools)

    with fake_harness(provider="scripted", sandbox="read-only") as harness:
        params = json.loads(harness.run("@initparams").final_response)
        assert params["sandbox"] == "read-only"
        assert [t.name for t in harness.tools_list()] == ["read", "mcp__everything__echo"]
    with fake_harness(provider="scripted") as harness:
        assert "sandbox" not in json.loads(harness.run("@initparams").final_response)


def test_tools_list_on_the_daemon(harnessd_bin, tmp_path):
    with DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(tmp_path),
                         session_root=str(tmp_path / "s"), request_timeout_seconds=60) as harness:
        tools = {t.name: t for t in harness.tools_list()}
    for name in ("read", "write", "edit", "glob", "grep", "bash", "todo_write"):
        assert name in tools, sorted(tools)
        assert tools[name].source == "builtin"
        assert tools[name].description
        assert tools[name].input_schema.get("type") == "object"
    assert tools["read"].read_only and tools["grep"].read_only
    assert not tools["write"].read_only and not tools["bash"].read_only
    assert "file_path" in tools["write"].input_schema.get("properties", {})


def test_tools_sandbox_read_only_on_the_daemon(harnessd_bin, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    prompt = '@tool write {"file_path":"a.txt","content":"hi\\n"}'

    def tool_results(sandbox):
        with DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(work),
                             session_root=str(tmp_path / "s"), request_timeout_seconds=60,
                             sandbox=sandbox) as harness:
            result = harness.run(prompt)
        assert result.status == "ok", result.reason
        return [e["data"] for e in result.events if e.get("type") == "tool/result"]

    [denied] = tool_results("read-only")
    assert denied["isError"] is True and denied["error"]["code"] == "SANDBOX_READ_ONLY"
    assert not (work / "a.txt").exists()
    [written] = tool_results("workspace-write")
    assert written["isError"] is False and "+hi" in written["meta"]["diff"]
    assert (work / "a.txt").read_text() == "hi\n"
