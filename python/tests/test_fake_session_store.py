"""session/list, session/events, session/subscribe, session/unsubscribe and
initialize's onDisconnect against the fake runtime (no harnessd).

The fake (tests/fakes/_fakelib.py) keeps every event in memory and answers
the four methods as docs/protocol.md §4.7-4.10 specify; ``fake/background``
stands in for a turn run by another connection, whose events reach this
connection only through a subscription.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from conftest import fake_argv
from deepseek_harness import HarnessClient, HarnessConfig, InitializeResponse
from deepseek_harness.client import SessionSubscription
from deepseek_harness.errors import InvalidParamsError, JsonRpcError, TransportClosedError
from deepseek_harness.models import SessionInfo


def drain_global(client: HarnessClient) -> list:
    out = []
    while True:
        try:
            out.append(client.next_notification(timeout_seconds=0))
        except TimeoutError:
            return out


def background(client: HarnessClient, session_id: str, chunks: int = 3, delay_ms: int = 0) -> int:
    """Start a turn of *session_id* "on another connection"; its turn number."""

    class Raw:
        @classmethod
        def model_validate(cls, obj):
            return obj

    return client.request("fake/background", {"sessionId": session_id, "chunks": chunks, "delayMs": delay_ms},
                          response_model=Raw)["turn"]


# ----------------------------------------------------------------- initialize


def test_fake_on_disconnect_is_sent_with_initialize(fake_harness, tmp_path):
    with fake_harness(on_disconnect="continue") as harness:
        params = json.loads(harness.run("@initparams").final_response)
        assert params["onDisconnect"] == "continue"
    with fake_harness() as harness:
        assert "onDisconnect" not in json.loads(harness.run("@initparams").final_response)

    client = HarnessClient(HarnessConfig(launch_args_override=fake_argv("echo_runtime.py"),
                                         request_timeout_seconds=15, shutdown_timeout_seconds=3))
    with client:
        client.initialize(cwd=str(tmp_path), provider="scripted", model="m", on_disconnect="cancel")
        # A value the runtime refuses is an InvalidParamsError (-32602).
        with pytest.raises(InvalidParamsError, match="onDisconnect") as info:
            client.request("initialize", {"onDisconnect": "later"}, response_model=InitializeResponse)
        assert info.value.code == -32602 and info.value.session_id is None
    # A value the SDK does not know is refused before anything is sent, and
    # initialize closes the runtime on failure, as for any other error.
    client.start()
    with pytest.raises(ValueError, match="on_disconnect"):
        client.initialize(cwd=str(tmp_path), provider="scripted", model="m", on_disconnect="later")
    assert client._proc is None
    harness = fake_harness(on_disconnect="sometimes")
    with pytest.raises(ValueError):
        harness.start()


# ----------------------------------------------------------------- session/list


def test_fake_session_list_pages(fake_harness):
    with fake_harness() as harness:
        for name in ("a", "b", "c", "d"):
            harness.run("hi", session_id=name)
        harness.run("@subagent", session_id="p")  # p and its child p.sub-1
        harness.run("again", session_id="b")  # b moves to the front
        client = harness.client

        first = client.session_list(limit=2)
        assert [s.session_id for s in first.sessions] == ["b", "p"]
        assert first.next_cursor is not None
        b = first.sessions[0]
        assert isinstance(b, SessionInfo)
        assert (b.last_seq, b.turns, b.running, b.parent_session_id) == (11, 2, False, None)
        assert b.created_at <= b.updated_at
        second = client.session_list(limit=2, cursor=first.next_cursor)
        assert [s.session_id for s in second.sessions] == ["p.sub-1", "d"]
        assert second.sessions[0].parent_session_id == "p"
        last = harness.list_sessions(limit=2, cursor=second.next_cursor)
        assert [s.session_id for s in last.sessions] == ["c", "a"] and last.next_cursor is None

        everything = [s.session_id for s in client.iter_sessions(limit=2)]
        assert everything == ["b", "p", "p.sub-1", "d", "c", "a"]
        assert [s.session_id for s in harness.iter_sessions()] == everything
        assert [s.session_id for s in client.session_list().sessions] == everything
        updated = [s.updated_at for s in client.iter_sessions(limit=1)]
        assert updated == sorted(updated, reverse=True)

        for kwargs, message in (
            ({"limit": 0}, "params.limit must be within 1..1000"),
            ({"limit": 1001}, "params.limit must be within 1..1000"),
            ({"cursor": "nonsense"}, "params.cursor is not a cursor of session/list"),
        ):
            with pytest.raises(InvalidParamsError) as info:
                client.session_list(**kwargs)
            assert str(info.value) == message and info.value.code == -32602
        with pytest.raises(InvalidParamsError, match="params.limit must be an integer"):
            client.session_list(limit="2")  # type: ignore[arg-type]


def test_fake_session_list_shows_a_running_turn(fake_harness):
    with fake_harness() as harness:
        harness.run("hi", session_id="bg")
        background(harness.client, "bg", chunks=5, delay_ms=100)
        assert next(s for s in harness.iter_sessions() if s.session_id == "bg").running is True
        deadline = time.monotonic() + 10
        while next(s for s in harness.iter_sessions() if s.session_id == "bg").running:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Nobody subscribed: the other connection's events never came here.
        assert drain_global(harness.client) == []


# ----------------------------------------------------------------- session/events


def test_fake_session_events_pages(fake_harness):
    with fake_harness() as harness:
        session = harness.start_session("ev")
        one = session.run("one")
        two = session.run("two")
        logged = one.events + two.events
        client = harness.client

        page = client.session_events("ev", limit=3)
        assert (page.events, page.last_seq, page.more) == (logged[:3], 11, True)
        page = session.events(after_seq=page.events[-1]["seq"], limit=100)
        assert (page.events, page.more) == (logged[3:], False)
        assert client.session_events("ev", after_seq=4, limit=1).events == [logged[5]]
        for after in (11, 50):
            page = client.session_events("ev", after_seq=after)
            assert (page.events, page.last_seq, page.more) == ([], 11, False)
        assert list(client.iter_session_events("ev", limit=5)) == logged
        assert list(session.iter_events(after_seq=9, limit=1)) == logged[10:]

        with pytest.raises(InvalidParamsError) as info:
            client.session_events("never-prompted")
        err = info.value
        assert isinstance(err, JsonRpcError) and err.code == -32602
        assert str(err) == "unknown session: never-prompted"
        assert err.session_id == "never-prompted" and err.data == {"sessionId": "never-prompted"}
        with pytest.raises(InvalidParamsError, match="unknown session"):
            harness.start_session("nope").events()
        for kwargs, message in (
            ({"after_seq": -2}, "params.afterSeq must be -1 or more"),
            ({"limit": 0}, "params.limit must be within 1..1000"),
        ):
            with pytest.raises(InvalidParamsError, match=message):
                client.session_events("ev", **kwargs)
        with pytest.raises(InvalidParamsError, match="params.sessionId must not be empty"):
            client.session_events("")


# ----------------------------------------------------------------- session/subscribe


def test_fake_subscribe_replays_then_follows_live_events(fake_harness):
    with fake_harness() as harness:
        client = harness.client
        first = harness.run("hi", session_id="s")  # seq 0..5
        subscription = client.session_subscribe("s", after_seq=2)
        assert isinstance(subscription, SessionSubscription)
        assert (subscription.session_id, subscription.after_seq, subscription.last_seq) == ("s", 2, 5)
        # The replay came before the response: it is all queued already.
        replayed = []
        subscription.drain(lambda n: replayed.append(n.payload["event"]))
        assert replayed == first.events[3:] and subscription.seen_seq == 5

        turn = background(client, "s", chunks=4, delay_ms=20)
        live = list(subscription.events(timeout_seconds=10, until_turn_end=True))
        assert [e["seq"] for e in live] == list(range(6, 6 + len(live)))
        assert live[0]["type"] == "turn/start" and live[-1] == {**live[-1], "type": "turn/end"}
        assert live[-1]["data"] == {"turn": turn, "reason": {"kind": "completed"}}
        assert subscription.seen_seq == live[-1]["seq"]
        assert live == list(client.iter_session_events("s", after_seq=5))
        assert drain_global(client) == []

        subscription.close()
        assert subscription.unsubscribed is True and subscription.closed
        assert subscription not in client._subscriptions
        subscription.close()  # idempotent
        background(client, "s", chunks=1)
        time.sleep(0.2)
        assert drain_global(client) == []  # unsubscribed: the runtime sends nothing
        assert client.session_unsubscribe("s") is False


def test_fake_subscribe_without_after_seq_replays_nothing(fake_harness):
    with fake_harness() as harness:
        harness.run("hi", session_id="s")
        with harness.start_session("s").subscribe() as subscription:
            assert (subscription.last_seq, subscription.seen_seq) == (5, 5)
            with pytest.raises(TimeoutError):
                subscription.next(timeout_seconds=0.1)
            background(harness.client, "s", chunks=1)
            event = subscription.next_event(timeout_seconds=10)
            assert (event["type"], event["seq"]) == ("turn/start", 6)
        assert subscription.unsubscribed is True


def test_fake_own_prompt_on_a_subscribed_session(fake_harness):
    with fake_harness() as harness:
        harness.run("hi", session_id="s")
        session = harness.start_session("s")
        with session.subscribe(after_seq=-1) as subscription:
            result = session.run("again")
            # The runtime sends the turn once; both the turn and the
            # subscription see every event of it, and nothing is left over.
            seen = [subscription.next_event(timeout_seconds=5) for _ in range(12)]
            assert [e["seq"] for e in seen] == list(range(12))
            assert seen[6:] == result.events
            with pytest.raises(TimeoutError):
                subscription.next(timeout_seconds=0.1)
        assert drain_global(harness.client) == []


def test_fake_run_ignores_a_replay_interleaved_with_its_turn(fake_harness):
    with fake_harness() as harness:
        first = harness.run("one", session_id="s")
        seen = []
        result = harness.run("@replayed", session_id="s", on_notification=seen.append)
        assert [e["seq"] for e in result.events] == list(range(6, 12))
        assert result.events[0]["type"] == "turn/start" and result.final_response == "echo: @replayed"
        assert [n.payload["event"] for n in result.notifications] == result.events
        # The callback saw each seq once, in order (here the replay of turn 0
        # came before the turn began, so it saw that too).
        assert [n.payload["event"]["seq"] for n in seen] == list(range(12))
        assert [n.payload["event"] for n in seen[:6]] == first.events


def test_fake_subscribe_errors(fake_harness):
    with fake_harness() as harness:
        client = harness.client
        before = list(client._subscriptions)
        with pytest.raises(InvalidParamsError) as info:
            client.session_subscribe("ghost", after_seq=-1)
        assert str(info.value) == "unknown session: ghost" and info.value.session_id == "ghost"
        assert client._subscriptions == before  # the local half is gone again

        harness.run("hi", session_id="s")
        first = client.session_subscribe("s")
        with pytest.raises(InvalidParamsError, match="already subscribed: s") as info:
            client.session_subscribe("s", after_seq=0)
        assert info.value.session_id is None
        with pytest.raises(InvalidParamsError, match="params.afterSeq must be -1 or more"):
            client.session_subscribe("s", after_seq=-5)
        assert first in client._subscriptions and not first.closed

        # session_unsubscribe also ends the local subscription object.
        assert client.session_unsubscribe("s") is True
        assert first.closed and first.unsubscribed is True
        first.close()  # nothing more is sent
        assert client.session_unsubscribe("s") is False
        assert harness.start_session("s").unsubscribe() is False


def test_fake_iteration_ends_when_the_subscription_is_closed(fake_harness):
    with fake_harness() as harness:
        harness.run("hi", session_id="s")
        subscription = harness.client.session_subscribe("s", after_seq=-1)
        got = []
        reader = threading.Thread(target=lambda: got.extend(n.payload["event"]["seq"] for n in subscription))
        reader.start()
        deadline = time.monotonic() + 10
        while len(got) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        subscription.close()
        reader.join(10)
        assert not reader.is_alive() and got == list(range(6))


def test_fake_subscription_learns_that_the_runtime_died(fake_harness):
    harness = fake_harness()
    harness.run("hi", session_id="s")
    subscription = harness.client.session_subscribe("s")
    with pytest.raises(TransportClosedError):
        harness.run("@die", session_id="other")
    with pytest.raises(TransportClosedError, match="CRASH-MARKER"):
        subscription.next()
    with pytest.raises(TransportClosedError):
        list(subscription.events())
    subscription.close()  # the unsubscribe fails quietly
    assert subscription.closed and subscription.unsubscribed is None
    harness.close()
