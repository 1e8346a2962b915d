"""--max-turn-bytes: one turn's events stop at the cap with error code TURN_TOO_LARGE.

Without the cap one `@chunks 64 1048576` prompt grew the daemon from 13 MB to 612 MB and wrote a
128 MiB log line. Past the cap the turn ends as an error, memory stays bounded, the session keeps
working, and its log loads again after a restart.
"""

from __future__ import annotations

import os
import subprocess

from harnessd_helpers import check_turn, final_text, harnessd_bin, read_log, result_of

MIB = 1 << 20
OK = {"status": "ok", "reason": {"kind": "completed"}}


# Memory bounds hold for the Release daemon; a sanitizer's allocator keeps a
# quarantine of freed memory (256 MiB under ASan), so they are not checked there.
SANITIZED = bool(os.environ.get("HARNESSD_SANITIZE"))


def rss_within(d, limit_mib: float) -> bool:
    return SANITIZED or peak_rss_mib(d) < limit_mib


def peak_rss_mib(d) -> float:
    for line in open(f"/proc/{d.proc.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def event_bytes(events: list[dict]) -> int:
    import json
    return sum(len(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode()) for e in events)


def assert_too_large(resp, events, cap: int) -> None:
    res = result_of(resp)
    assert res["status"] == "error", res
    reason = res["reason"]
    assert reason["kind"] == "error" and reason["code"] == "TURN_TOO_LARGE", reason
    assert str(cap) in reason["message"], reason
    check_turn(events)
    assert events[-1]["data"]["reason"] == reason
    # The cut-off step leaves its chunks but no assistant/message.
    assert not [e for e in events if e["type"] == "assistant/message"]
    assert event_bytes(events) <= cap + 4096, event_bytes(events)


def test_turn_over_the_cap_ends_turn_too_large(spawn, tmp_path):
    root = tmp_path / "sessions"
    cap = MIB
    d = spawn(session_root=root, args=["--max-turn-bytes", str(cap)])
    c = d.connect()
    c.initialize()

    # Many small chunks: the turn stops at the chunk that would pass the cap.
    resp, events = c.run_prompt("big", "@chunks 1000 4096")
    assert_too_large(resp, events, cap)
    deltas = [e for e in events if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "text-delta"]
    assert 200 <= len(deltas) < 256, len(deltas)

    # The reported case: 64 chunks of 1 MiB. The first already passes a 1 MiB cap.
    resp, events2 = c.run_prompt("big", "@chunks 64 1048576")
    assert_too_large(resp, events2, cap)
    assert rss_within(d, 100), peak_rss_mib(d)

    # Chunks within the cap, but chunks and message together past it.
    resp, events3 = c.run_prompt("big", "@chunks 150 4096")
    assert_too_large(resp, events3, cap)
    assert len([e for e in events3 if e["type"] == "assistant/chunk"]) == 153  # start, 150 deltas, end, finish

    # The session goes on; the cut turns are not part of its conversation.
    resp, events4 = c.run_prompt("big", "after")
    assert result_of(resp) == OK, resp
    assert final_text(events4) == "echo: after"
    _, logged = read_log(d.log_path("big"))
    assert logged == events + events2 + events3 + events4
    assert d.terminate(5) == 0

    d2 = spawn(session_root=root, args=["--max-turn-bytes", str(cap)])
    c2 = d2.connect()
    c2.initialize()
    resp, events5 = c2.run_prompt("big", "after restart")
    assert result_of(resp) == OK, resp
    check_turn(events5, turn=4)
    assert final_text(events5) == "echo: after restart"
    assert d2.terminate(5) == 0


def test_default_cap_bounds_the_reported_prompt(spawn, tmp_path):
    """64 MiB by default: `@chunks 64 1048576` (64 MiB of text, twice that as events) is cut off."""
    d = spawn(args=["--store", "memory"])
    c = d.connect()
    c.initialize()
    resp, events = c.run_prompt("huge", "@chunks 64 1048576", timeout=120)
    assert_too_large(resp, events, 64 * MIB)
    # Before the cap: 612 MB.
    assert rss_within(d, 250), peak_rss_mib(d)  # about 90 MiB
    del events
    resp, _ = c.run_prompt("huge", "still fine")
    assert result_of(resp) == OK, resp


def test_within_the_cap_completes(spawn):
    d = spawn(args=["--max-turn-bytes", str(MIB)])
    c = d.connect()
    c.initialize()
    resp, events = c.run_prompt("fits", "@chunks 100 4096")
    assert result_of(resp) == OK, resp
    assert len(final_text(events)) == 100 * 4096


def test_help_lists_the_flag():
    out = subprocess.run([harnessd_bin(), "--help"], capture_output=True, text=True, timeout=10).stdout
    assert "--max-turn-bytes" in out and "TURN_TOO_LARGE" in out, out
