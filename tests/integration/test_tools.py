"""The agent's tools, driven without a model through the scripted provider's
`@tool NAME JSON` directive (docs/protocol.md §12), over stdio, TCP and
WebSocket: tools/list, workspaces and their confinement, read-before-write,
parallel read-only calls, todo/write, bash in its sandbox."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from harnessd_helpers import INVALID_PARAMS, TLS_MODE, error_of, is_notification, result_of
from test_websocket import init_params, ws_daemon
from ws_client import ws_conn

OK = {"status": "ok", "reason": {"kind": "completed"}}


def tool_line(name: str, args: dict) -> str:
    return f"@tool {name} {json.dumps(args)}"


def events_of(frames, session_id, kind=None):
    out = []
    for f in frames:
        o = f.obj
        if is_notification(o, "session.event") and o["params"]["sessionId"] == session_id:
            e = o["params"]["event"]
            if kind is None or e["type"] == kind:
                out.append(e)
    return out


def run_tools(conn, session_id, *calls, start=None):
    """Runs one prompt of @tool lines; returns (response, tool/result events' data in order)."""
    start = len(conn.frames) if start is None else start
    text = "\n".join(tool_line(name, args) for name, args in calls)
    resp = conn.response(conn.prompt(session_id, text), timeout=60)
    results = [e["data"] for e in events_of(conn.frames[start:], session_id, "tool/result")]
    return resp, results


@pytest.fixture
def stdio_ws(spawn, tmp_path):
    """A stdio daemon whose workspace is a fresh directory."""
    ws = tmp_path / "ws"
    ws.mkdir()
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize(cwd=str(ws))
    return c, ws


def test_tools_list_names_every_builtin(stdio_ws):
    c, _ = stdio_ws
    tools = result_of(c.response(c.request("tools/list", {})))["tools"]
    names = {t["name"]: t for t in tools}
    for name in ("read", "write", "edit", "glob", "grep", "bash", "task_output", "task_list", "task_kill",
                 "todo_write", "ask_user_question", "subagent"):
        assert name in names, f"{name} missing from tools/list: {sorted(names)}"
        tool = names[name]
        assert tool["source"] == "builtin"
        assert tool["inputSchema"]["type"] == "object"
        assert tool["description"]
    assert names["read"]["readOnly"] and names["grep"]["readOnly"] and names["glob"]["readOnly"]
    assert not names["write"]["readOnly"] and not names["bash"]["readOnly"]
    assert names["read"]["inputSchema"]["required"] == ["file_path"]


def test_write_edit_read_in_the_workspace(stdio_ws):
    c, ws = stdio_ws
    resp, results = run_tools(c, "files", ("write", {"file_path": "notes/a.txt", "content": "one\ntwo\n"}))
    assert result_of(resp) == OK, resp
    assert not results[0]["isError"], results
    assert (ws / "notes" / "a.txt").read_text() == "one\ntwo\n"
    assert "+one" in results[0]["meta"]["diff"]

    # The model said what each call returned.
    final = "".join(e["data"]["chunk"].get("text", "") for e in events_of(c.frames, "files", "assistant/chunk"))
    assert "write said:" in final

    # Overwriting needs a read of the current content first.
    (ws / "b.txt").write_text("user's\n")
    _, results = run_tools(c, "files", ("edit", {"file_path": "b.txt", "old_string": "user's", "new_string": "x"}))
    assert results[0]["isError"] and results[0]["error"]["code"] == "FS_NOT_OBSERVED", results
    _, results = run_tools(c, "files", ("read", {"file_path": "b.txt"}))
    assert results[0]["content"][0]["text"].rstrip().endswith("1\tuser's"), results
    _, results = run_tools(c, "files", ("edit", {"file_path": "b.txt", "old_string": "user's", "new_string": "ours"}))
    assert not results[0]["isError"], results
    assert (ws / "b.txt").read_text() == "ours\n"
    assert "-user's" in results[0]["meta"]["diff"] and "+ours" in results[0]["meta"]["diff"]


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "/proc/self/root/etc/passwd", "link/x"])
def test_paths_outside_the_workspace_are_refused(stdio_ws, path):
    c, ws = stdio_ws
    (ws / "link").symlink_to(ws.parent)
    resp, results = run_tools(c, "escape", ("write", {"file_path": path, "content": "pwned"}),
                              start=len(c.frames))
    assert result_of(resp) == OK
    assert results[0]["error"]["code"] == "PATH_OUTSIDE_WORKSPACE", results
    assert not (ws.parent / "outside.txt").exists() and not (ws.parent / "x").exists()


def test_unknown_tool_and_bad_arguments(stdio_ws):
    c, _ = stdio_ws
    _, results = run_tools(c, "bad", ("no_such_tool", {}), ("read", {"offset": 3}))
    assert [r["error"]["code"] for r in results] == ["UNKNOWN_TOOL", "INVALID_ARGUMENTS"]
    assert "file_path" in results[1]["error"]["message"]


def test_read_only_calls_of_a_step_run_together_and_answer_in_order(stdio_ws):
    c, ws = stdio_ws
    for i in range(3):
        (ws / f"f{i}.txt").write_text(f"content {i}\n")
    start = len(c.frames)
    resp, results = run_tools(c, "par", *[("read", {"file_path": f"f{i}.txt"}) for i in range(3)], start=start)
    assert result_of(resp) == OK
    assert [r["callId"] for r in results] == ["call_0", "call_1", "call_2"]
    assert [f"content {i}" in r["content"][0]["text"] for i, r in enumerate(results)] == [True] * 3
    # Every tool/call of the step comes before the first tool/result.
    kinds = [e["type"] for e in events_of(c.frames[start:], "par") if e["type"] in ("tool/call", "tool/result")]
    assert kinds == ["tool/call"] * 3 + ["tool/result"] * 3, kinds


def test_todo_write_is_logged_and_survives_a_restart(spawn, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize(cwd=str(ws))
    todos = [{"content": "find the bug", "status": "completed"}, {"content": "fix it", "status": "in_progress"}]
    resp, results = run_tools(c, "plan", ("todo_write", {"todos": todos}))
    assert result_of(resp) == OK and not results[0]["isError"]
    assert [e["data"]["todos"] for e in events_of(c.frames, "plan", "todo/write")] == [todos]
    d.close_stdin()
    assert d.wait_exit(10) == 0
    d2 = spawn(stdio=True)
    c2 = d2.stdio_conn()
    c2.initialize()
    events = result_of(c2.response(c2.request("session/events", {"sessionId": "plan"})))["events"]
    assert any(e["type"] == "todo/write" and e["data"]["todos"] == todos for e in events)
    # The workspace is in the log: a client without cwd still works there.
    _, results = run_tools(c2, "plan", ("glob", {"pattern": "*"}))
    assert not results[0]["isError"], results


def test_ask_user_question_over_stdio(stdio_ws):
    c, _ = stdio_ws
    rid = c.prompt("ask", tool_line("ask_user_question", {"questions": [{"id": "q", "question": "tabs?"}]}))
    _, frame = c.wait_frame(lambda o: is_notification(o, "session.event")
                            and o["params"]["event"]["type"] == "question/requested", what="question/requested")
    qid = frame["params"]["event"]["data"]["questionId"]
    answer = {"sessionId": "ask", "questionId": qid, "answers": [{"id": "q", "selected": [], "custom": "spaces"}]}
    assert result_of(c.response(c.request("session/answer", answer))) == {"accepted": True}
    assert result_of(c.response(rid)) == OK
    results = [e["data"] for e in events_of(c.frames, "ask", "tool/result")]
    assert json.loads(results[0]["content"][0]["text"]) == answer["answers"]


# -- network listeners: workspaces under --workspace-root -----------------------------


def test_network_cwd_is_confined_to_the_workspace_root(spawn, tmp_path):
    root = tmp_path / "roots"
    d = spawn(args=["--workspace-root", str(root)])
    c = d.connect()
    rid = c.request("initialize", {"cwd": "../../etc"})
    err = error_of(c.response(rid))
    assert err["code"] == INVALID_PARAMS and err["data"]["cwd"] == "../../etc", err
    c2 = d.connect()
    rid = c2.request("initialize", {"sandbox": "danger-full-access"})
    assert error_of(c2.response(rid))["code"] == INVALID_PARAMS
    c3 = d.connect()
    c3.initialize(cwd="project", approvalPolicy="never")
    _, results = run_tools(c3, "net", ("write", {"file_path": "hello.txt", "content": "hi\n"}))
    assert not results[0]["isError"], results
    assert (root / "project" / "hello.txt").read_text() == "hi\n"
    # Without cwd each session gets a directory of its own.
    c4 = d.connect()
    c4.initialize(approvalPolicy="never")
    _, results = run_tools(c4, "own-dir", ("write", {"file_path": "x.txt", "content": "x"}))
    assert not results[0]["isError"], results
    assert (root / "own-dir" / "x.txt").read_text() == "x"


def test_tools_over_websocket(spawn, tmp_path):
    d = ws_daemon(spawn, "--workspace-root", str(tmp_path / "roots"))
    c = ws_conn(d, d.ws_port)
    c.initialize(**init_params(cwd="w", approvalPolicy="never"))
    names = {t["name"] for t in result_of(c.response(c.request("tools/list", {})))["tools"]}
    assert "read" in names
    _, results = run_tools(c, "ws", ("write", {"file_path": "a", "content": "b"}), ("glob", {"pattern": "*"}))
    assert not results[0]["isError"] and "a" in results[1]["content"][0]["text"], results


def test_the_session_store_inside_a_workspace_is_out_of_reach(spawn, tmp_path):
    """The default session root (./.sessions) may sit inside a stdio client's
    workspace: no tool reads, lists or greps another session's log."""
    ws = tmp_path / "proj"
    ws.mkdir()
    (ws / "code.py").write_text("SECRET_WORD = 1\n")
    d = spawn(stdio=True, session_root=ws / ".sessions")
    c = d.stdio_conn()
    c.initialize(cwd=str(ws))
    assert result_of(c.run_prompt("other", "SECRET_WORD is in this prompt")[0]) == OK
    _, results = run_tools(c, "look", ("grep", {"pattern": "SECRET_WORD"}), ("glob", {"pattern": "**/*"}),
                           ("read", {"file_path": ".sessions/other.jsonl"}))
    grep, glob, read = results
    assert "code.py" in grep["content"][0]["text"] and ".sessions" not in grep["content"][0]["text"], grep
    assert ".sessions" not in glob["content"][0]["text"], glob
    assert read["isError"] and read["error"]["code"] == "PATH_OUTSIDE_WORKSPACE", read
    _, results = run_tools(c, "look", ("bash", {"command": "ls -A .sessions | wc -l", "description": "peek"}))
    text = results[0]["content"][0]["text"]
    assert text.startswith("0\n") or results[0].get("error", {}).get("code") == "SANDBOX_UNAVAILABLE", results


# -- web_fetch ---------------------------------------------------------------------------


class _Pages:
    """A loopback HTTP server: /page (HTML), /hop/N (redirects N more times), /big (6 MB)."""

    def __init__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                if self.path == "/page":
                    body = b"<html><script>evil()</script><p>Hello &amp; welcome</p></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                elif self.path.startswith("/hop/"):
                    n = int(self.path.rsplit("/", 1)[1])
                    self.send_response(302)
                    self.send_header("Location", f"/hop/{n - 1}" if n > 0 else "/page")
                    body = b""
                elif self.path == "/big":
                    body = b"x" * (6 * 1024 * 1024)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                else:
                    body = b"nope"
                    self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped at its size limit

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.server.shutdown()


@pytest.fixture
def pages():
    p = _Pages()
    yield p
    p.close()


def test_web_fetch_is_off_by_default(stdio_ws):
    c, _ = stdio_ws
    names = {t["name"] for t in result_of(c.response(c.request("tools/list", {})))["tools"]}
    assert "web_fetch" not in names
    _, results = run_tools(c, "web", ("web_fetch", {"url": "http://example.com/"}))
    assert results[0]["error"]["code"] == "UNKNOWN_TOOL"


def test_web_fetch_refuses_private_addresses_unless_allowed(spawn, tmp_path, pages):
    d = spawn(stdio=True, args=["--web-fetch", "on"])
    c = d.stdio_conn()
    c.initialize(cwd=str(tmp_path))
    _, results = run_tools(c, "web", ("web_fetch", {"url": pages.url("/page")}),
                           ("web_fetch", {"url": "http://localhost:1/"}),
                           ("web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"}),
                           ("web_fetch", {"url": "file:///etc/passwd"}))
    assert [r["error"]["code"] for r in results] == ["BLOCKED_ADDRESS", "BLOCKED_ADDRESS", "BLOCKED_ADDRESS",
                                                     "INVALID_URL"], results

    d2 = spawn(stdio=True, args=["--web-fetch", "on", "--web-fetch-allow-private"],
               session_root=tmp_path / "s2")
    c2 = d2.stdio_conn()
    c2.initialize(cwd=str(tmp_path))
    _, results = run_tools(c2, "web", ("web_fetch", {"url": pages.url("/hop/3")}),
                           ("web_fetch", {"url": pages.url("/hop/5")}), ("web_fetch", {"url": pages.url("/big")}),
                           ("web_fetch", {"url": pages.url("/missing")}))
    page, too_many, big, missing = results
    assert not page["isError"], page
    assert "Hello & welcome" in page["content"][0]["text"] and "evil" not in page["content"][0]["text"]
    assert page["meta"]["url"].endswith("/page")
    assert too_many["error"]["code"] == "TOO_MANY_REDIRECTS"
    assert big["error"]["code"] == "FETCH_FAILED" and "5 MB" in big["error"]["message"]
    assert missing["error"]["code"] == "HTTP_ERROR" and "404" in missing["error"]["message"]


def _processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(entry.name))
    return pids


def test_a_stopping_daemon_kills_its_tools_processes(spawn, tmp_path):
    marker = f"sleep 3{os.getpid() % 1000:03d}"
    # The drain gives the running turn half a second, then cancels it.
    d = spawn(args=["--workspace-root", str(tmp_path / "roots"), "--drain-timeout-ms", "500"])
    c = d.connect()
    c.initialize(cwd="w", onDisconnect="continue", approvalPolicy="never")
    _, results = run_tools(c, "bg", ("bash", {"command": f"{marker} & {marker}", "description": "wait",
                                              "run_in_background": True}))
    if results[0].get("error", {}).get("code") == "SANDBOX_UNAVAILABLE":
        pytest.skip("bubblewrap cannot confine commands on this host")
    assert "taskId" in results[0]["meta"], results
    rid = c.prompt("fg", tool_line("bash", {"command": marker, "description": "block"}))
    deadline = time.monotonic() + 10
    while len(_processes_with(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_processes_with(marker)) >= 3, "the background and foreground commands did not start"
    d.signal(signal.SIGTERM)
    assert d.wait_exit(20) == 0
    deadline = time.monotonic() + 5
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_with(marker), "tool processes outlived the daemon"
    del rid
