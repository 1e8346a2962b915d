"""Approvals and questions through the SDK (harnessd's approvalPolicy "ask",
session/approve and session/answer), end to end against the real daemon
with the scripted provider's ``@tool`` lines."""

from __future__ import annotations

import asyncio
import json

import pytest

from deepseek_harness import DeepSeekHarness
from deepseek_harness.api import NO_HANDLER_MESSAGE
from deepseek_harness.errors import InvalidParamsError
from deepseek_harness.models import (
    ApprovalDecision,
    ApprovalRequest,
    QuestionAnswer,
    QuestionRequest,
)


def write_line(path: str, content: str = "hi\n") -> str:
    return "@tool write " + json.dumps({"file_path": path, "content": content})


QUESTIONS = [
    {"id": "db", "question": "Which database?", "header": "Storage",
     "options": [{"label": "Postgres", "description": "shared"}, {"label": "SQLite"}]},
    {"id": "extras", "question": "What else?", "options": [{"label": "tests"}, {"label": "docs"}],
     "multi_select": True},
]


def ask_line(questions=QUESTIONS) -> str:
    return "@tool ask_user_question " + json.dumps({"questions": questions})


def tool_result(result) -> dict:
    return next(e["data"] for e in result.events if e["type"] == "tool/result")


def event_types(result) -> list[str]:
    return [e["type"] for e in result.events]


@pytest.fixture
def asking(harnessd_bin, session_root, tmp_path):
    """A harness on a stdio daemon that asks (approval_policy="ask")."""

    h = DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), session_root=str(session_root),
                        cwd=str(tmp_path), request_timeout_seconds=60, shutdown_timeout_seconds=5,
                        approval_policy="ask")
    with h:
        yield h


def test_handler_allows_and_the_file_is_written(asking, tmp_path):
    seen: list[ApprovalRequest] = []

    def allow(request: ApprovalRequest) -> ApprovalDecision:
        seen.append(request)
        assert not (tmp_path / "a.txt").exists(), "the call ran before it was decided"
        return ApprovalDecision.allow_once()

    result = asking.run(write_line("a.txt", "allowed\n"), approval_handler=allow)
    assert result.status == "ok", result.reason
    assert (tmp_path / "a.txt").read_text() == "allowed\n"
    [request] = seen
    assert request.tool_name == "write" and request.call_id == "call_0"
    assert request.arguments == {"file_path": "a.txt", "content": "allowed\n"}
    assert request.reason and request.approval_id and request.session_id == result.session_id
    resolved = [e["data"] for e in result.events if e["type"] == "approval/resolved"]
    assert resolved == [{"approvalId": request.approval_id, "outcome": "allowed-once", "source": "client"}]
    assert tool_result(result)["isError"] is False


def test_without_a_handler_the_sdk_rejects(asking, tmp_path):
    result = asking.run(write_line("b.txt"))
    assert result.status == "ok", result.reason
    assert not (tmp_path / "b.txt").exists()
    data = tool_result(result)
    assert data["isError"] is True and data["error"]["code"] == "REJECTED"
    assert NO_HANDLER_MESSAGE in data["content"][0]["text"]
    assert "approval/resolved" in event_types(result)


def test_session_handler_rejects_with_a_message_and_allows_for_the_session(asking, tmp_path):
    decisions = iter([ApprovalDecision.reject("not now"), "allowed-for-session"])
    session = asking.start_session("handled")
    session.approval_handler = lambda request: next(decisions)
    rejected = session.run(write_line("c.txt"))
    assert "not now" in tool_result(rejected)["content"][0]["text"]
    assert not (tmp_path / "c.txt").exists()
    allowed = session.run(write_line("c.txt"))
    assert (tmp_path / "c.txt").exists()
    # allowed-for-session: the next write of the session is not asked about.
    again = session.run(write_line("d.txt"))
    assert (tmp_path / "d.txt").exists()
    assert "approval/requested" in event_types(allowed) and "approval/requested" not in event_types(again)


def test_an_async_handler(asking, tmp_path):
    async def allow(request):
        await asyncio.sleep(0)
        return True

    result = asking.run(write_line("e.txt"), approval_handler=allow)
    assert result.status == "ok" and (tmp_path / "e.txt").exists()


def test_question_handler_answers(asking):
    asked: list[QuestionRequest] = []

    def answer(request: QuestionRequest):
        asked.append(request)
        return [QuestionAnswer(id="db", selected=["SQLite"]), {"id": "extras", "selected": ["tests", "docs"],
                                                               "custom": "and a README"}]

    result = asking.run(ask_line(), question_handler=answer)
    assert result.status == "ok", result.reason
    [request] = asked
    assert [q.id for q in request.questions] == ["db", "extras"]
    assert request.questions[0].header == "Storage" and request.questions[0].options[0].description == "shared"
    assert request.questions[1].multi_select is True and request.questions[0].multi_select is False
    assert json.loads(tool_result(result)["content"][0]["text"]) == [
        {"id": "db", "selected": ["SQLite"]},
        {"id": "extras", "selected": ["tests", "docs"], "custom": "and a README"}]
    assert [e["data"]["outcome"] for e in result.events if e["type"] == "question/resolved"] == ["answered"]


def test_without_a_question_handler_the_questions_are_declined(asking):
    result = asking.run(ask_line())
    assert result.status == "ok", result.reason
    assert json.loads(tool_result(result)["content"][0]["text"]) == []


def test_plain_client_methods_and_not_pending(asking, tmp_path):
    client = asking.client
    ids: list[str] = []

    def allow_by_hand(request: ApprovalRequest):
        assert client.session_approve(request.session_id, request.approval_id, "allowed-once") is True
        ids.append(request.approval_id)
        return "rejected"  # too late: the SDK's own answer finds it settled, and ignores that

    result = asking.run(write_line("f.txt"), approval_handler=allow_by_hand)
    assert result.status == "ok" and (tmp_path / "f.txt").exists()
    with pytest.raises(InvalidParamsError) as info:
        client.session_approve(result.session_id, ids[0], ApprovalDecision.reject("late"))
    assert info.value.data["reason"] == "not-pending"
    with pytest.raises(ValueError):
        client.session_approve(result.session_id, ids[0], "cancelled")
    with pytest.raises(InvalidParamsError):
        client.session_answer(result.session_id, "no-such-question", [])


def test_approval_policy_is_checked():
    with pytest.raises(ValueError):
        DeepSeekHarness(provider="scripted", approval_policy="sometimes").client.initialize(
            cwd=".", provider="scripted", model="m", approval_policy="sometimes")


def test_network_daemon_asks_by_default(listening_daemon, tmp_path):
    # A network client's cwd lies under the daemon's workspace root.
    daemon = listening_daemon()
    with DeepSeekHarness(provider="scripted", address=daemon.url("tcp"), cwd=str(tmp_path),
                         request_timeout_seconds=60) as h:
        result = h.run(write_line("g.txt"), approval_handler=lambda r: "allowed-once")
        assert result.status == "ok"
        assert "approval/requested" in event_types(result)
        assert len(list(tmp_path.rglob("g.txt"))) == 1
    with DeepSeekHarness(provider="scripted", address=daemon.url("tcp"), cwd=str(tmp_path), approval_policy="never",
                         request_timeout_seconds=60) as never:
        quiet = never.run(write_line("h.txt"))
    assert "approval/requested" not in event_types(quiet)
    assert len(list(tmp_path.rglob("h.txt"))) == 1


def test_a_subagents_calls_are_decided_too(asking, tmp_path):
    """A subagent's tool call waits in the subagent's own session: the turn's
    handler decides it, and without one the SDK rejects it (no wait for the
    daemon's timeout)."""

    seen: list[ApprovalRequest] = []
    result = asking.run('@subagent ' + write_line("sub.txt"), approval_handler=lambda r: seen.append(r) or True)
    assert result.status == "ok", result.reason
    assert (tmp_path / "sub.txt").exists()
    [request] = seen
    assert request.tool_name == "write" and request.session_id != result.session_id
    # The subagent's events stay out of the parent's turn.
    assert {n.payload.get("sessionId", result.session_id) for n in result.notifications} == {result.session_id}

    refused = asking.run('@subagent ' + write_line("sub2.txt"))
    assert refused.status == "ok", refused.reason
    assert not (tmp_path / "sub2.txt").exists()
    assert NO_HANDLER_MESSAGE in refused.final_response
