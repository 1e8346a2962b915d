"""The postgres store as a cluster: several harnessd nodes on one PostgreSQL
database (`--store postgres --postgres-url URL --node-id ID --lease-ttl-ms MS
--postgres-pool N`), black-box through the wire protocol and the database.

What is checked:
- the schema the daemon creates (harnessd_sessions, harnessd_event_batches
  and its per-event view harnessd_events, harnessd_schema), also when two
  nodes start at once on an empty database, and its upgrade of a version-1
  database (one row per event) in place;
- a session runs on one node at a time: the other node answers -32001 with
  data.node, the node holding the session's lease;
- a session moves between nodes and keeps its history (turn numbers, seq);
- a node killed mid-turn: its lease blocks the session until --lease-ttl-ms,
  then the next node closes the dead turn (turn/end `interrupted`) and goes
  on; every event the dead node's client saw is in the database, byte for
  byte (notifications follow commits; also checked on fast streams of
  several sessions);
- fencing: a node frozen (SIGSTOP) past its lease has its late writes refused
  (its turn ends status error, reason.code STORE) and nothing of it lands
  among the new owner's events;
- a database restart mid-turn: the turns in flight end error/STORE, bounded;
  the daemon reconnects by itself;
- session/cancel sent to another node reaches the node running the turn;
- a write the database refuses (a trigger, at the insert or at commit) fails
  its own turn only: the other writes of its commit group run again alone
  and commit; nothing notified is missing, every session loads and goes on;
- session/events pages hold at most about 4 MiB (the query caps them), and
  an event larger than that still comes, alone on its page;
- /healthz reports the database.

Each test gets a fresh database (the pg_db fixture, conftest.py) on one
PostgreSQL server per run (pg_server.PgServer). Needs PostgreSQL
(scripts/install-deps.sh); fails, never skips, without it.

    HARNESSD_BIN=build/harnessd /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration/test_postgres.py
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import time

import pytest

from harnessd_helpers import (SESSION_BUSY, Daemon, TLS_MODE, check_contiguous, check_event, check_turn, error_of,
                              final_text, is_notification, result_of, suite_tls_context, text_deltas)

OK = {"status": "ok", "reason": {"kind": "completed"}}
CANCELLED = {"kind": "aborted", "reason": "cancelled"}
INTERRUPTED = {"kind": "interrupted"}
LONG = "@delay 20\n@chunks 500 8"   # about 10 s of streaming unless stopped
RACE = "@delay 25\n@chunks 40 8"    # about 1 s: long enough for two prompts to overlap
TURN_TIMEOUT = 30.0                 # bound of any one prompt's answer


# ---------------------------------------------------------------------------
# helpers


def node_args(db, node_id: str, ttl_ms: int, pool: int, ws: bool) -> list[str]:
    args = ["--store", "postgres", "--postgres-url", db.url, "--node-id", node_id,
            "--lease-ttl-ms", str(ttl_ms), "--postgres-pool", str(pool)]
    return args + (["--listen", "ws://127.0.0.1:0"] if ws else [])


def start_node(spawn, db, node_id: str, *, ttl_ms: int = 3000, pool: int = 4, ws: bool = False,
               extra: tuple[str, ...] = ()):
    """A harnessd node on database `db` (also a ws:// listener with ws=True)."""
    d = spawn(args=node_args(db, node_id, ttl_ms, pool, ws) + list(extra))
    d.node_id = node_id
    if ws:
        urls = [u for u in d.listen if u.startswith("ws://")]
        assert len(urls) == 1, f"ready file lists no ws:// listener: {d.listen}"
        d.ws_port = int(urls[0].rsplit(":", 1)[1])
    return d


class _Unwaited(Daemon):
    """A Daemon whose constructor does not wait for its ready file."""

    def _wait_ready(self, timeout: float) -> None:
        pass


def start_nodes_at_once(spawn, db, node_ids: list[str], *, ttl_ms: int = 3000, pool: int = 4) -> list:
    """Start several nodes together (all processes first, then wait for each one's ready file).
    From this thread: the daemons die with the thread that started them (PR_SET_PDEATHSIG)."""
    nodes = []
    for node_id in node_ids:
        d = _Unwaited(spawn.tmp_path / "sessions", args=node_args(db, node_id, ttl_ms, pool, False),
                      workdir=spawn.tmp_path)
        spawn.daemons.append(d)  # killed at teardown like every spawned daemon
        d.node_id = node_id
        nodes.append(d)
    for d in nodes:
        Daemon._wait_ready(d, 30)
    return nodes


def client(d):
    c = d.connect()
    c.initialize()
    return c


def sql_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def db_rows(db, sid: str) -> list[tuple[int, bytes]]:
    """(seq, event bytes) of session sid in harnessd_events, by seq."""
    rows = db.psql(f"select seq, encode(convert_to(event::text, 'UTF8'), 'hex') from harnessd_events "
                   f"where session_id = {sql_literal(sid)} order by seq")
    out = []
    for r in rows:
        seq, hexed = r.split("|")
        out.append((int(seq), bytes.fromhex(hexed)))
    return out


def db_events(db, sid: str) -> list[dict]:
    """The events of sid in the database: valid, their seq column is their seq, contiguous from 0."""
    rows = db_rows(db, sid)
    assert rows, f"no events of {sid} in harnessd_events"
    events = []
    for seq, raw in rows:
        assert b"\n" not in raw, f"event {seq} of {sid} is not one compact line: {raw[:200]!r}"
        ev = json.loads(raw)
        check_event(ev)
        assert ev["seq"] == seq, f"row seq {seq} holds event {ev}"
        events.append(ev)
    check_contiguous(events, first_seq=0)
    return events


def db_session(db, sid: str) -> dict:
    cols = ["last_seq", "lease_owner", "lease_epoch"]
    rows = db.psql(f"select {', '.join(f'coalesce({c}::text, {sql_literal(chr(0x2205))})' for c in cols)} "
                   f"from harnessd_sessions where id = {sql_literal(sid)}")
    assert len(rows) == 1, f"harnessd_sessions rows of {sid}: {rows}"
    return {c: (None if v == "\u2205" else v) for c, v in zip(cols, rows[0].split("|"))}


def notified(conn, sid: str, start: int = 0) -> list[tuple[dict, bytes]]:
    """session.event notifications of sid this connection received: (event, raw frame)."""
    out = []
    for f in conn.frames[start:]:
        o = f.obj
        if is_notification(o, "session.event") and o["params"]["sessionId"] == sid:
            out.append((o["params"]["event"], f.raw))
    return out


def assert_seen_in_db(conn, sid: str, rows: list[tuple[int, bytes]]) -> int:
    """Every event of sid the connection was notified of is in the database, byte for byte. Their number."""
    by_seq = dict(rows)
    seen = notified(conn, sid)
    for ev, raw in seen:
        seq = ev["seq"]
        assert seq in by_seq, (f"{conn.name} was notified of {sid} seq {seq} ({ev['type']}), "
                               f"which is not in harnessd_events (last there: {max(by_seq, default=None)})")
        assert by_seq[seq] in raw, (f"{sid} seq {seq}: harnessd_events holds {by_seq[seq][:300]!r}, "
                                    f"the notification was {raw[:400]!r}")
        assert json.loads(by_seq[seq]) == ev
    return len(seen)


def count_deltas(conn, sid: str) -> int:
    return sum(1 for ev, _ in notified(conn, sid)
               if ev["type"] == "assistant/chunk" and ev["data"]["chunk"]["type"] == "text-delta")


def wait_deltas(conn, sid: str, n: int, timeout: float = 15.0) -> None:
    conn.reader.wait(lambda: count_deltas(conn, sid) >= n, timeout)
    assert count_deltas(conn, sid) >= n, (f"{conn.name}: fewer than {n} text deltas of {sid} within {timeout}s; "
                                          f"last frames: {conn.frames[-3:]}{conn.diag()}")


def is_busy(resp: dict) -> bool:
    return "error" in resp and resp["error"].get("code") == SESSION_BUSY


def is_store_error(resp: dict) -> bool:
    """A prompt's answer: result status error with reason.code STORE."""
    res = resp.get("result")
    return (isinstance(res, dict) and res.get("status") == "error" and isinstance(res.get("reason"), dict)
            and res["reason"].get("code") == "STORE")


def assert_busy(resp: dict, sid: str, owner: str) -> None:
    err = error_of(resp)
    assert err["code"] == SESSION_BUSY, resp
    data = err.get("data")
    assert isinstance(data, dict) and data.get("sessionId") == sid and data.get("node") == owner, (
        f"-32001 must name the session and the node holding it ({owner!r}): {resp}")


def prompt_when_free(conn, sid: str, text: str, within: float, owner: str | None = None):
    """Prompt, again every 100 ms while the answer is -32001 (at most `within` seconds).
    Returns (response, events before it, -32001 answers seen)."""
    deadline = time.monotonic() + within
    busy = 0
    while True:
        resp, events = conn.run_prompt(sid, text, timeout=TURN_TIMEOUT)
        if not is_busy(resp) or time.monotonic() > deadline:
            return resp, events, busy
        if owner is not None:
            assert_busy(resp, sid, owner)
        busy += 1
        time.sleep(0.1)


def prompt_until_ok(conn, sid: str, text: str, within: float):
    """Prompt until the answer is ok (the daemon reconnecting to the database). (response, events, attempts)."""
    deadline = time.monotonic() + within
    attempts = 0
    while True:
        attempts += 1
        resp, events = conn.run_prompt(sid, text, timeout=TURN_TIMEOUT)
        if resp.get("result") == OK or time.monotonic() > deadline:
            return resp, events, attempts
        time.sleep(0.25)


def turn_from(events: list[dict], turn: int) -> list[dict]:
    """The events from turn `turn`'s turn/start on."""
    for i, e in enumerate(events):
        if e["type"] == "turn/start" and e["data"]["turn"] == turn:
            return events[i:]
    raise AssertionError(f"no turn/start of turn {turn} in {[e['type'] for e in events]}")


def last_turn(events: list[dict]) -> list[dict]:
    """The events from the last turn/start on."""
    starts = [i for i, e in enumerate(events) if e["type"] == "turn/start"]
    assert starts, f"no turn/start in {[e['type'] for e in events]}"
    return events[starts[-1]:]


def check_turns_closed(events: list[dict]) -> list[list[dict]]:
    """The events split into turns; every turn starts with turn/start and ends with its turn/end."""
    turns: list[list[dict]] = []
    for e in events:
        if e["type"] == "turn/start":
            assert not turns or turns[-1][-1]["type"] == "turn/end", (
                f"turn/start at seq {e['seq']} while turn {turns[-1][0]['data']['turn']} is open")
            assert e["data"]["turn"] == len(turns), f"turn number {e['data']['turn']}, expected {len(turns)}"
            turns.append([e])
        else:
            assert turns, f"event before any turn/start: {e}"
            turns[-1].append(e)
    assert turns and turns[-1][-1]["type"] == "turn/end", "the last turn is open"
    for t in turns:
        assert t[-1]["data"]["turn"] == t[0]["data"]["turn"], t[-1]
    return turns


def all_events(conn, sid: str) -> tuple[list[dict], list[bytes]]:
    """session/events of sid from the start, every page: the events and each page's raw response frame."""
    out, raws, after = [], [], -1
    for _ in range(100):
        rid = conn.request("session/events", {"sessionId": sid, "afterSeq": after, "limit": 1000})
        idx, resp = conn.response_index(rid, timeout=TURN_TIMEOUT)
        page = result_of(resp)
        out += page["events"]
        raws.append(conn.frames[idx].raw)
        if not page["events"] or not page["more"]:
            return out, raws
        after = page["events"][-1]["seq"]
    raise AssertionError("session/events: more than 100 pages")


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    if TLS_MODE:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=suite_tls_context())
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def healthz(d) -> tuple[int, dict]:
    status, body = http_get(d.ws_port, "/healthz")
    return status, json.loads(body)


def wait_healthz(d, pred, timeout: float, what: str) -> tuple[int, dict]:
    deadline = time.monotonic() + timeout
    while True:
        status, h = healthz(d)
        if pred(status, h):
            return status, h
        if time.monotonic() > deadline:
            raise AssertionError(f"/healthz: not {what} within {timeout}s; last: {status} {h}{d.diag()}")
        time.sleep(0.1)


def freeze_outside_transaction(d, db, attempts: int = 20) -> int:
    """SIGSTOP d at a moment when none of the database's sessions is idle in a transaction
    (so the frozen node holds no row lock that would block the other node: this test is
    about fencing, not about that). The attempt that succeeded."""
    for attempt in range(1, attempts + 1):
        d.signal(signal.SIGSTOP)
        time.sleep(0.05)  # statements in flight finish
        open_txns = db.psql("select count(*) from pg_stat_activity where datname = current_database() "
                            "and state like 'idle in transaction%'")
        if open_txns == ["0"]:
            return attempt
        d.signal(signal.SIGCONT)
        time.sleep(0.03)
    raise AssertionError(f"{d.node_id} was inside an open transaction at each of {attempts} freezes: "
                         f"does it keep a transaction open while it waits (e.g. for the model)?")


@pytest.fixture
def db_up(pg_server):
    """For tests that stop the database: it is running again afterwards, whatever happened."""
    yield pg_server
    if not pg_server.running():
        pg_server.start()


# ---------------------------------------------------------------------------
# schema


SESSIONS_COLUMNS = {"id": "text", "header": "text", "created_at": "bigint", "cwd": "text", "parent_id": "text",
                    "depth": "integer", "last_seq": "bigint", "turns": "bigint", "updated_at": "bigint",
                    "lease_owner": "text", "lease_until": "timestamp with time zone", "lease_epoch": "bigint"}
EVENTS_COLUMNS = {"session_id": "text", "seq": "bigint", "event": "text"}  # the view, as version 1's table
BATCHES_COLUMNS = {"session_id": "text", "first_seq": "bigint", "last_seq": "bigint", "events": "text"}


def columns(db, table: str) -> dict[str, str]:
    rows = db.psql("select column_name, data_type from information_schema.columns "
                   f"where table_schema = current_schema() and table_name = {sql_literal(table)}")
    return dict(r.split("|") for r in rows)


def test_two_nodes_create_the_schema_at_once_and_restart_on_it(spawn, pg_db):
    a, b = start_nodes_at_once(spawn, pg_db, ["node-a", "node-b"])
    assert pg_db.psql("select count(*) from harnessd_schema") == ["1"], "one schema version row"
    version = pg_db.psql("select version from harnessd_schema")[0]
    assert int(version) >= 1, version
    for table, expected in (("harnessd_sessions", SESSIONS_COLUMNS), ("harnessd_events", EVENTS_COLUMNS)):
        got = columns(pg_db, table)
        missing = {k: v for k, v in expected.items() if got.get(k) != v}
        assert not missing, f"{table}: columns {missing} missing or of another type; the table has {got}"
    got = columns(pg_db, "harnessd_event_batches")
    assert got == BATCHES_COLUMNS, f"harnessd_event_batches has {got}"
    pk = pg_db.psql("select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid "
                    "and a.attnum = any(i.indkey) where i.indrelid = 'harnessd_event_batches'::regclass "
                    "and i.indisprimary order by array_position(i.indkey::int2[], a.attnum)")
    assert pk == ["session_id", "first_seq"], f"primary key of harnessd_event_batches: {pk}"
    compression = pg_db.psql("select attcompression from pg_attribute where attname = 'events' "
                             "and attrelid = 'harnessd_event_batches'::regclass")
    assert compression == ["l"], f"batches are compressed with lz4 (Debian's server has it): {compression}"

    ca, cb = client(a), client(b)
    resp, events = ca.run_prompt("s", "@reply one", timeout=TURN_TIMEOUT)
    assert result_of(resp) == OK
    check_turn(events, turn=0)
    resp, _ = cb.run_prompt("t", "@reply two", timeout=TURN_TIMEOUT)
    assert result_of(resp) == OK

    # A node restarted on the existing schema keeps it (and the sessions).
    a.terminate()
    a2 = start_node(spawn, pg_db, "node-a")
    assert pg_db.psql("select count(*) from harnessd_schema") == ["1"]
    assert pg_db.psql("select version from harnessd_schema") == [version]
    c2 = client(a2)
    resp, events2 = c2.run_prompt("s", "@reply again", timeout=TURN_TIMEOUT)
    assert result_of(resp) == OK
    check_turn(events2, turn=1)
    assert events2[0]["seq"] == events[-1]["seq"] + 1
    rows = db_rows(pg_db, "s")
    assert [json.loads(r) for _, r in rows] == events + events2
    assert db_session(pg_db, "s")["last_seq"] == str(events2[-1]["seq"])


# The tables as schema version 1 made them (a foreign key from the events to the sessions), with one
# finished turn of session "old": what a database left by an earlier harnessd holds.
SCHEMA_V1 = """
CREATE TABLE harnessd_schema (version integer NOT NULL);
INSERT INTO harnessd_schema VALUES (1);
CREATE TABLE harnessd_sessions (
  id text PRIMARY KEY, header text NOT NULL, created_at bigint NOT NULL, cwd text, parent_id text,
  depth integer NOT NULL DEFAULT 0, last_seq bigint NOT NULL DEFAULT -1, turns bigint NOT NULL DEFAULT 0,
  updated_at bigint NOT NULL, lease_owner text, lease_until timestamptz, lease_epoch bigint NOT NULL DEFAULT 0);
CREATE INDEX harnessd_sessions_by_update ON harnessd_sessions (updated_at DESC, id COLLATE "C");
CREATE TABLE harnessd_events (
  session_id text NOT NULL REFERENCES harnessd_sessions (id), seq bigint NOT NULL, event text NOT NULL,
  PRIMARY KEY (session_id, seq));
"""


def test_a_version_1_database_is_upgraded_in_place(spawn, pg_db):
    # One finished turn written by this daemon, then the database rebuilt as version 1 held it.
    seed = start_node(spawn, pg_db, "seed")
    resp, first = client(seed).run_prompt("old", "@reply before", timeout=TURN_TIMEOUT)
    assert result_of(resp) == OK
    seed.terminate()
    header = pg_db.psql("select header from harnessd_sessions where id = 'old'")[0]
    rows = db_rows(pg_db, "old")
    pg_db.psql("DROP VIEW harnessd_events; DROP TABLE harnessd_event_batches, harnessd_sessions, harnessd_schema;"
               + SCHEMA_V1 +
               "INSERT INTO harnessd_sessions (id, header, created_at, updated_at, last_seq, turns) VALUES "
               f"('old', {sql_literal(header)}, 1, 1, {rows[-1][0]}, 1);" +
               "".join(f"INSERT INTO harnessd_events VALUES ('old', {seq}, {sql_literal(raw.decode())});"
                       for seq, raw in rows))

    a = start_node(spawn, pg_db, "node-a")
    assert pg_db.psql("select version from harnessd_schema") == ["2"]
    assert pg_db.psql("select relkind from pg_class where relname = 'harnessd_events'") == ["v"], \
        "version 2 reads the events through a view"
    assert pg_db.psql("select count(*), min(last_seq - first_seq), max(last_seq - first_seq) "
                      "from harnessd_event_batches where session_id = 'old'") == [f"{len(rows)}|0|0"], \
        "each version-1 event became a batch of one"
    assert db_rows(pg_db, "old") == rows
    resp, events = client(a).run_prompt("old", "@reply after", timeout=TURN_TIMEOUT)
    assert result_of(resp) == OK
    check_turn(events, turn=1)
    assert events[0]["seq"] == first[-1]["seq"] + 1, "the history survived the upgrade"
    assert [e["seq"] for e in db_events(pg_db, "old")] == list(range(events[-1]["seq"] + 1))


# ---------------------------------------------------------------------------
# one node at a time


def test_one_session_runs_on_one_node_at_a_time(spawn, pg_db):
    a, b = start_node(spawn, pg_db, "node-a", ttl_ms=5000), start_node(spawn, pg_db, "node-b", ttl_ms=5000)
    ca, cb = client(a), client(b)
    nodes = [(a, ca), (b, cb)]
    notified_turns: dict[str, list[dict]] = {}
    winners = []
    # New sessions, then a session that already has a turn.
    for rnd, sid in enumerate(["race-0", "race-1", "race-2", "race-0"]):
        order = nodes if rnd % 2 == 0 else nodes[::-1]
        starts = {d.node_id: len(c.frames) for d, c in nodes}
        rids = {}
        for d, c in order:  # back to back: both prompts are in flight together
            rids[d.node_id] = c.prompt(sid, RACE)
        resps = {d.node_id: c.response(rids[d.node_id], timeout=TURN_TIMEOUT) for d, c in nodes}
        ran = [n for n, r in resps.items() if "result" in r]
        assert len(ran) == 1, f"round {rnd} ({sid}): exactly one node must run the prompt: {resps}"
        winner = ran[0]
        loser = "node-b" if winner == "node-a" else "node-a"
        winners.append(winner)
        assert result_of(resps[winner]) == OK
        assert_busy(resps[loser], sid, winner)
        lc = ca if loser == "node-a" else cb
        assert not notified(lc, sid, starts[loser]), f"{loser} was refused {sid} but notified events of it"
        wc = ca if winner == "node-a" else cb
        turn = [ev for ev, _ in notified(wc, sid, starts[winner])]
        check_turn(turn, turn=1 if sid in notified_turns else 0)
        assert len(text_deltas(turn)) == 40
        notified_turns.setdefault(sid, []).extend(turn)
    print(f"\nwinners of the four races: {winners}")

    for sid, turns in notified_turns.items():
        events = db_events(pg_db, sid)
        assert events == turns, f"{sid}: harnessd_events differs from what the winners notified"
        check_turns_closed(events)
        for c in (ca, cb):
            assert_seen_in_db(c, sid, db_rows(pg_db, sid))
        assert db_session(pg_db, sid)["last_seq"] == str(events[-1]["seq"])


def test_session_moves_between_nodes_with_its_history(spawn, pg_db):
    # A long TTL: the session must be free as soon as a turn settles, not when a lease runs out.
    a = start_node(spawn, pg_db, "node-a", ttl_ms=10000)
    b = start_node(spawn, pg_db, "node-b", ttl_ms=10000)
    ca, cb = client(a), client(b)

    resp, ev_a = ca.run_prompt("mv", "@chunks 5 3", timeout=TURN_TIMEOUT)
    assert result_of(resp) == OK
    check_turn(ev_a, turn=0)
    assert ev_a[0]["seq"] == 0

    resp, ev_b, busy = prompt_when_free(cb, "mv", "hello from b", within=2.0, owner="node-a")
    assert resp.get("result") == OK, f"node-b could not take the idle session over: {resp}"
    check_turn(ev_b, turn=1)
    assert ev_b[0]["seq"] == ev_a[-1]["seq"] + 1
    assert final_text(ev_b) == "echo: hello from b"

    # node-b serves node-a's history, byte for byte what is stored.
    history, raws = all_events(cb, "mv")
    assert history == ev_a + ev_b
    rows = db_rows(pg_db, "mv")
    assert [json.loads(r) for _, r in rows] == history
    joined = b"".join(raws)
    for seq, raw in rows:
        assert raw in joined, f"session/events on node-b does not carry event {seq} as stored: {raw[:200]!r}"

    # And back: node-a must not go on from its own stale view of the session.
    resp, ev_a2, busy2 = prompt_when_free(ca, "mv", "back on a", within=2.0, owner="node-b")
    assert resp.get("result") == OK, f"node-a could not take the session back: {resp}"
    check_turn(ev_a2, turn=2)
    assert ev_a2[0]["seq"] == ev_b[-1]["seq"] + 1
    print(f"\n-32001 answers while the session moved: to node-b {busy}, back to node-a {busy2}")

    events = db_events(pg_db, "mv")
    assert events == ev_a + ev_b + ev_a2
    check_turns_closed(events)
    assert db_session(pg_db, "mv")["last_seq"] == str(events[-1]["seq"])


def test_sigterm_mid_turns_exits_and_the_sessions_go_on_elsewhere(spawn, pg_db):
    """A node stopped while its turns stream settles and exits: the turns' last writes and lease
    releases land, or fail at once once the store has stopped; nothing waits for a commit or a
    lease round that will never come."""
    ttl_ms = 2000
    a = start_node(spawn, pg_db, "node-a", ttl_ms=ttl_ms)
    ca = client(a)
    sids = [f"stop{i}" for i in range(8)]
    for sid in sids:
        ca.prompt(sid, LONG)
    for sid in sids:
        wait_deltas(ca, sid, 3)
    stopped = time.monotonic()
    assert a.terminate(timeout=20) == 0
    assert time.monotonic() - stopped < 15, "the node took too long to stop"

    b = start_node(spawn, pg_db, "node-b", ttl_ms=ttl_ms)
    cb = client(b)
    for sid in sids:
        resp, _, _ = prompt_when_free(cb, sid, "@reply after", within=ttl_ms / 1000 + 5)
        assert result_of(resp) == OK, f"{sid}: {resp}"
        check_reloadable(db_events(pg_db, sid), sid)


# ---------------------------------------------------------------------------
# a node dies / freezes


def test_killed_node_lease_expires_and_the_turn_is_closed_interrupted(spawn, pg_db):
    ttl_ms = 3000
    a = start_node(spawn, pg_db, "node-a", ttl_ms=ttl_ms)
    b = start_node(spawn, pg_db, "node-b", ttl_ms=ttl_ms)
    ca, cb = client(a), client(b)

    ca.prompt("k", LONG)
    wait_deltas(ca, "k", 5)
    a.signal(signal.SIGKILL)
    killed = time.monotonic()
    a.wait_exit()
    seen_a = [ev for ev, _ in notified(ca, "k")]
    assert seen_a and [e["seq"] for e in seen_a] == list(range(len(seen_a))), "node-a's client saw a gap"

    # Within the TTL the dead node still holds the session.
    resp, _ = cb.run_prompt("k", "@reply too early", timeout=TURN_TIMEOUT)
    early = time.monotonic() - killed
    assert early < ttl_ms / 2000, f"the first prompt on node-b took {early:.2f}s: too slow to check the TTL"
    assert_busy(resp, "k", "node-a")

    # Then node-b takes it over: the dead turn is closed, seq goes on.
    resp, ev_b, busy = prompt_when_free(cb, "k", "@reply b took over", within=ttl_ms / 1000 + 10, owner="node-a")
    took = time.monotonic() - killed
    assert resp.get("result") == OK, f"node-b did not take the session over after the TTL: {resp}"
    print(f"\nnode-b ran the session {took:.2f}s after node-a was killed (TTL {ttl_ms} ms; {busy + 1} -32001 answers)")
    assert took >= ttl_ms / 1000 * 0.5, f"node-b ran the session {took:.2f}s after the kill, well before the TTL"
    turn_b = turn_from(ev_b, 1)
    check_turn(turn_b, turn=1)
    assert final_text(turn_b) == "b took over"

    rows = db_rows(pg_db, "k")
    events = db_events(pg_db, "k")
    # every event node-a's client saw is stored, byte for byte; node-a may have committed a few more
    assert assert_seen_in_db(ca, "k", rows) == len(seen_a)
    assert events[:len(seen_a)] == seen_a
    end0 = next(i for i, e in enumerate(events) if e["type"] == "turn/end")
    assert end0 >= len(seen_a)
    assert events[end0]["data"] == {"turn": 0, "reason": INTERRUPTED}, events[end0]
    check_turn(events[:end0 + 1], turn=0)
    assert events[end0 + 1:] == turn_b, "after the interrupted turn/end comes node-b's turn, nothing else"
    check_turns_closed(events)
    assert_seen_in_db(cb, "k", rows)
    assert db_session(pg_db, "k")["last_seq"] == str(events[-1]["seq"])


def test_kill_mid_stream_loses_no_notified_event(spawn, pg_db):
    """Notifications follow commits: after kill -9 every event a client saw is stored."""
    a = start_node(spawn, pg_db, "node-a")
    c = client(a)
    sids = [f"stream-{i}" for i in range(4)]
    for sid in sids:
        c.prompt(sid, "@delay 1\n@chunks 5000 8")
    for sid in sids:
        wait_deltas(c, sid, 100)
    a.signal(signal.SIGKILL)
    a.wait_exit()
    total = 0
    for sid in sids:
        rows = db_rows(pg_db, sid)
        events = db_events(pg_db, sid)
        seen = assert_seen_in_db(c, sid, rows)
        assert events[0]["type"] == "turn/start" and not any(e["type"] == "turn/end" for e in events)
        total += seen
    print(f"\n{total} events notified before the kill, all of them stored")


def test_frozen_node_is_fenced_off_after_its_lease_is_taken_over(spawn, pg_db):
    ttl_ms = 1500
    a = start_node(spawn, pg_db, "node-a", ttl_ms=ttl_ms)
    b = start_node(spawn, pg_db, "node-b", ttl_ms=ttl_ms)
    ca, cb = client(a), client(b)
    epoch0 = None

    pa = ca.prompt("f", LONG)
    wait_deltas(ca, "f", 5)
    freezes = freeze_outside_transaction(a, pg_db)
    try:
        stopped = time.monotonic()
        epoch0 = db_session(pg_db, "f")["lease_epoch"]
        time.sleep(ttl_ms / 1000 + 1.0)
        resp, ev_b, busy = prompt_when_free(cb, "f", "@reply b owns it now", within=10, owner="node-a")
        assert resp.get("result") == OK, f"node-b did not take over the frozen node's session: {resp}"
        print(f"\nnode-b ran the session {time.monotonic() - stopped:.2f}s after node-a froze "
              f"(TTL {ttl_ms} ms; {busy} -32001 answers; frozen at attempt {freezes})")
        turn_b = turn_from(ev_b, 1)
        check_turn(turn_b, turn=1)
        stored_before = db_rows(pg_db, "f")
    finally:
        a.signal(signal.SIGCONT)

    # node-a wakes up: its writes are refused, its turn ends in error STORE.
    resp_a = ca.response(pa, timeout=TURN_TIMEOUT)
    assert is_store_error(resp_a), f"the fenced node's turn must end status error, reason.code STORE: {resp_a}"
    res = resp_a["result"]
    print(f"fenced turn on node-a: {res}")
    assert a.proc.poll() is None, f"node-a died after being fenced{a.diag()}"

    rows = db_rows(pg_db, "f")
    assert rows == stored_before, "node-a wrote to the session after node-b took it over"
    events = db_events(pg_db, "f")
    # node-a's committed prefix, node-b's interrupted turn/end for it, node-b's turn
    start_b = next(i for i, e in enumerate(events) if e["type"] == "turn/start" and e["data"]["turn"] == 1)
    assert events[start_b:] == turn_b, "only node-b's turn follows its turn/start"
    assert events[start_b - 1]["type"] == "turn/end"
    assert events[start_b - 1]["data"] == {"turn": 0, "reason": INTERRUPTED}, events[start_b - 1]
    check_turn(events[:start_b], turn=0)
    assert sum(e["type"] == "turn/end" for e in events[:start_b]) == 1
    check_turns_closed(events)
    # notifications follow commits: node-a's client saw nothing that is not stored, before or after SIGCONT
    n_seen = assert_seen_in_db(ca, "f", rows)
    assert n_seen >= 5
    assert all(ev["seq"] < start_b - 1 for ev, _ in notified(ca, "f")), "node-a notified an event of node-b's range"
    assert_seen_in_db(cb, "f", rows)
    sess = db_session(pg_db, "f")
    assert sess["last_seq"] == str(events[-1]["seq"])
    if epoch0 is not None and sess["lease_epoch"] is not None:
        assert int(sess["lease_epoch"]) > int(epoch0), f"lease epoch {epoch0} -> {sess['lease_epoch']}"

    # node-a is usable and goes on from the stored history, not from its stale view.
    resp, ev_a2, busy2 = prompt_when_free(ca, "f", "@reply a again", within=ttl_ms / 1000 + 5, owner="node-b")
    assert resp.get("result") == OK, f"node-a could not run the session after the fence: {resp}"
    check_turn(ev_a2, turn=2)
    assert ev_a2[0]["seq"] == events[-1]["seq"] + 1
    assert db_events(pg_db, "f") == events + ev_a2


# ---------------------------------------------------------------------------
# the database goes away


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_database_restart_mid_turn_fails_the_turns_then_reconnects(spawn, pg_db, db_up, mode):
    pg = db_up
    a = start_node(spawn, pg_db, "node-a", ttl_ms=3000)
    c = client(a)
    sids = [f"load-{i}" for i in range(4)]
    rids = {sid: c.prompt(sid, LONG) for sid in sids}
    for sid in sids:
        wait_deltas(c, sid, 3)

    stopped = time.monotonic()
    pg.stop(mode)
    try:
        # The turns in flight end, bounded, in error STORE (not hang, not succeed).
        for sid in sids:
            resp = c.response(rids[sid], timeout=TURN_TIMEOUT)
            assert is_store_error(resp), f"{sid}: expected result status error, reason.code STORE; got {resp}"
            res = resp["result"]
        print(f"\n[{mode}] every turn in flight ended error/STORE {time.monotonic() - stopped:.2f}s after the "
              f"database stopped: {res}")
        assert a.proc.poll() is None, f"harnessd died with the database{a.diag()}"
    finally:
        pg.start()

    # The daemon reconnects by itself: prompts on new sessions (a fresh one per
    # attempt, so a failed attempt leaves nothing behind) until one runs.
    back = time.monotonic()
    deadline = back + 20
    attempts: list[dict] = []
    while True:
        sid = f"after-{len(attempts)}"
        resp, events = c.run_prompt(sid, "@reply back", timeout=TURN_TIMEOUT)
        attempts.append(resp)
        if resp.get("result") == OK or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert resp.get("result") == OK, (f"no successful prompt within 20 s of the database's restart; "
                                   f"answers: {attempts[-3:]}{a.diag()}")
    print(f"[{mode}] first successful prompt {time.monotonic() - back:.2f}s after the restart "
          f"({len(attempts)} attempts)")
    check_turn(events, turn=0)
    assert db_events(pg_db, sid) == events

    # The sessions whose turns failed go on: their dead turn is closed, seq continues.
    for sid in sids:
        resp, ev, tries = prompt_until_ok(c, sid, "@reply resumed", within=10)
        assert resp.get("result") == OK, f"{sid} after the database restart: {resp}"
        if tries > 1:
            print(f"[{mode}] {sid}: {tries} prompts before one ran")
        turn = last_turn(ev)
        check_turn(turn)
        assert final_text(turn) == "resumed"
        events = db_events(pg_db, sid)
        turns = check_turns_closed(events)
        assert turns[-1] == turn
        assert turns[0][-1]["data"]["reason"]["kind"] != "completed", f"{sid}: turn 0 completed: {turns[0][-1]}"
        # notifications follow commits: what the client saw before the outage is stored
        assert assert_seen_in_db(c, sid, db_rows(pg_db, sid)) >= 3 + len(turn)


def test_healthz_reports_the_database(spawn, pg_db, db_up):
    pg = db_up
    a = start_node(spawn, pg_db, "node-a", ws=True)
    status, h = healthz(a)
    assert status == 200 and h.get("status") == "ok" and h.get("database") == "ok", (status, h)

    pg.stop("fast")
    try:
        status, h = wait_healthz(a, lambda s, h: h.get("database") != "ok", timeout=15,
                                 what="reporting the database down")
        print(f"\n/healthz with the database down: {status} {h}")
        assert "database" in h and h["database"] != "ok"
    finally:
        pg.start()
    status, h = wait_healthz(a, lambda s, h: s == 200 and h.get("database") == "ok", timeout=20,
                             what="reporting the database ok again")
    assert h.get("status") == "ok", h
    c = client(a)
    resp, _, _ = prompt_until_ok(c, "h", "@reply fine", within=10)
    assert result_of(resp) == OK


# ---------------------------------------------------------------------------
# cancel across nodes


def test_delete_is_refused_while_another_node_runs_the_turn(spawn, pg_db):
    a = start_node(spawn, pg_db, "node-a")
    b = start_node(spawn, pg_db, "node-b")
    ca, cb = client(a), client(b)
    pa = ca.prompt("x", LONG)
    wait_deltas(ca, "x", 2)

    # node-b does not run the turn, but the lease says node-a does.
    did = cb.request("session/delete", {"sessionId": "x"})
    assert_busy(cb.response(did, timeout=10), "x", "node-a")
    assert db_session(pg_db, "x")

    cid = cb.request("session/cancel", {"sessionId": "x"})
    assert result_of(cb.response(cid, timeout=10)) == {"cancelled": True}
    assert result_of(ca.response(pa, timeout=15))["status"] == "aborted"
    # Idle everywhere now: the session and every event go, from any node.
    did = cb.request("session/delete", {"sessionId": "x"})
    assert result_of(cb.response(did, timeout=10)) == {"deleted": True}
    assert db_rows(pg_db, "x") == []
    lid = ca.request("session/list", {})
    assert "x" not in [s["sessionId"] for s in result_of(ca.response(lid, timeout=10))["sessions"]]
    # node-a still had the session loaded: its next prompt starts afresh too.
    resp, events = ca.run_prompt("x", "hello")
    assert result_of(resp)["status"] == "ok"
    assert events[0]["seq"] == 0 and events[0]["data"]["turn"] == 0


def test_cancel_sent_to_another_node_stops_the_turn(spawn, pg_db):
    a = start_node(spawn, pg_db, "node-a")
    b = start_node(spawn, pg_db, "node-b")
    ca, cb = client(a), client(b)
    pa = ca.prompt("x", LONG)
    wait_deltas(ca, "x", 2)

    sent = time.monotonic()
    cid = cb.request("session/cancel", {"sessionId": "x"})
    answer = cb.response(cid, timeout=10)
    idx, resp_a = ca.response_index(pa, timeout=15)
    delay = ca.frames[idx].at - sent
    print(f"\ncancel on node-b -> turn on node-a answered aborted after {delay * 1000:.0f} ms "
          f"(node-b answered {answer.get('result')})")
    assert result_of(answer) == {"cancelled": True}
    assert result_of(resp_a) == {"status": "aborted", "reason": CANCELLED}
    assert delay < 5.0, f"the cancel took {delay:.2f}s to reach node-a"

    ev_a = [ev for ev, _ in notified(ca, "x")]
    check_turn(ev_a, turn=0)
    assert ev_a[-1]["data"]["reason"] == CANCELLED
    assert len(text_deltas(ev_a)) < 500
    events = db_events(pg_db, "x")
    assert events == ev_a
    assert_seen_in_db(ca, "x", db_rows(pg_db, "x"))

    # The session is idle everywhere now: nothing to cancel, and node-b can run it.
    cid = cb.request("session/cancel", {"sessionId": "x"})
    assert result_of(cb.response(cid, timeout=10)) == {"cancelled": False}
    cid = cb.request("session/cancel", {"sessionId": "never-seen"})
    assert result_of(cb.response(cid, timeout=10)) == {"cancelled": False}
    resp, ev_b, _ = prompt_when_free(cb, "x", "@reply next", within=2.0, owner="node-a")
    assert result_of(resp) == OK
    check_turn(ev_b, turn=1)
    assert ev_b[0]["seq"] == ev_a[-1]["seq"] + 1


def test_approval_sent_to_another_node_reaches_the_waiting_turn(spawn, pg_db, tmp_path):
    a = start_node(spawn, pg_db, "node-a", extra=("--workspace-root", str(tmp_path / "ws")))
    b = start_node(spawn, pg_db, "node-b", extra=("--workspace-root", str(tmp_path / "ws")))
    ca, cb = client(a), client(b)
    pa = ca.prompt("x", '@tool write {"file_path": "a.txt", "content": "hi"}')
    _, frame = ca.wait_frame(lambda o: o.get("method") == "session.event"
                             and o["params"]["event"]["type"] == "approval/requested", timeout=10)
    approval_id = frame["params"]["event"]["data"]["approvalId"]

    # Not pending anywhere: refused by the node that does not run the turn.
    rid = cb.request("session/approve", {"sessionId": "x", "approvalId": approval_id + "9", "outcome": "allowed-once"})
    assert error_of(cb.response(rid, timeout=10))["data"]["reason"] == "not-pending"
    sent = time.monotonic()
    rid = cb.request("session/approve", {"sessionId": "x", "approvalId": approval_id, "outcome": "rejected",
                                         "message": "from node b"})
    assert result_of(cb.response(rid, timeout=10)) == {"accepted": True}
    idx, resp = ca.response_index(pa, timeout=15)
    assert ca.frames[idx].at - sent < 5.0
    assert result_of(resp) == OK
    events = [ev for ev, _ in notified(ca, "x")]
    resolved = [e["data"] for e in events if e["type"] == "approval/resolved"]
    assert resolved == [{"approvalId": approval_id, "outcome": "rejected", "source": "client"}]
    result = [e["data"] for e in events if e["type"] == "tool/result"][0]
    assert result["error"]["code"] == "REJECTED" and "from node b" in result["content"][0]["text"]
    assert db_events(pg_db, "x") == events
    # Decided: a second decision is not pending on either node.
    for c in (ca, cb):
        rid = c.request("session/approve", {"sessionId": "x", "approvalId": approval_id, "outcome": "allowed-once"})
        assert error_of(c.response(rid, timeout=10))["data"]["reason"] == "not-pending"


# ---------------------------------------------------------------------------
# a write the database refuses fails its own turn only


POISON = "poison-5e1d0c"  # a trigger refuses every event that holds it
STREAM = "@delay 1\n@chunks 200 8"  # a commit per chunk: about 4 s with the slow writes below


def install_poison(db, when: str) -> None:
    """Make the database refuse every event holding POISON: at the insert (`insert`), or only when its
    transaction commits (`commit`: a deferred constraint trigger)."""
    db.psql(f"""
CREATE FUNCTION harnessd_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF position({sql_literal(POISON)} in NEW.events) > 0 THEN
    RAISE EXCEPTION 'poisoned event (test)';
  END IF;
  RETURN NEW;
END $$;
""")
    # Every write a little slow (2 ms): the writer is always busy, so the writes queued meanwhile,
    # several sessions' ones, go out together.
    db.psql("""
CREATE FUNCTION harnessd_test_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.002); RETURN NULL; END $$;
CREATE TRIGGER harnessd_test_slow BEFORE INSERT ON harnessd_event_batches
  FOR EACH STATEMENT EXECUTE FUNCTION harnessd_test_slow();
""")
    if when == "insert":
        db.psql("CREATE TRIGGER harnessd_test_poison BEFORE INSERT ON harnessd_event_batches "
                "FOR EACH ROW EXECUTE FUNCTION harnessd_test_poison()")
    else:
        db.psql("CREATE CONSTRAINT TRIGGER harnessd_test_poison AFTER INSERT ON harnessd_event_batches "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION harnessd_test_poison()")


def group_retries(d) -> list[int]:
    """Sizes of the commit groups the daemon logged as failed and run again write by write."""
    text = d.stderr_path.read_text(errors="replace")
    return [int(m) for m in re.findall(r"a commit group of (\d+) writes failed", text)]


def check_reloadable(events: list[dict], sid: str) -> None:
    """What a node loads: valid events, seq 0, 1, 2, ... and every turn closed."""
    for e in events:
        check_event(e)
    check_contiguous(events, first_seq=0)
    check_turns_closed(events)


@pytest.mark.parametrize("when", ["insert", "commit"])
def test_a_refused_write_fails_only_its_own_turn(spawn, pg_db, when):
    """One group commit holds several sessions' writes. When the database refuses one of them (a
    trigger rejects an event; at the insert, or only at commit), the group's transaction is gone:
    the writes run again one by one, so the other sessions' turns commit and publish as usual, and
    only the turn whose write fails again ends error/STORE. No client sees an event the database
    does not hold, and every session loads and goes on (same node, then after a restart)."""
    a = start_node(spawn, pg_db, "node-a")
    install_poison(pg_db, when)
    c = client(a)
    innocents = [f"innocent-{i}" for i in range(8)]
    poisoned = [f"poisoned-{i}" for i in range(3)]
    rids = {sid: c.prompt(sid, STREAM) for sid in innocents}
    for sid in innocents:
        wait_deltas(c, sid, 10)
    # While the innocents stream, a poisoned prompt: its events (user/message holds the marker) go
    # into a group with theirs. A few times, a little apart.
    poison_rids = {}
    for sid in poisoned:
        poison_rids[sid] = c.prompt(sid, f"{POISON}\n{STREAM}")
        time.sleep(0.15)
    for sid, rid in poison_rids.items():
        resp = c.response(rid, timeout=TURN_TIMEOUT)
        assert is_store_error(resp), f"{sid}: the poisoned turn must end error/STORE: {resp}"
        assert "poisoned event" in resp["result"]["reason"]["message"], resp
    for sid, rid in rids.items():
        resp = c.response(rid, timeout=TURN_TIMEOUT)
        assert resp.get("result") == OK, f"{sid}: an innocent turn failed: {resp}"
        check_turn([ev for ev, _ in notified(c, sid)], turn=0)
    retried = group_retries(a)
    print(f"\ngroups run again write by write: {retried}")
    assert retried and max(retried) >= 2, (
        f"no failed group held another session's write (sizes {retried}): the test did not exercise the retry")

    # Everything notified is stored; every log is loadable (the poisoned ones hold at most what was
    # notified: nothing after the refused write).
    for sid in innocents + poisoned:
        rows = db_rows(pg_db, sid)
        assert_seen_in_db(c, sid, rows)
        stored = [json.loads(raw) for _, raw in rows]
        if sid in innocents:
            check_reloadable(stored, sid)
        else:
            assert not any(POISON in raw.decode() for _, raw in rows), f"{sid}: a poisoned event was stored"
            assert [ev for ev, _ in notified(c, sid)] == stored, f"{sid}: stored events differ from notified"
            if stored:
                check_contiguous(stored, first_seq=0)

    # The same node goes on with every session: seq continues without a gap.
    for sid in innocents + poisoned:
        resp, _ = c.run_prompt(sid, "@reply again", timeout=TURN_TIMEOUT)
        assert resp.get("result") == OK, f"{sid}: the next turn on the same node failed: {resp}"
        check_reloadable(db_events(pg_db, sid), sid)
    seen_before = {sid: [ev for ev, _ in notified(c, sid)] for sid in innocents + poisoned}

    # After a restart: session/events gives every event a client saw, and each session loads.
    assert a.terminate() == 0
    b = start_node(spawn, pg_db, "node-a")
    cb = client(b)
    for sid in innocents + poisoned:
        events, _ = all_events(cb, sid)
        by_seq = {e["seq"]: e for e in events}
        for ev in seen_before[sid]:
            assert by_seq.get(ev["seq"]) == ev, f"{sid}: notified event {ev['seq']} ({ev['type']}) not in session/events"
        assert events == db_events(pg_db, sid)
        resp, _ = cb.run_prompt(sid, "@reply after restart", timeout=TURN_TIMEOUT)
        assert resp.get("result") == OK, f"{sid}: the turn after the restart failed: {resp}"
        check_reloadable(db_events(pg_db, sid), sid)


# ---------------------------------------------------------------------------
# session/events pages: capped by bytes in the database's query


PAGE_MAX_BYTES = 4 * 1024 * 1024  # docs/protocol.md: a page holds about 4 MiB


def events_page(conn, sid: str, after: int, limit: int = 1000) -> dict:
    return result_of(conn.response(conn.request("session/events", {"sessionId": sid, "afterSeq": after,
                                                                    "limit": limit}), timeout=TURN_TIMEOUT))


def expected_page(sizes: list[tuple[int, int]], after: int, limit: int) -> tuple[list[int], bool]:
    """(seqs, more) of the page after `after`: at most `limit` events, no more than PAGE_MAX_BYTES of
    them once it has one."""
    rest = [(seq, size) for seq, size in sizes if seq > after]
    seqs, total = [], 0
    for seq, size in rest[:limit]:
        if seqs and total + size > PAGE_MAX_BYTES:
            break
        seqs.append(seq)
        total += size
    return seqs, len(seqs) < len(rest)


def test_events_pages_are_capped_by_bytes(spawn, pg_db):
    a = start_node(spawn, pg_db, "node-a")
    c = client(a)
    resp, _ = c.run_prompt("pages", "@chunks 100 65536", timeout=60)  # about 6.6 MB of events
    assert result_of(resp)["status"] == "ok"
    # A session logged elsewhere with one event larger than a page (written straight into the
    # database: a live turn's chunks are smaller): it is still read, alone on its page.
    filler = '{"type":"assistant/chunk","seq":%d,"time":1,"data":{"turn":0,"step":0,"chunk":{"type":"text-delta","index":0,"text":"'
    pg_db.psql(f"""
INSERT INTO harnessd_sessions (id, header, created_at, updated_at, last_seq)
  VALUES ('huge', '{{"type":"session","version":0,"id":"huge","createdAt":1,"delegationDepth":0}}', 1, 1, 3);
INSERT INTO harnessd_event_batches (session_id, first_seq, last_seq, events) VALUES
  ('huge', 0, 1, {sql_literal(filler % 0)} || 'small"}}}}}}' || E'\n' ||
                 {sql_literal(filler % 1)} || repeat('h', 5000000) || '"}}}}}}'),
  ('huge', 2, 2, {sql_literal(filler % 2)} || repeat('s', 3000000) || '"}}}}}}'),
  ('huge', 3, 3, {sql_literal(filler % 3)} || repeat('t', 2000000) || '"}}}}}}');
""")
    for sid, limits in (("pages", (1000, 7)), ("huge", (1000, 1))):
        rows = db_rows(pg_db, sid)
        sizes = [(seq, len(raw)) for seq, raw in rows]
        for limit in limits:
            got, after, pages = [], -1, 0
            while True:
                page = events_page(c, sid, after, limit)
                want, more = expected_page(sizes, after, limit)
                assert [e["seq"] for e in page["events"]] == want, (sid, limit, after)
                assert page["more"] is more, (sid, limit, after, page["more"])
                assert page["lastSeq"] == rows[-1][0]
                got += page["events"]
                pages += 1
                if not more:
                    break
                after = want[-1]
            assert got == [json.loads(raw) for _, raw in rows]
            print(f"\n{sid}: {len(rows)} events, limit {limit}: {pages} pages")
    assert events_page(c, "huge", 3) == {"events": [], "lastSeq": 3, "more": False}
