"""Long sessions fit the model's window (docs/protocol.md §13): before a
request that would fill 80 % of `contextWindow` the conversation is
summarized by the session's own provider, logged as compact/* events, and a
restarted daemon rebuilds the same model context from the log. The scripted
provider refuses a request over the window with CONTEXT_WINDOW_EXCEEDED,
as a real endpoint does, and reports its context with `@context`."""

from __future__ import annotations

import re

from harnessd_helpers import INVALID_PARAMS, check_turn, error_of, result_of

OK = {"status": "ok", "reason": {"kind": "completed"}}
WINDOW = 4000


def prompt_text(i: int) -> str:
    # About 250 tokens by the bytes/4 estimate; its echo as many again.
    return f"turn {i}: " + " ".join(f"word{i}-{j}" for j in range(110))


def test_thirty_turns_in_a_small_window_compact_and_replay_the_same_context(spawn, tmp_path):
    root = tmp_path / "sessions"
    d = spawn(stdio=True, session_root=root)
    c = d.stdio_conn()
    c.initialize(contextWindow=WINDOW)
    summaries = []
    for i in range(30):
        for sid in ("a", "b"):  # twins: the same conversation
            resp, evs = c.run_prompt(sid, prompt_text(i))
            assert result_of(resp) == OK, (i, resp)
            check_turn(evs, turn=i)
            if sid == "a":
                summaries += [e for e in evs if e["type"] == "compact/summary"]
                types = [e["type"] for e in evs]
                if "compact/start" in types:
                    # Before the request, and complete.
                    assert types.index("compact/start") < types.index("step/start"), types
                    assert types.count("compact/end") == 1
                    end = next(e for e in evs if e["type"] == "compact/end")
                    assert "error" not in end["data"], end
    assert len(summaries) >= 4, f"{len(summaries)} compactions in 30 turns"
    for s in summaries:
        data = s["data"]
        assert re.fullmatch(r"scripted summary of \d+ messages", data["summary"]), data
        assert data["tokensAfter"] < data["tokensBefore"] <= WINDOW, data
        assert data["tokensBefore"] * 5 >= WINDOW * 4, data
    # Each summary shadows everything before the newest messages, its predecessor included.
    assert summaries[0]["data"]["shadowedSeqs"][0] == 1  # the first user/message
    for prev, cur in zip(summaries, summaries[1:]):
        assert cur["data"]["shadowedSeqs"][0] == prev["seq"], (prev, cur)

    resp, evs = c.run_prompt("b", "@context")
    assert result_of(resp) == OK
    live = evs[-2]["data"]["content"][0]["text"] if evs[-2]["type"] == "assistant/message" else None
    live = next(e for e in evs if e["type"] == "assistant/message")["data"]["content"][0]["text"]
    messages = int(re.match(r"context: (\d+) messages", live).group(1))
    assert messages < 12, live  # a summary and the newest messages, not 60
    d.close_stdin()
    assert d.wait_exit(10) == 0

    d2 = spawn(stdio=True, session_root=root)
    c2 = d2.stdio_conn()
    c2.initialize(contextWindow=WINDOW)
    resp, evs = c2.run_prompt("a", "@context")
    assert result_of(resp) == OK
    replayed = next(e for e in evs if e["type"] == "assistant/message")["data"]["content"][0]["text"]
    assert replayed == live


def test_a_request_over_the_window_is_compacted_first(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize(contextWindow=WINDOW)
    for i in range(3):
        assert result_of(c.run_prompt("s", prompt_text(i))[0]) == OK
    # One prompt that takes the next request far past the window.
    big = " ".join(f"x{j}" for j in range(2400))  # about 2400 tokens
    resp, evs = c.run_prompt("s", big)
    assert result_of(resp) == OK, resp
    types = [e["type"] for e in evs]
    assert "compact/summary" in types and types.index("compact/end") < types.index("step/start"), types
    assert "CONTEXT_WINDOW_EXCEEDED" not in str(evs)


def test_a_message_larger_than_the_window_fails_the_turn_clearly(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize(contextWindow=1000)
    resp, evs = c.run_prompt("s", "y" * 8000)
    res = result_of(resp)
    assert res["status"] == "error" and res["reason"]["code"] == "CONTEXT_WINDOW_EXCEEDED", res
    ends = [e["data"] for e in evs if e["type"] == "compact/end"]
    assert ends and "error" in ends[-1], evs
    # The session goes on with prompts that fit.
    assert result_of(c.run_prompt("s2", "small")[0]) == OK


def test_context_window_is_checked(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    for bad in (10, "big", 10**12):
        err = error_of(c.response(c.request("initialize", {"contextWindow": bad})))
        assert err["code"] == INVALID_PARAMS and "contextWindow" in err["message"], err
