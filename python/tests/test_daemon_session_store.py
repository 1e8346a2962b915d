"""session/list, session/events, session/subscribe, session/unsubscribe and
onDisconnect end to end against the real harnessd (docs/protocol.md §4.1,
§4.6-4.10), scripted provider, jsonl store."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from conftest import read_log
from deepseek_harness import DeepSeekHarness, HarnessClient, HarnessConfig, InitializeResponse
from deepseek_harness.errors import InvalidParamsError, JsonRpcError, SessionBusyError, TransportClosedError

LONG_TURN = "@delay 20\n@chunks 100 4"  # about 2 s, 100 chunks


def start_turn(harness: DeepSeekHarness, session_id: str, text: str = LONG_TURN, count: int = 1):
    """Run *text* on a thread; returns (thread, outcome, seen) once *count*
    notifications of the turn have arrived."""

    outcome: dict = {}
    seen: list = []
    ready = threading.Event()

    def note(notification):
        seen.append(notification)
        if len(seen) >= count:
            ready.set()

    def run():
        try:
            outcome["result"] = harness.run(text, session_id=session_id, on_notification=note)
        except Exception as exc:  # reported by the test
            outcome["error"] = exc
        finally:
            ready.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(20), "the turn did not start"
    assert "error" not in outcome, outcome.get("error")
    return thread, outcome, seen


def drop_connection(harness: DeepSeekHarness) -> None:
    """Cut a network connection the way a crashed client does (no shutdown)."""

    harness.client._link.channel.sock.shutdown(socket.SHUT_RDWR)


def network_harness(daemon, tmp_path, **options) -> DeepSeekHarness:
    options.setdefault("request_timeout_seconds", 60)
    return DeepSeekHarness(provider="scripted", address=daemon.url("tcp"), cwd=str(tmp_path), **options)


def wait_until(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ----------------------------------------------------------------- initialize


def test_daemon_on_disconnect_is_accepted_and_checked(harnessd_bin, tmp_path):
    config = HarnessConfig(runtime_bin=str(harnessd_bin), env={"DSH_SESSION_ROOT": str(tmp_path / "s")},
                           request_timeout_seconds=30, shutdown_timeout_seconds=5)
    with HarnessClient(config) as client:
        with pytest.raises(InvalidParamsError) as info:
            client.request("initialize", {"onDisconnect": "later"}, response_model=InitializeResponse)
        assert str(info.value) == 'params.onDisconnect must be "cancel" or "continue"'
        assert info.value.code == -32602
        # A failed initialize may be retried.
        init = client.initialize(cwd=str(tmp_path), provider="scripted", model="m", on_disconnect="continue")
        assert init.serverInfo.name == "deepseek-harness-sdk-runtime"
        assert client.session_prompt("s", [{"type": "text", "text": "hi"}]).status == "ok"
    for value in ("cancel", "continue"):
        with DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(tmp_path),
                             session_root=str(tmp_path / "s"), on_disconnect=value) as harness:
            assert harness.run("hi").status == "ok"


# ----------------------------------------------------------------- session/list


def test_daemon_session_list(harness, session_root):
    for name in ("a", "b", "c"):
        assert harness.run("hi", session_id=name).status == "ok"
    parent = harness.run("@subagent hello", session_id="p")
    child = next(n.payload["childSessionId"] for n in parent.notifications if n.method == "subagent.started")
    harness.run("again", session_id="a")
    client = harness.client

    everything = list(client.iter_sessions(limit=2))
    ids = [s.session_id for s in everything]
    assert sorted(ids) == sorted(["a", "b", "c", "p", child])
    keys = [(-s.updated_at, s.session_id) for s in everything]
    assert keys == sorted(keys)  # updatedAt descending, then sessionId
    assert ids[0] == "a"
    for info in everything:
        log = read_log(session_root, info.session_id)
        assert info.created_at == log[0]["createdAt"]
        assert info.last_seq == log[-1]["seq"] and info.updated_at == log[-1]["time"]
        assert info.turns == (2 if info.session_id == "a" else 1)
        assert info.running is False
        assert info.parent_session_id == ("p" if info.session_id == child else None)

    page = client.session_list(limit=2)
    assert [s.session_id for s in page.sessions] == ids[:2] and page.next_cursor
    page = client.session_list(limit=2, cursor=page.next_cursor)
    assert [s.session_id for s in page.sessions] == ids[2:4]
    page = harness.list_sessions(limit=2, cursor=page.next_cursor)
    assert [s.session_id for s in page.sessions] == ids[4:] and page.next_cursor is None
    assert [s.session_id for s in harness.list_sessions().sessions] == ids
    assert [s.session_id for s in harness.iter_sessions(limit=1)] == ids

    for kwargs, message in (
        ({"limit": 0}, "params.limit must be within 1..1000"),
        ({"limit": 1001}, "params.limit must be within 1..1000"),
        ({"limit": "5"}, "params.limit must be an integer"),
        ({"cursor": "not a cursor"}, "params.cursor is not a cursor of session/list"),
    ):
        with pytest.raises(InvalidParamsError) as info:
            client.session_list(**kwargs)
        assert str(info.value) == message


# ----------------------------------------------------------------- session/delete


def test_daemon_session_delete(harness, session_root):
    client = harness.client
    assert harness.run("hi", session_id="doomed").status == "ok"
    assert (session_root / "doomed.jsonl").is_file()
    assert client.session_delete("doomed") is True
    assert not (session_root / "doomed.jsonl").exists()
    assert "doomed" not in [s.session_id for s in client.iter_sessions()]
    with pytest.raises(InvalidParamsError) as info:
        client.session_delete("doomed")
    assert (str(info.value), info.value.session_id) == ("unknown session: doomed", "doomed")
    # The id is free again: a new session from seq 0.
    again = harness.run("hi again", session_id="doomed")
    assert again.events[0]["seq"] == 0 and again.events[0]["data"]["turn"] == 0


def test_daemon_session_delete_of_a_running_session_is_busy(harness):
    thread, outcome, _ = start_turn(harness, "running")
    with pytest.raises(SessionBusyError) as info:
        harness.client.session_delete("running")
    assert info.value.session_id == "running"
    assert harness.client.session_cancel("running")
    thread.join(30)
    assert outcome["result"].status == "aborted"


def test_daemon_session_list_reads_an_earlier_daemons_logs(harnessd_bin, tmp_path, session_root):
    def harness():
        return DeepSeekHarness(provider="scripted", runtime_bin=str(harnessd_bin), cwd=str(tmp_path),
                               session_root=str(session_root), shutdown_timeout_seconds=5)

    with harness() as first:
        first.run("one", session_id="old-1")
        first.run("two", session_id="old-2")
    with harness() as second:
        listed = {s.session_id: s for s in second.iter_sessions()}
        assert set(listed) == {"old-1", "old-2"}
        assert listed["old-2"].last_seq == read_log(session_root, "old-2")[-1]["seq"]
        second.run("three", session_id="new")
        assert [s.session_id for s in second.iter_sessions()][0] == "new"


# ----------------------------------------------------------------- session/events


def test_daemon_session_events(harness, session_root):
    session = harness.start_session("ev")
    one = session.run("one")
    two = session.run("@chunks 5 3")
    logged = read_log(session_root, "ev")[1:]
    assert logged == one.events + two.events
    last = logged[-1]["seq"]
    client = harness.client

    page = client.session_events("ev", limit=3)
    assert (page.events, page.last_seq, page.more) == (logged[:3], last, True)
    page = session.events(after_seq=2, limit=1000)
    assert (page.events, page.more) == (logged[3:], False)
    assert client.session_events("ev", after_seq=7, limit=1).events == [logged[8]]
    for after in (last, last + 10):
        page = client.session_events("ev", after_seq=after)
        assert (page.events, page.last_seq, page.more) == ([], last, False)
    assert list(client.iter_session_events("ev", limit=4)) == logged
    assert list(session.iter_events(after_seq=last - 3)) == logged[-3:]
    # The newest page first, as docs/protocol.md suggests.
    assert client.session_events("ev", after_seq=last - 5, limit=5).events == logged[-5:]

    with pytest.raises(InvalidParamsError) as info:
        client.session_events("no-such-session")
    err = info.value
    assert isinstance(err, JsonRpcError) and err.code == -32602
    assert str(err) == "unknown session: no-such-session"
    assert err.session_id == "no-such-session" and err.data == {"sessionId": "no-such-session"}
    for kwargs, message in (
        ({"after_seq": -2}, "params.afterSeq must be -1 or more"),
        ({"limit": 0}, "params.limit must be within 1..1000"),
    ):
        with pytest.raises(InvalidParamsError) as info:
            client.session_events("ev", **kwargs)
        assert str(info.value) == message
    with pytest.raises(InvalidParamsError, match="params.sessionId must not be empty"):
        client.session_events("")


# ----------------------------------------------------------------- session/subscribe


def test_daemon_subscribe_errors_and_unsubscribe(harness):
    client = harness.client
    before = list(client._subscriptions)
    with pytest.raises(InvalidParamsError) as info:
        client.session_subscribe("ghost", after_seq=-1)
    assert str(info.value) == "unknown session: ghost" and info.value.session_id == "ghost"
    assert client._subscriptions == before

    harness.run("hi", session_id="s")
    subscription = client.session_subscribe("s")
    with pytest.raises(InvalidParamsError, match="already subscribed: s"):
        client.session_subscribe("s", after_seq=0)
    with pytest.raises(InvalidParamsError, match="params.afterSeq must be -1 or more"):
        client.session_subscribe("s", after_seq=-2)
    assert not subscription.closed
    assert client.session_unsubscribe("s") is True
    assert subscription.closed and subscription.unsubscribed is True
    assert client.session_unsubscribe("s") is False
    assert harness.start_session("s").unsubscribe() is False
    with harness.start_session("s").subscribe() as again:
        assert again.last_seq == 10  # a first turn logs 11 events, its request/header included
    assert again.unsubscribed is True


def test_daemon_subscribe_replays_then_follows(harness):
    first = harness.run("hi", session_id="s")  # seq 0..10
    session = harness.start_session("s")
    with session.subscribe(after_seq=4) as subscription:
        assert (subscription.last_seq, subscription.seen_seq) == (10, 4)
        replayed = [subscription.next_event(timeout_seconds=5) for _ in range(6)]
        assert replayed == first.events[5:]
        # This connection's own turn comes once, through the prompt and the
        # subscription alike.
        second = session.run("again")
        live = list(subscription.events(timeout_seconds=10, until_turn_end=True))
        assert live == second.events and [e["seq"] for e in live] == list(range(11, 21))
        with pytest.raises(TimeoutError):
            subscription.next(timeout_seconds=0.2)
        assert subscription.seen_seq == 20
    assert subscription.unsubscribed is True
    # Without after_seq nothing is replayed.
    with session.subscribe() as quiet:
        assert (quiet.last_seq, quiet.seen_seq) == (20, 20)
        with pytest.raises(TimeoutError):
            quiet.next(timeout_seconds=0.2)
    assert harness.client._notifications.qsize() == 0


def test_daemon_subscribe_while_this_connection_runs_a_turn(harness, session_root):
    harness.run("hi", session_id="mine")  # seq 0..10
    thread, outcome, _ = start_turn(harness, "mine", "@delay 10\n@chunks 40 4", count=3)
    # The replay and the turn's live events may interleave on the wire; the
    # subscription reads them in seq order, each once.
    with harness.client.session_subscribe("mine", after_seq=-1) as subscription:
        events = list(subscription.events(timeout_seconds=30, until_turn_end=True))
        if events[-1]["data"]["turn"] == 0:
            events += list(subscription.events(timeout_seconds=30, until_turn_end=True))
    thread.join(30)
    assert outcome["result"].status == "ok"
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events == read_log(session_root, "mine")[1:]
    assert events[11:] == outcome["result"].events


def test_daemon_subscribe_follows_another_connection(listening_daemon, tmp_path, session_root):
    daemon = listening_daemon()
    with network_harness(daemon, tmp_path) as runner, network_harness(daemon, tmp_path) as watcher:
        thread, outcome, _ = start_turn(runner, "shared")
        with watcher.start_session("shared").subscribe(after_seq=-1) as subscription:
            events = list(subscription.events(timeout_seconds=30, until_turn_end=True))
        thread.join(30)
        result = outcome["result"]
        assert result.status == "ok"
        assert events == result.events
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert events[-1]["data"]["reason"] == {"kind": "completed"}
        assert watcher.client._notifications.qsize() == 0
        assert events == read_log(session_root, "shared")[1:]


def test_daemon_detached_turn_is_picked_up_again(listening_daemon, tmp_path, session_root):
    daemon = listening_daemon()
    dropped = network_harness(daemon, tmp_path, on_disconnect="continue")
    try:
        thread, outcome, seen = start_turn(dropped, "detached", count=8)
        drop_connection(dropped)
        thread.join(20)
        assert isinstance(outcome.get("error"), TransportClosedError)
        last_seen = seen[-1].payload["event"]["seq"]
    finally:
        dropped.close()

    with network_harness(daemon, tmp_path) as again:
        # The turn runs on, detached: the session is busy and listed running.
        info = next(s for s in again.iter_sessions() if s.session_id == "detached")
        assert info.running is True
        with pytest.raises(SessionBusyError):
            again.run("hi", session_id="detached")
        with again.start_session("detached").subscribe(after_seq=last_seen) as subscription:
            rest = list(subscription.events(timeout_seconds=30, until_turn_end=True))
        assert [e["seq"] for e in rest] == list(range(last_seen + 1, last_seen + 1 + len(rest)))
        assert rest[-1]["type"] == "turn/end" and rest[-1]["data"]["reason"] == {"kind": "completed"}
        message = next(e for e in rest if e["type"] == "assistant/message")
        assert message["data"]["content"][0]["text"] == "".join(chr(ord("a") + i % 26) * 4 for i in range(100))
        assert rest == read_log(session_root, "detached")[last_seen + 2:]
        wait_until(lambda: not next(s for s in again.iter_sessions() if s.session_id == "detached").running,
                   what="the detached turn to settle")
        assert again.run("@reply after", session_id="detached").final_response == "after"


def test_daemon_dropped_connection_cancels_by_default(listening_daemon, tmp_path):
    daemon = listening_daemon()
    dropped = network_harness(daemon, tmp_path)
    try:
        thread, outcome, _ = start_turn(dropped, "cancelled", count=5)
        drop_connection(dropped)
        thread.join(20)
        assert isinstance(outcome.get("error"), TransportClosedError)
    finally:
        dropped.close()
    with network_harness(daemon, tmp_path) as again:
        session = again.start_session("cancelled")

        def turn_end():
            events = list(session.iter_events())
            return events[-1] if events and events[-1]["type"] == "turn/end" else None

        wait_until(turn_end, what="the cancelled turn's turn/end")
        assert turn_end()["data"]["reason"] == {"kind": "aborted", "reason": "connection closed"}
