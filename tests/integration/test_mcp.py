"""MCP servers as tools (docs/protocol.md "MCP servers"), black box: the
real reference servers (tests/mcp, pinned by its package-lock.json) over
stdio and streamable HTTP, and fake_mcp_server.py for the hostile cases.
Calls are driven through the scripted provider's `@tool NAME JSON`."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harnessd_helpers import is_notification, result_of
from test_websocket import init_params, ws_daemon
from ws_client import ws_conn

REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "tests" / "mcp" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM = MODULES / "server-filesystem" / "dist" / "index.js"
FAKE = Path(__file__).resolve().parent / "fake_mcp_server.py"
CANCELLED = {"kind": "aborted", "reason": "cancelled"}
OK = {"status": "ok", "reason": {"kind": "completed"}}


def _reference_servers():
    """The pinned servers (`npm ci` in tests/mcp; scripts/install-deps.sh
    --browser does it). Missing: a failure under CI, else a skip that says
    what to run."""
    if EVERYTHING.exists() and FILESYSTEM.exists():
        return
    message = (f"MCP reference servers missing: run `npm ci` in {REPO / 'tests' / 'mcp'} "
               "(scripts/install-deps.sh --browser does)")
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    print(f"\nSKIPPED LOUDLY: {message}", file=sys.stderr)
    pytest.skip(message)


def toml_str(s: str) -> str:
    return json.dumps(s)


def mcp_table(name: str, *, command=None, args=(), url=None, headers=None, env=None, timeout_ms=None) -> str:
    lines = [f"[mcp.{name}]"]
    if command is not None:
        lines.append(f"command = {toml_str(command)}")
        lines.append("args = [" + ", ".join(toml_str(a) for a in args) + "]")
    if url is not None:
        lines.append(f"url = {toml_str(url)}")
    if timeout_ms is not None:
        lines.append(f"timeoutMs = {timeout_ms}")
    for key, table in (("env", env), ("headers", headers)):
        if table:
            lines.append(f"[mcp.{name}.{key}]")
            lines += [f"{toml_str(k)} = {toml_str(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def everything_stdio(name: str = "everything") -> str:
    return mcp_table(name, command="node", args=[str(EVERYTHING), "stdio"])


def fake(name: str, *extra: str, timeout_ms=None) -> str:
    return mcp_table(name, command=sys.executable, args=[str(FAKE), *extra], timeout_ms=timeout_ms)


def start(spawn, tmp_path, *tables: str, policy: str = "never", **kw):
    """A TCP daemon with these [mcp.NAME] tables; its connection does not
    ask for approvals unless `policy` says "ask"."""
    config = tmp_path / "harnessd.toml"
    config.write_text("".join(tables))
    d = spawn(args=["--config", str(config)], **kw)
    c = d.connect()
    c.initialize(approvalPolicy=policy)
    return d, c


def tools_of(c) -> dict:
    return {t["name"]: t for t in result_of(c.response(c.request("tools/list", {})))["tools"]}


def wait_tools(c, *names: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        tools = tools_of(c)
        if all(n in tools for n in names):
            return tools
        if time.monotonic() > deadline:
            raise AssertionError(f"tools {names} not offered within {timeout}s: {sorted(tools)}")
        time.sleep(0.1)


def call(c, sid: str, name: str, args: dict, timeout: float = 60):
    """Runs one @tool turn; returns (response, tool/result data, final text)."""
    start_at = len(c.frames)
    resp = c.response(c.prompt(sid, f"@tool {name} {json.dumps(args)}"), timeout=timeout)
    events = [f.obj["params"]["event"] for f in c.frames[start_at:]
              if is_notification(f.obj, "session.event") and f.obj["params"]["sessionId"] == sid]
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    text = "".join(block.get("text", "") for e in events if e["type"] == "assistant/message"
                   for block in e["data"]["content"] if block.get("type") == "text")
    return resp, (results[0] if results else None), text


def result_text(result: dict) -> str:
    return "".join(part["text"] for part in result["content"] if part["type"] == "text")


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the reference servers ----------------------------------------------------


def test_everything_over_stdio_lists_and_calls(spawn, tmp_path):
    _reference_servers()
    d, c = start(spawn, tmp_path, everything_stdio())
    tools = wait_tools(c, "mcp__everything__echo", "mcp__everything__get-tiny-image")
    echo = tools["mcp__everything__echo"]
    assert echo["source"] == "mcp:everything"
    assert echo["readOnly"] is True
    assert echo["inputSchema"]["type"] == "object" and "message" in echo["inputSchema"]["properties"]
    assert tools["mcp__everything__gzip-file-as-resource"]["readOnly"] is False
    assert tools["read"]["source"] == "builtin"
    resp, result, text = call(c, "echo", "mcp__everything__echo", {"message": "hello mcp"})
    assert result_of(resp) == OK, resp
    assert result["isError"] is False
    assert result_text(result) == "Echo: hello mcp"
    assert "mcp__everything__echo said: Echo: hello mcp" in text
    assert "mcp everything: ready" in d.stderr()


def test_everything_image_content_is_a_placeholder(spawn, tmp_path):
    _reference_servers()
    source = (EVERYTHING.parent / "tools" / "get-tiny-image.js").read_text()
    image = base64.b64decode(re.search(r'MCP_TINY_IMAGE\s*=\s*"([^"]+)"', source).group(1))
    d, c = start(spawn, tmp_path, everything_stdio())
    wait_tools(c, "mcp__everything__get-tiny-image")
    resp, result, _ = call(c, "img", "mcp__everything__get-tiny-image", {})
    assert result_of(resp) == OK, resp
    text = result_text(result)
    assert f"[image: image/png, {len(image)} bytes]" in text, text
    assert "iVBOR" not in text  # never the base64 itself


def test_everything_over_streamable_http(spawn, tmp_path):
    _reference_servers()
    port = free_port()
    server = subprocess.Popen(["node", str(EVERYTHING), "streamableHttp"], env={**os.environ, "PORT": str(port)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: _port_open(port), 20, "server-everything to listen")
        d, c = start(spawn, tmp_path, mcp_table("remote", url=f"http://127.0.0.1:{port}/mcp",
                                                headers={"X-Test": "yes"}))
        tools = wait_tools(c, "mcp__remote__echo")
        assert tools["mcp__remote__echo"]["source"] == "mcp:remote"
        resp, result, text = call(c, "http", "mcp__remote__echo", {"message": "over http"})
        assert result_of(resp) == OK, resp
        assert result_text(result) == "Echo: over http"
        assert "mcp__remote__echo said: Echo: over http" in text
        # A second call reuses the session the server gave at initialize.
        resp, result, _ = call(c, "http", "mcp__remote__echo", {"message": "again"})
        assert result_text(result) == "Echo: again"
        # The endpoint goes away: calls fail fast, and the client finds it
        # again (a new session) once it is back.
        server.kill()
        server.wait(5)
        resp, result, _ = call(c, "http", "mcp__remote__echo", {"message": "gone"})
        assert result["error"]["code"] == "MCP_UNAVAILABLE", result
        server = subprocess.Popen(["node", str(EVERYTHING), "streamableHttp"],
                                  env={**os.environ, "PORT": str(port)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(lambda: d.stderr().count("mcp remote: ready") >= 2, 30, "the reconnection")
        resp, result, _ = call(c, "http", "mcp__remote__echo", {"message": "back"})
        assert result_text(result) == "Echo: back", result
    finally:
        server.kill()
        server.wait(5)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_filesystem_server_reads_a_file(spawn, tmp_path):
    _reference_servers()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "note.txt").write_text("the filesystem server read this\n")
    d, c = start(spawn, tmp_path, mcp_table("fs", command="node", args=[str(FILESYSTEM), str(shared)]))
    tools = wait_tools(c, "mcp__fs__read_text_file", "mcp__fs__write_file")
    assert tools["mcp__fs__read_text_file"]["readOnly"] is True
    assert tools["mcp__fs__write_file"]["readOnly"] is False
    resp, result, _ = call(c, "fs", "mcp__fs__read_text_file", {"path": str(shared / "note.txt")})
    assert result_of(resp) == OK, resp
    assert result_text(result) == "the filesystem server read this\n"
    resp, result, _ = call(c, "fs", "mcp__fs__read_text_file", {"path": "/etc/passwd"})
    assert result["isError"] is True and result["error"]["code"] == "MCP_TOOL_ERROR", result


def test_killed_server_is_restarted(spawn, tmp_path):
    _reference_servers()
    d, c = start(spawn, tmp_path, everything_stdio())
    wait_tools(c, "mcp__everything__echo")
    children = [p for p in children_of(d.proc.pid) if "index.js" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(children) == 1, children
    os.kill(children[0], signal.SIGKILL)
    wait_for(lambda: d.stderr().count("mcp everything: ready") >= 2, 20, "the restart")
    resp, result, _ = call(c, "after", "mcp__everything__echo", {"message": "back"})
    assert result_text(result) == "Echo: back", result
    assert children[0] not in children_of(d.proc.pid)


def test_cancel_during_a_long_call_ends_the_turn_promptly(spawn, tmp_path):
    _reference_servers()
    d, c = start(spawn, tmp_path, everything_stdio())
    wait_tools(c, "mcp__everything__trigger-long-running-operation")
    t0 = time.monotonic()
    p = c.prompt("long", '@tool mcp__everything__trigger-long-running-operation {"duration": 30, "steps": 3}')
    c.wait_frame(lambda o: is_notification(o, "session.event") and o["params"]["event"]["type"] == "tool/call",
                 timeout=10)
    cid = c.request("session/cancel", {"sessionId": "long"})
    assert result_of(c.response(cid, timeout=5)) == {"cancelled": True}
    resp = c.response(p, timeout=5)
    assert time.monotonic() - t0 < 5, "the cancel did not interrupt the MCP call"
    assert result_of(resp) == {"status": "aborted", "reason": CANCELLED}
    # The server lives on and answers the next call.
    resp, result, _ = call(c, "long", "mcp__everything__echo", {"message": "still here"})
    assert result_text(result) == "Echo: still here"


def test_websocket_client_sees_and_calls_mcp_tools(spawn, tmp_path):
    _reference_servers()
    config = tmp_path / "harnessd.toml"
    config.write_text(everything_stdio())
    d = ws_daemon(spawn, "--config", str(config))
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params(approvalPolicy="never"))
    wait_tools(c, "mcp__everything__echo")
    resp, result, text = call(c, "ws", "mcp__everything__echo", {"message": "over ws"})
    assert result_text(result) == "Echo: over ws"
    assert "mcp__everything__echo said: Echo: over ws" in text


# -- the fake server: failures and hostile input ------------------------------


def test_call_while_down_is_unavailable_then_recovers(spawn, tmp_path):
    down = tmp_path / "down"
    d, c = start(spawn, tmp_path, fake("f", "--down-file", str(down)))
    wait_tools(c, "mcp__f__exit")
    down.write_text("stay down")
    resp, result, _ = call(c, "s", "mcp__f__exit", {})
    assert result["error"]["code"] == "MCP_UNAVAILABLE", result
    wait_for(lambda: "fake: told to stay down" in d.stderr(), 10, "a failed restart")
    resp, result, _ = call(c, "s", "mcp__f__echo", {"text": "x"})
    assert result["isError"] and result["error"]["code"] == "MCP_UNAVAILABLE", result
    down.unlink()
    wait_for(lambda: d.stderr().count("mcp f: ready") >= 2, 20, "the recovery")
    resp, result, _ = call(c, "s", "mcp__f__echo", {"text": "x"})
    assert result_text(result) == "echo: x", result


def test_timeout_gives_mcp_timeout_and_cancels_on_the_server(spawn, tmp_path):
    log = tmp_path / "fake.log"
    d, c = start(spawn, tmp_path, fake("slow", "--log", str(log), timeout_ms=800))
    wait_tools(c, "mcp__slow__sleep")
    t0 = time.monotonic()
    resp, result, _ = call(c, "t", "mcp__slow__sleep", {})
    assert 0.7 < time.monotonic() - t0 < 5
    assert result["error"]["code"] == "MCP_TIMEOUT", result
    calls = [m for m in log_lines(log) if m.get("method") == "tools/call"]
    cancels = wait_for(lambda: [m for m in log_lines(log) if m.get("method") == "notifications/cancelled"], 5,
                       "notifications/cancelled")
    assert cancels[0]["params"]["requestId"] == calls[0]["id"]
    # The protocol as written: initialize first, then initialized.
    methods = [m.get("method") for m in log_lines(log)]
    assert methods[:2] == ["initialize", "notifications/initialized"], methods
    assert log_lines(log)[0]["params"]["protocolVersion"] == "2025-06-18"


def test_cancel_sends_notifications_cancelled(spawn, tmp_path):
    log = tmp_path / "fake.log"
    d, c = start(spawn, tmp_path, fake("slow", "--log", str(log)))
    wait_tools(c, "mcp__slow__sleep")
    p = c.prompt("c", "@tool mcp__slow__sleep {}")
    wait_for(lambda: [m for m in log_lines(log) if m.get("method") == "tools/call"], 10, "the call")
    t0 = time.monotonic()
    c.response(c.request("session/cancel", {"sessionId": "c"}), timeout=5)
    assert result_of(c.response(p, timeout=5)) == {"status": "aborted", "reason": CANCELLED}
    assert time.monotonic() - t0 < 2
    call_id = [m for m in log_lines(log) if m.get("method") == "tools/call"][0]["id"]
    cancels = wait_for(lambda: [m for m in log_lines(log) if m.get("method") == "notifications/cancelled"], 5,
                       "notifications/cancelled")
    assert cancels[0]["params"]["requestId"] == call_id


def test_hostile_output_is_repaired_dropped_or_ignored(spawn, tmp_path):
    d, c = start(spawn, tmp_path, fake("h", timeout_ms=3000))
    wait_tools(c, "mcp__h__bad_utf8")
    resp, result, text = call(c, "h", "mcp__h__bad_utf8", {})
    assert result_of(resp) == OK, resp
    assert result_text(result) == "bad \ufffd here \ufffd", result
    resp, result, _ = call(c, "h", "mcp__h__garbage", {})
    assert result_text(result) == "after garbage", result
    resp, result, _ = call(c, "h", "mcp__h__ping_me", {})
    assert result_text(result) == "pinged", result
    resp, result, _ = call(c, "h", "mcp__h__huge", {})
    assert result["error"]["code"] == "MCP_TIMEOUT", result
    assert "dropped a message over 16777216 bytes" in d.stderr()
    resp, result, _ = call(c, "h", "mcp__h__fails", {})
    assert result["isError"] and result["error"]["code"] == "MCP_TOOL_ERROR"
    assert result_text(result) == "it went wrong"
    resp, result, _ = call(c, "h", "mcp__h__echo", {"text": "fine"})
    assert result_text(result) == "echo: fine"
    # Every event the daemon logged is valid JSON (UTF-8 repaired).
    for line in d.log_path("h").read_bytes().splitlines():
        json.loads(line.decode("utf-8"))


def test_paginated_list_and_list_changed(spawn, tmp_path):
    d, c = start(spawn, tmp_path, fake("p", "--pages", "1"))
    tools = wait_tools(c, "mcp__p__echo", "mcp__p__ping_me")
    assert sum(1 for n in tools if n.startswith("mcp__p__")) == 9
    assert tools["mcp__p__echo"]["readOnly"] is True and tools["mcp__p__sleep"]["readOnly"] is False
    assert "mcp__p__grown" not in tools
    resp, result, _ = call(c, "g", "mcp__p__grow", {})
    assert result_text(result) == "grew"
    tools = wait_tools(c, "mcp__p__grown", timeout=10)
    assert tools["mcp__p__grown"]["source"] == "mcp:p"
    resp, result, _ = call(c, "g", "mcp__p__grown", {"text": "new"})
    assert result_text(result) == "grown: new"


def test_only_read_only_mcp_tools_run_without_approval(spawn, tmp_path):
    d, c = start(spawn, tmp_path, fake("f"), policy="ask")
    wait_tools(c, "mcp__f__echo", "mcp__f__fails")
    resp, result, _ = call(c, "a", "mcp__f__echo", {"text": "no question"})
    assert result_text(result) == "echo: no question"
    start_at = len(c.frames)
    p = c.prompt("a", "@tool mcp__f__fails {}")
    _, asked = c.wait_frame(lambda o: is_notification(o, "session.event")
                         and o["params"]["event"]["type"] == "approval/requested", timeout=10)
    data = asked["params"]["event"]["data"]
    assert data["toolName"] == "mcp__f__fails"
    c.response(c.request("session/approve", {"sessionId": "a", "approvalId": data["approvalId"],
                                             "outcome": "allowed-once"}), timeout=5)
    result_of(c.response(p, timeout=10))
    results = [f.obj["params"]["event"]["data"] for f in c.frames[start_at:]
               if is_notification(f.obj, "session.event") and f.obj["params"]["event"]["type"] == "tool/result"]
    assert results[0]["error"]["code"] == "MCP_TOOL_ERROR", results


def test_unsupported_protocol_version_keeps_the_server_down(spawn, tmp_path):
    d, c = start(spawn, tmp_path, fake("old", "--version", "2024-11-05"))
    wait_for(lambda: "speaks MCP 2024-11-05" in d.stderr(), 10, "the refusal")
    assert not any(n.startswith("mcp__old__") for n in tools_of(c))


def test_daemon_stop_kills_the_servers(spawn, tmp_path):
    d, c = start(spawn, tmp_path, fake("f"))
    wait_tools(c, "mcp__f__echo")
    children = children_of(d.proc.pid)
    assert children
    assert d.terminate(10) == 0
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


@pytest.mark.parametrize("body,message", [
    ("[mcp.x]\ncommand = \"a\"\nbogus = 1\n", 'line 3: unknown key "bogus" in [mcp.x]'),
    ("[mcp.x]\nargs = [\"a\"]\n", "needs either \"command\""),
    ("[mcp.x]\ncommand = \"a\"\nurl = \"http://h/mcp\"\n", "needs either \"command\""),
    ("[mcp.x]\nurl = \"ftp://h/mcp\"\n", "[mcp.x] url"),
    ("[mcp.x]\ncommand = \"a\"\ntimeoutMs = 0\n", "timeoutMs"),
    ("mcp = 3\n", "\"mcp\" must be tables"),
])
def test_bad_mcp_config_is_refused_with_its_line(tmp_path, body, message):
    from harnessd_helpers import harnessd_bin
    config = tmp_path / "bad.toml"
    config.write_text(body)
    proc = subprocess.run([harnessd_bin(), "--config", str(config), "--stdio"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=20)
    assert proc.returncode != 0, proc
    assert message in proc.stderr.decode(), proc.stderr
    assert str(config) in proc.stderr.decode()
