"""What frames a session's conversation (docs/protocol.md §13.1-§13.2): the
AGENTS.md chain from the repository root down to the workspace, logged as
context/message when first sent and when changed; the system prompt and the
rest of the request's header, logged as request/header once per change."""

from __future__ import annotations

import os

from harnessd_helpers import result_of
from test_deepseek import ds_conn, ds_daemon, mock  # noqa: F401  (the mock fixture)

OK = {"status": "ok", "reason": {"kind": "completed"}}


def of_type(events, kind):
    return [e["data"] for e in events if e["type"] == kind]


def repo_with_instructions(tmp_path):
    repo = tmp_path / "repo"
    sub = repo / "pkg" / "sub"
    sub.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "AGENTS.md").write_text("Use tabs.\n")
    (sub / "AGENTS.md").write_text("Tests live in t/.\n")
    (tmp_path / "AGENTS.md").write_text("outside the repository: never sent\n")
    return repo, sub


def test_agents_md_chain_is_logged_once_and_again_when_changed(spawn, tmp_path):
    repo, sub = repo_with_instructions(tmp_path)
    (repo / "pkg" / "AGENTS.md").symlink_to(tmp_path / "AGENTS.md")  # a link is not followed
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize(cwd=str(sub))
    resp, evs = c.run_prompt("s", "hi")
    assert result_of(resp) == OK
    ctx = of_type(evs, "context/message")
    assert ctx == [{"source": "AGENTS.md", "path": str(repo / "AGENTS.md"), "content": "Use tabs.\n"},
                   {"source": "AGENTS.md", "path": str(sub / "AGENTS.md"), "content": "Tests live in t/.\n"}], ctx
    types = [e["type"] for e in evs]
    assert types.index("context/message") < types.index("step/start")

    resp, evs = c.run_prompt("s", "again")
    assert result_of(resp) == OK and not of_type(evs, "context/message")
    (sub / "AGENTS.md").write_text("Tests live in tests/.\n")
    resp, evs = c.run_prompt("s", "and again")
    assert of_type(evs, "context/message") == [
        {"source": "AGENTS.md", "path": str(sub / "AGENTS.md"), "content": "Tests live in tests/.\n"}]
    d.close_stdin()
    assert d.wait_exit(10) == 0

    # After a restart the log says what was sent: nothing new to log.
    d2 = spawn(stdio=True)
    c2 = d2.stdio_conn()
    c2.initialize(cwd=str(sub))
    resp, evs = c2.run_prompt("s", "after restart")
    assert result_of(resp) == OK
    assert not of_type(evs, "context/message") and not of_type(evs, "request/header")


def test_request_header_is_logged_once_per_change(spawn, tmp_path):
    d = spawn(stdio=True, args=["--system-prompt", "Persona for {{model}} in {{cwd}}."])
    c = d.stdio_conn()
    c.initialize(cwd=str(tmp_path), temperature=0.5)
    resp, evs = c.run_prompt("s", "hi")
    headers = of_type(evs, "request/header")
    assert len(headers) == 1, headers
    h = headers[0]
    assert h["provider"] == "scripted" and h["model"] == "scripted-1"
    assert h["settings"] == {"contextWindow": 128000, "temperature": 0.5}, h
    prompt = h["systemPrompt"]
    assert prompt.startswith("You are a coding agent served by harnessd.")
    assert f"\n\nPersona for scripted-1 in {tmp_path}.\n\n# Tools\n\n## " in prompt, prompt
    sections = [line[3:] for line in prompt.splitlines() if line.startswith("## ")]
    assert sections == [t for t in h["tools"] if t in sections] and "bash" in sections, sections
    assert "read" in h["tools"] and "write" in h["tools"]

    resp, evs = c.run_prompt("s", "@tool glob {\"pattern\": \"*\"}")
    assert result_of(resp) == OK and not of_type(evs, "request/header")  # nothing changed, over two steps

    # Another client with other settings: a new header.
    d.close_stdin()
    d.wait_exit(10)
    d2 = spawn(stdio=True, args=["--system-prompt", "Persona for {{model}} in {{cwd}}."])
    c2 = d2.stdio_conn()
    c2.initialize(cwd=str(tmp_path), temperature=0.7)
    resp, evs = c2.run_prompt("s", "hi")
    assert [h["settings"]["temperature"] for h in of_type(evs, "request/header")] == [0.7]


def test_instructions_reach_the_model_ahead_of_the_first_user_message(spawn, mock, tmp_path):  # noqa: F811
    repo, sub = repo_with_instructions(tmp_path)
    m = mock([{"text": "ok"}])
    d = ds_daemon(spawn, m, args=["--workspace-root", str(repo)])  # a network client: the chain starts at its root
    c = ds_conn(d, cwd="pkg/sub")
    assert result_of(c.run_prompt("s", "first")[0]) == OK
    assert result_of(c.run_prompt("s", "second")[0]) == OK
    for body in m.bodies():
        msgs = body["messages"]
        assert msgs[0]["role"] == "system" and "## bash" in msgs[0]["content"], msgs[0]
        first_user = msgs[1]
        assert first_user["role"] == "user", msgs
        assert first_user["content"].startswith("<workspace-instructions>\n# " + str(repo / "AGENTS.md")), first_user
        assert "Tests live in t/." in first_user["content"] and first_user["content"].endswith("first"), first_user
        assert "never sent" not in first_user["content"]
