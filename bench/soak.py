#!/usr/bin/env python3
"""Soak test of harnessd: minutes of mixed, hostile traffic (cancels, dropped and
half-closed connections, overlapping prompts, session eviction and reload) to catch
what short tests cannot: events lost under churn, turns left open, slow leaks.

One selector thread drives a pool of TCP and WebSocket connections; a sampler thread
reads the daemon's RSS and fd count. At the end the session logs are checked against
every event the client was sent for an answered prompt. Exit 0 on pass, 1 on fail.

    bench/soak.sh                       # 10 minutes, 1000 sessions
    bench/soak.sh --seconds 60          # the CI length
    bench/soak.sh --seconds 60 -- --max-running-turns 32 --max-queued-turns 16
"""
from __future__ import annotations

import argparse
import hashlib
import heapq
import http.client
import json
import os
import random
import re
import resource
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
try:
    import pytest  # noqa: F401
except ImportError:
    # harnessd_helpers imports pytest only for pytest.fail; the soak needs neither.
    sys.modules["pytest"] = types.ModuleType("pytest")
import harnessd_helpers as hh  # noqa: E402
import ws_client as wsc  # noqa: E402

SESSION_BUSY = -32001
OVERLOADED = -32005
ZERO = bytes(8)

# The daemon writes compact JSON with keys in a fixed order (docs/protocol.md §2.1,
# §4.2), so a session.event frame is the fixed prefix, the event text, "}}". Taking
# the event text by a regex instead of json.loads keeps the client's CPU low; the
# text is then compared byte for byte with the log line. Frames of another layout
# fall back to json.loads and are compared as canonical JSON instead.
EVENT_RE = re.compile(
    rb'\{"jsonrpc":"2\.0","method":"session\.event","params":\{"sessionId":"([A-Za-z0-9_.\-]+)",'
    rb'"event":(\{"type":"([a-z/]+)","seq":(\d+),.*\})\}\}\Z', re.S)
LOG_RE = re.compile(rb'\{"type":"([a-z/]+)","seq":(\d+),')


def digest(data: bytes) -> bytes:
    d = hashlib.blake2b(data, digest_size=8).digest()
    return d if d != ZERO else b"\0" * 7 + b"\1"   # ZERO marks "not received"


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def expected_status(kind: str) -> str:
    return {"completed": "ok", "aborted": "aborted"}.get(kind, "error")


class Fail:
    """Failures by category, with the first few examples of each."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}

    def __call__(self, what: str, example: str = "") -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        ex = self.examples.setdefault(what, [])
        if example and len(ex) < 3:
            ex.append(example[:400])

    def __bool__(self) -> bool:
        return bool(self.counts)

    def report(self) -> str:
        out = []
        for what, n in self.counts.items():
            out.append(f"  FAIL {what}: {n}")
            out.extend(f"       e.g. {e}" for e in self.examples.get(what, []))
        return "\n".join(out)


class Slot:
    """One of the N sessions. After a few dozen turns it moves to a fresh id, so
    the per-session history (and the daemon's memory for it) stays bounded and a
    growing RSS means a leak rather than a longer conversation."""

    __slots__ = ("idx", "gen", "sid", "turns", "retire_at", "inflight", "last_cancel", "busy_ok_until")

    def __init__(self, idx: int, prefix: str, rng: random.Random):
        self.idx, self.gen, self.turns, self.inflight = idx, 0, 0, 0
        self.sid = f"{prefix}-{idx}-0"
        self.retire_at = rng.randint(10, 40)
        self.last_cancel = -1.0
        self.busy_ok_until = 0.0   # a turn cut off by a disconnect may still be settling


class Prompt:
    __slots__ = ("rid", "conn", "slot", "sid", "kind", "expect", "sent", "overlap", "contended", "events",
                 "start_seq")

    def __init__(self, rid, conn, slot, sid, kind, expect, overlap):
        self.rid, self.conn, self.slot, self.sid = rid, conn, slot, sid
        self.kind, self.expect, self.overlap = kind, expect, overlap
        self.contended = False             # an overlapping prompt was sent while this one ran
        self.sent = time.monotonic()
        self.events: list[tuple] = []      # (sid, seq, type, digest, canon, raw-if-needed)
        self.start_seq = None


class Conn:
    def __init__(self, kind: str, n: int):
        self.kind, self.n = kind, n
        self.sock: socket.socket | None = None
        self.ws: wsc.WSClient | None = None
        self.inbuf = bytearray()
        self.out = bytearray()
        self.ready = False
        self.half_closed = False
        self.half_closed_at = 0.0
        self.dead = False
        self.next_id = 1
        self.init_rid = None
        self.prompts: dict[int, Prompt] = {}
        self.by_sid: dict[str, Prompt] = {}
        self.cancels: dict[int, Slot] = {}
        self.frag: list[bytes] = []
        self.writing = False

    @property
    def name(self) -> str:
        return f"{self.kind}#{self.n}"


class Soak:
    def __init__(self, args, ports, pid):
        self.a = args
        self.tcp_port, self.ws_port = ports
        self.pid = pid
        self.rng = random.Random(args.seed)
        self.fail = Fail()
        self.sel = selectors.DefaultSelector()
        prefix = f"soak{os.getpid()}x{int(time.time()) % 100000}"
        self.slots = [Slot(i, prefix, self.rng) for i in range(args.sessions)]
        self.prefix = prefix
        self.idle = list(range(args.sessions))
        self.later: list[tuple[float, int]] = []   # (ready time, slot index)
        self.conns: list[Conn] = []
        self.reconnects: list[tuple[float, str]] = []
        self.inflight = 0
        self.digests: dict[str, bytearray] = {}
        self.canon: set[tuple[str, int]] = set()
        self.ends: dict[str, dict[int, str]] = {}          # sid -> turn/end seq -> status answered
        self.lost: dict[str, dict[int, tuple]] = {}       # sid -> turn/start seq -> (kind, cancel sent)
        self.st = dict(sent=0, ok=0, aborted=0, error=0, busy_overlap=0, busy_after_drop=0,
                       busy_unexpected=0, overloaded=0, lost=0, cancels=0, cancelled_true=0,
                       overlaps=0, overlap_ran=0, drops=0, half_closes=0, reconnects=0,
                       events=0, subagent_notes=0, canon_events=0, aborted_cancelled=0,
                       aborted_conn_closed=0, aborted_queued=0)
        self.inflight_samples: list[int] = []
        self.conn_seq = 0

    # -- connections -----------------------------------------------------------
    def open_conn(self, kind: str) -> Conn:
        c = Conn(kind, self.conn_seq)
        self.conn_seq += 1
        try:
            if kind == "tcp":
                s = socket.create_connection(("127.0.0.1", self.tcp_port), timeout=5)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            else:
                c.ws = wsc.WSClient.connect("127.0.0.1", self.ws_port, timeout=5)
                s = c.ws.sock
        except (OSError, wsc.WSError, wsc.HandshakeRefused, TimeoutError) as exc:
            self.fail("connect failed", f"{kind}: {exc!r}")
            heapq.heappush(self.reconnects, (time.monotonic() + 1.0, kind))
            return c
        s.setblocking(False)
        c.sock = s
        self.sel.register(s, selectors.EVENT_READ, c)
        self.conns.append(c)
        c.init_rid = self.request(c, "initialize", {"clientInfo": {"name": "soak", "version": "1"}})
        if c.ws is not None and c.ws._buf:
            self.ws_input(c, b"")
        return c

    def request(self, c: Conn, method: str, params: dict) -> int:
        rid = c.next_id
        c.next_id += 1
        data = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                          separators=(",", ":")).encode()
        c.out += wsc.encode_frame(wsc.OP_TEXT, data) if c.ws is not None else data + b"\n"
        self.flush(c)
        return rid

    def flush(self, c: Conn) -> None:
        if c.dead or c.sock is None:
            return
        try:
            while c.out:
                n = c.sock.send(c.out)
                del c.out[:n]
        except BlockingIOError:
            pass
        except OSError as exc:
            self.conn_gone(c, f"send failed: {exc!r}")
            return
        want = bool(c.out)
        if want != c.writing:
            c.writing = want
            self.sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0), c)

    def drop(self, c: Conn, mode: str) -> None:
        """Cut a connection mid-turn: the daemon must cancel its turns ("connection closed")."""
        self.st["drops"] += 1
        if mode == "half":
            # Half-close: the daemon cancels the turns and still answers them.
            self.st["half_closes"] += 1
            c.half_closed, c.half_closed_at = True, time.monotonic()
            try:
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        if mode == "rst":
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_conn(c)
        heapq.heappush(self.reconnects, (time.monotonic() + self.rng.uniform(0.1, 1.0), c.kind))

    def close_conn(self, c: Conn) -> None:
        if c.dead:
            return
        c.dead = True
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        self.conns.remove(c)
        now = time.monotonic()
        for p in list(c.prompts.values()):
            # Unanswered: its events are not checked, but its turn must still close,
            # normally with {aborted, "connection closed"}.
            self.st["lost"] += 1
            if p.start_seq is not None:
                self.lost.setdefault(p.sid, {})[p.start_seq] = (p.kind, p.slot.last_cancel >= p.sent)
            p.slot.busy_ok_until = now + 5.0
            self.prompt_done(p, ready_in=self.rng.uniform(0.0, 0.5))
        c.prompts.clear()
        c.by_sid.clear()

    def conn_gone(self, c: Conn, why: str) -> None:
        if not c.half_closed:
            self.fail("daemon closed a connection", f"{c.name}: {why}")
        self.close_conn(c)
        heapq.heappush(self.reconnects, (time.monotonic() + self.rng.uniform(0.1, 1.0), c.kind))

    # -- input -----------------------------------------------------------------
    def readable(self, c: Conn) -> None:
        try:
            data = c.sock.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError as exc:
            self.conn_gone(c, f"recv failed: {exc!r}")
            return
        if not data:
            self.conn_gone(c, "EOF")
            return
        if c.ws is not None:
            self.ws_input(c, data)
            return
        buf = c.inbuf
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            self.frame(c, bytes(buf[start:nl]))
            if c.dead:
                return
            start = nl + 1
        del buf[:start]

    def ws_input(self, c: Conn, data: bytes) -> None:
        ws = c.ws
        ws._buf += data
        while not c.dead:
            try:
                f = ws._parse_frame()
            except wsc.WSError as exc:
                self.fail("bad WebSocket frame", f"{c.name}: {exc}")
                self.close_conn(c)
                return
            if f is None:
                return
            fin, op, payload = f
            if op == wsc.OP_PING:
                c.out += wsc.encode_frame(wsc.OP_PONG, payload)
                self.flush(c)
            elif op == wsc.OP_CLOSE:
                self.conn_gone(c, f"close frame {payload[:2].hex()}")
                return
            elif op in (wsc.OP_TEXT, wsc.OP_CONT):
                c.frag.append(payload)
                if fin:
                    msg = b"".join(c.frag)
                    c.frag = []
                    self.frame(c, msg)
            elif op == wsc.OP_BINARY:
                self.fail("binary WebSocket message", c.name)

    def frame(self, c: Conn, raw: bytes) -> None:
        m = EVENT_RE.match(raw)
        if m is not None:
            sid = m.group(1).decode()
            typ = m.group(3).decode()
            seq = int(m.group(4))
            ev_raw = m.group(2)
            self.event(c, sid, typ, seq, digest(ev_raw), False, ev_raw)
            return
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            self.fail("frame is not JSON", f"{c.name}: {exc}: {raw[:200]!r}")
            return
        if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
            self.fail("frame is not JSON-RPC 2.0", f"{c.name}: {raw[:200]!r}")
            return
        method = obj.get("method")
        if method is not None:
            if "id" in obj:
                self.fail("daemon sent a request", f"{raw[:200]!r}")
            elif method == "session.event":
                ev = obj["params"]["event"]
                self.st["canon_events"] += 1
                self.event(c, obj["params"]["sessionId"], ev["type"], ev["seq"],
                           digest(canonical(ev)), True, json.dumps(ev).encode())
            elif method in ("subagent.started", "subagent.finished"):
                self.st["subagent_notes"] += 1
            else:
                self.fail("unknown notification", f"{raw[:200]!r}")
            return
        rid = obj.get("id")
        if rid == c.init_rid:
            if "result" in obj:
                c.ready = True
            else:
                self.fail("initialize failed", f"{raw[:200]!r}")
        elif rid in c.prompts:
            self.answer(c, c.prompts.pop(rid), obj)
        elif rid in c.cancels:
            c.cancels.pop(rid)
            res = obj.get("result")
            if not isinstance(res, dict) or not isinstance(res.get("cancelled"), bool):
                self.fail("bad session/cancel answer", f"{raw[:200]!r}")
            elif res["cancelled"]:
                self.st["cancelled_true"] += 1
        else:
            self.fail("response to no request", f"{c.name}: {raw[:200]!r}")

    def event(self, c, sid, typ, seq, dig, canon, ev_raw) -> None:
        self.st["events"] += 1
        top = sid.split(".sub-", 1)[0]
        p = c.by_sid.get(top)
        if p is None:
            self.fail("event outside any running prompt of its connection", f"{c.name} {sid} seq {seq} {typ}")
            return
        keep = ev_raw if typ in ("turn/start", "turn/end", "assistant/message") else None
        if typ == "turn/start" and sid == p.sid:
            p.start_seq = seq
        p.events.append((sid, seq, typ, dig, canon, keep))

    # -- prompts ---------------------------------------------------------------
    def make_text(self, slot: Slot) -> tuple[str, str, object]:
        """A scripted prompt, its kind and what its answer must be when it completes."""
        r = self.rng.random()
        n = slot.turns
        if r < 0.22:
            text = f"hello {slot.idx} {n}"
            return text, "echo", "echo: " + text
        if r < 0.37:
            return (f"@delay {self.rng.randint(200, 2000)}\nslow hello {n}", "echo-delay",
                    f"echo: slow hello {n}")
        if r < 0.55:
            k, b = self.rng.randint(1, 20), self.rng.randint(16, 512)
            return f"@chunks {k} {b}", "chunks", (k, b)
        if r < 0.82:
            d, k, b = self.rng.randint(20, 150), self.rng.randint(5, 25), self.rng.randint(16, 256)
            return f"@delay {d}\n@chunks {k} {b}", "chunks-delay", (k, b)
        if r < 0.97:
            x = f"child {slot.idx} {n}"
            pre = f"@delay {self.rng.randint(50, 800)}\n" if self.rng.random() < 0.5 else ""
            return f"{pre}@subagent @reply {x}", "subagent", f"subagent said: {x}"
        return f"@error soak {n}", "error", f"soak {n}"

    def send_prompt(self, slot: Slot, c: Conn, overlap: bool = False) -> None:
        if overlap:
            text, kind, expect = f"overlap {slot.turns}", "echo", f"echo: overlap {slot.turns}"
        else:
            text, kind, expect = self.make_text(slot)
        rid = self.request(c, "session/prompt", hh.prompt_params(slot.sid, text))
        if c.dead:
            return
        p = Prompt(rid, c, slot, slot.sid, kind, expect, overlap)
        c.prompts[rid] = p
        c.by_sid[slot.sid] = p
        slot.inflight += 1
        self.inflight += 1
        self.st["sent"] += 1

    def prompt_done(self, p: Prompt, ready_in: float = 0.0) -> None:
        slot = p.slot
        slot.inflight -= 1
        self.inflight -= 1
        if slot.inflight:
            return
        if slot.turns >= slot.retire_at:
            slot.gen += 1
            slot.turns = 0
            slot.sid = f"{self.prefix}-{slot.idx}-{slot.gen}"
            slot.retire_at = self.rng.randint(10, 40)
        if ready_in <= 0:
            self.idle.append(slot.idx)
        else:
            heapq.heappush(self.later, (time.monotonic() + ready_in, slot.idx))

    def answer(self, c: Conn, p: Prompt, obj: dict) -> None:
        c.by_sid.pop(p.sid, None)
        slot, now = p.slot, time.monotonic()
        if "error" in obj:
            err = obj["error"]
            code = err.get("code")
            if p.events:
                self.fail("events for a refused prompt", f"{p.sid}: {err}")
            ready_in = 0.0
            if code == SESSION_BUSY:
                if p.overlap or p.contended:
                    # Either of two overlapping prompts may be the one refused: the
                    # daemon may receive the overlapping one first.
                    self.st["busy_overlap"] += 1
                elif now < slot.busy_ok_until:
                    self.st["busy_after_drop"] += 1
                    ready_in = 0.2
                else:
                    self.st["busy_unexpected"] += 1
                    self.fail("-32001 although the session's last prompt was answered", f"{p.sid}: {err}")
            elif code == OVERLOADED:
                self.st["overloaded"] += 1
                ready_in = (err.get("data") or {}).get("retryAfterMs", 100) / 1000.0
            else:
                self.fail(f"error {code} answering session/prompt", f"{p.sid}: {err}")
            self.prompt_done(p, ready_in)
            return
        res = obj.get("result") or {}
        status, reason = res.get("status"), res.get("reason")
        if status not in ("ok", "aborted", "error") or not isinstance(reason, dict):
            self.fail("bad session/prompt result", f"{p.sid}: {obj}")
            self.prompt_done(p)
            return
        self.st[status] += 1
        if p.overlap:
            self.st["overlap_ran"] += 1
        slot.turns += 1
        self.check_answered(p, status, reason)
        self.prompt_done(p)

    def check_answered(self, p: Prompt, status: str, reason: dict) -> None:
        """Per answered prompt: the notified events of each session form one whole turn
        with contiguous seq; the answer matches the notified turn/end; the text is right.
        The digests are kept for the comparison with the logs at the end."""
        by_sid: dict[str, list[tuple]] = {}
        for e in p.events:
            by_sid.setdefault(e[0], []).append(e)
        own = by_sid.get(p.sid)
        where = f"{p.sid} ({p.kind})"
        if not own:
            # Cancelled (or cut off) while it waited for a running slot: no turn began.
            why = reason.get("reason")
            if not p.events and status == "aborted" and (
                    (why == "cancelled" and p.slot.last_cancel >= p.sent)
                    or (why == "connection closed" and p.conn.half_closed)):
                self.st["aborted_queued"] += 1
            else:
                self.fail("answered prompt without events", f"{where}: {status} {reason}")
            return
        for sid, evs in by_sid.items():
            seqs = [e[1] for e in evs]
            if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
                self.fail("notified seq not contiguous within a turn", f"{sid}: {seqs[:40]}")
            if evs[0][2] != "turn/start" or evs[-1][2] != "turn/end":
                self.fail("notified turn does not run turn/start..turn/end",
                          f"{sid}: {evs[0][2]} .. {evs[-1][2]}")
            if sid != p.sid and seqs[0] != 0:
                self.fail("child session does not start at seq 0", f"{sid}: {seqs[0]}")
            buf = self.digests.setdefault(sid, bytearray())
            for (_, seq, _, dig, canon, _) in evs:
                need = (seq + 1) * 8
                if len(buf) < need:
                    buf.extend(bytes(need - len(buf)))
                if buf[seq * 8:need] != ZERO:
                    self.fail("one seq notified to two answered prompts", f"{sid} seq {seq}")
                buf[seq * 8:need] = dig
                if canon:
                    self.canon.add((sid, seq))
        end = own[-1]
        if end[2] == "turn/end":
            self.ends.setdefault(p.sid, {})[end[1]] = status
            told = json.loads(end[5])["data"]["reason"]
            if told != reason:
                self.fail("response reason differs from the notified turn/end", f"{where}: {reason} vs {told}")
        kind = reason.get("kind")
        if expected_status(kind) != status:
            self.fail("status does not match reason", f"{where}: {status} {reason}")
        if status == "aborted":
            why = reason.get("reason")
            if why == "cancelled" and p.slot.last_cancel >= p.sent:
                self.st["aborted_cancelled"] += 1
            elif why == "connection closed" and p.conn.half_closed:
                self.st["aborted_conn_closed"] += 1
            else:
                self.fail("unexplained abort", f"{where}: {reason}")
        elif status == "ok":
            msgs = [e[5] for e in own if e[2] == "assistant/message"]
            text = None
            if msgs:
                content = json.loads(msgs[-1])["data"]["content"]
                text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            want = p.expect
            if isinstance(want, tuple):
                k, b = want
                want = "".join(chr(97 + i % 26) * b for i in range(k))
            if p.kind == "error" or text != want:
                self.fail("wrong answer", f"{where}: {str(text)[:80]!r} != {str(want)[:80]!r}")
        elif status == "error":
            if p.kind != "error" or reason.get("message") != p.expect:
                self.fail("unexpected turn error", f"{where}: {reason}")

    # -- the run ---------------------------------------------------------------
    def ready_conns(self) -> list[Conn]:
        return [c for c in self.conns if c.ready and not c.half_closed]

    def chaos(self, now: float, conns: list[Conn]) -> None:
        """Cancels, overlapping prompts and dropped connections, each at a steady rate."""
        busy = [c for c in conns if c.prompts]
        if not busy:
            return
        rate = self.rng.random
        if rate() < self.a.cancel_rate * self.tick:
            c = self.rng.choice(busy)
            p = self.rng.choice(list(c.prompts.values()))
            if now - p.sent > 0.03:
                p.slot.last_cancel = now
                target = self.rng.choice(conns)
                rid = self.request(target, "session/cancel", {"sessionId": p.sid})
                target.cancels[rid] = p.slot
                self.st["cancels"] += 1
        if rate() < self.a.overlap_rate * self.tick:
            c = self.rng.choice(busy)
            p = self.rng.choice(list(c.prompts.values()))
            others = [o for o in conns if o is not c and p.sid not in o.by_sid]
            if others:
                self.st["overlaps"] += 1
                p.contended = True
                self.send_prompt(p.slot, self.rng.choice(others), overlap=True)
        if rate() < self.a.drop_rate * self.tick:
            c = self.rng.choice(busy)
            modes = ["close", "rst", "half"] if c.kind == "tcp" else ["close", "rst"]
            self.drop(c, self.rng.choice(modes))

    def feed(self, now: float, conns: list[Conn]) -> None:
        while self.later and self.later[0][0] <= now:
            self.idle.append(heapq.heappop(self.later)[1])
        self.tokens = min(self.tokens + self.a.rate * self.tick, max(1.0, self.a.rate * 0.1))
        while self.inflight < self.a.inflight and self.tokens >= 1 and self.idle and conns:
            i = self.rng.randrange(len(self.idle))
            self.idle[i], self.idle[-1] = self.idle[-1], self.idle[i]
            slot = self.slots[self.idle.pop()]
            self.tokens -= 1
            self.send_prompt(slot, self.rng.choice(conns))

    def poll(self, timeout: float) -> None:
        for key, mask in self.sel.select(timeout):
            c = key.data
            if c.dead:
                continue
            if mask & selectors.EVENT_WRITE:
                self.flush(c)
            if mask & selectors.EVENT_READ and not c.dead:
                self.readable(c)

    def run(self, daemon: subprocess.Popen) -> None:
        self.tokens = 0.0
        n_ws = self.a.connections // 2
        for i in range(self.a.connections):
            self.open_conn("ws" if i < n_ws else "tcp")
        t0 = time.monotonic()
        self.t0 = t0
        end = t0 + self.a.seconds
        last = t0
        next_check = t0 + 1
        while True:
            # At least 10 ms a round: frames pile up in the socket buffers meanwhile and
            # are read in a few large recv()s, which keeps the client's CPU modest.
            pause = last + 0.01 - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            self.poll(0.02)
            now = time.monotonic()
            if now >= end:
                break
            self.tick = now - last
            last = now
            while self.reconnects and self.reconnects[0][0] <= now:
                _, kind = heapq.heappop(self.reconnects)
                self.st["reconnects"] += 1
                self.open_conn(kind)
            conns = self.ready_conns()
            self.feed(now, conns)
            self.chaos(now, conns)
            if now >= next_check:
                next_check = now + 1
                self.inflight_samples.append(self.inflight)
                if daemon.poll() is not None:
                    self.fail("daemon died during the run", f"exit {daemon.returncode}")
                    return
                for c in list(self.conns):
                    if c.half_closed and now - c.half_closed_at > 30:
                        self.fail("half-closed connection not closed by the daemon within 30 s", c.name)
                        self.close_conn(c)

    def drain(self, timeout: float) -> None:
        """No new prompts; everything in flight must be answered."""
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            self.poll(0.05)
        if self.inflight:
            for c in self.conns:
                for p in c.prompts.values():
                    self.fail(f"prompt unanswered {timeout:.0f} s after the run",
                              f"{c.name} {p.sid} ({p.kind}) sent {time.monotonic() - p.sent:.1f} s ago, "
                              f"{len(p.events)} events")
        for c in list(self.conns):
            c.half_closed = True    # from here on a close is ours, not a failure
            self.close_conn(c)

    # -- logs ------------------------------------------------------------------
    def check_logs(self, root: Path) -> dict:
        """Every log: header names its file, seq contiguous from 0, every turn closed
        (and never by recovery or shutdown here). Every notified event of an answered
        prompt is the log line at its seq; the answer status matches the logged turn/end."""
        fail = self.fail
        stats = dict(logs=0, lines=0, turns=0, checked=0, kinds={}, lost_checked=0)
        seen: set[str] = set()
        for path in sorted(root.glob("*.jsonl")):
            raw = path.read_bytes()
            stats["logs"] += 1
            if not raw.endswith(b"\n"):
                fail("log does not end with a newline", path.name)
            lines = raw.split(b"\n")[:-1] if raw.endswith(b"\n") else raw.split(b"\n")
            try:
                header = json.loads(lines[0])
                sid = header["id"]
            except (ValueError, KeyError, IndexError, TypeError):
                fail("bad log header", f"{path.name}: {lines[:1]!r}")
                continue
            if hh.encode_session_id(sid) + ".jsonl" != path.name:
                fail("log file name does not encode its session id", f"{path.name} holds {sid}")
            seen.add(sid)
            digs = self.digests.get(sid, b"")
            ends = self.ends.get(sid, {})
            lost = self.lost.get(sid, {})
            open_start = open_turn = None
            bad_seq = False
            for i, line in enumerate(lines[1:]):
                stats["lines"] += 1
                m = LOG_RE.match(line)
                ev = None
                if m is not None:
                    typ, seq = m.group(1).decode(), int(m.group(2))
                else:
                    try:
                        ev = json.loads(line)
                        typ, seq = ev["type"], ev["seq"]
                    except (ValueError, KeyError, TypeError):
                        fail("log line is not an event", f"{path.name}:{i + 1}: {line[:200]!r}")
                        continue
                if seq != i and not bad_seq:
                    bad_seq = True
                    fail("log seq not contiguous from 0", f"{path.name}: event {i} has seq {seq}")
                d = digs[i * 8:i * 8 + 8]
                if d and d != ZERO:
                    stats["checked"] += 1
                    if (sid, i) in self.canon:
                        mine = digest(canonical(json.loads(line)))
                    else:
                        mine = digest(line)
                    if mine != d:
                        fail("notified event differs from the log", f"{path.name} seq {i}: log {line[:300]!r}")
                if typ == "turn/start":
                    ev = ev or json.loads(line)
                    if open_start is not None:
                        fail("turn/start before the previous turn ended", f"{path.name} seq {i}")
                    open_start, open_turn = i, ev["data"]["turn"]
                elif typ == "turn/end":
                    ev = ev or json.loads(line)
                    r = ev["data"]["reason"]
                    kind = r.get("kind")
                    label = kind if kind != "aborted" else f"aborted/{r.get('reason')}"
                    stats["kinds"][label] = stats["kinds"].get(label, 0) + 1
                    stats["turns"] += 1
                    if open_start is None:
                        fail("turn/end without turn/start", f"{path.name} seq {i}")
                    elif ev["data"]["turn"] != open_turn:
                        fail("turn/end of another turn", f"{path.name} seq {i}: {ev['data']['turn']} vs {open_turn}")
                    if kind in ("interrupted", "shutdown") or r.get("reason") == "shutdown":
                        fail("turn closed by log recovery or shutdown during the run", f"{path.name} seq {i}: {r}")
                    if i in ends:
                        status = ends.pop(i)
                        if expected_status(kind) != status:
                            fail("answered status differs from the logged turn/end",
                                 f"{path.name} seq {i}: answered {status}, logged {r}")
                    if open_start in lost:
                        stats["lost_checked"] += 1
                        pkind, cancelled = lost.pop(open_start)
                        ok = (kind == "completed" or (kind == "error" and pkind == "error")
                              or (kind == "aborted" and r.get("reason") == "connection closed")
                              or (kind == "aborted" and r.get("reason") == "cancelled" and cancelled))
                        if not ok:
                            fail("turn of a dropped connection ended oddly", f"{path.name} seq {i}: {r}")
                    open_start = open_turn = None
            if open_start is not None:
                fail("turn never closed", f"{path.name}: turn/start at seq {open_start}, {len(lines) - 1} events")
            if len(digs) > (len(lines) - 1) * 8 and any(digs[(len(lines) - 1) * 8:]):
                fail("notified event missing from the log", f"{path.name}: log has {len(lines) - 1} events, "
                     f"client got seq up to {len(digs) // 8 - 1}")
            for seq in ends:
                fail("answered turn/end not in the log", f"{path.name} seq {seq}")
            for seq in lost:
                fail("turn of a dropped connection not closed", f"{path.name} turn/start seq {seq}")
        for sid in self.digests.keys() - seen:
            fail("no log for a session with answered prompts", sid)
        return stats


# ---------------------------------------------------------------------------
# the daemon's side

def proc_sample(pid: int) -> tuple[float, int]:
    rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024.0
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def http_get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def metrics(port: int) -> dict[str, float]:
    out = {}
    _, body = http_get(port, "/metrics")
    for line in body.decode().splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.partition(" ")
            out[name] = float(value)
    return out


class Sampler(threading.Thread):
    """RSS, fds (from /proc) and loaded sessions (from /metrics) every few seconds."""

    def __init__(self, pid: int, ws_port: int, interval: float, soak: Soak):
        super().__init__(daemon=True)
        self.pid, self.port, self.interval, self.soak = pid, ws_port, interval, soak
        self.samples: list[tuple] = []    # (t, rss MiB, fds, loaded sessions, open logs, connections, in flight)
        self.stop = threading.Event()
        self.t0 = time.monotonic()

    def sample(self) -> None:
        try:
            rss, fds = proc_sample(self.pid)
        except OSError:
            return
        try:
            m = metrics(self.port)
        except (OSError, http.client.HTTPException, ValueError):
            m = {}
        self.samples.append((time.monotonic() - self.t0, rss, fds, int(m.get("harnessd_sessions", -1)),
                             int(m.get("harnessd_open_logs", -1)), self.soak.inflight))

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)


def fresh_connection(tcp_port: int, ws_port: int, prefix: str) -> list[str]:
    """A new client on each transport still gets an ordinary answer."""
    problems = []
    for kind in ("tcp", "ws"):
        sid = f"{prefix}-final-{kind}"
        reqs = [hh.make_request("initialize", {}, 1),
                hh.make_request("session/prompt", hh.prompt_params(sid, "still there?"), 2)]
        try:
            got = None
            deadline = time.monotonic() + 10
            if kind == "tcp":
                s = socket.create_connection(("127.0.0.1", tcp_port), timeout=10)
                s.sendall(hh.encode(reqs[0]))
                buf = b""
                sent = False
                while got is None and time.monotonic() < deadline:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for ln in lines:
                        o = json.loads(ln)
                        if o.get("id") == 1 and not sent:
                            s.sendall(hh.encode(reqs[1]))
                            sent = True
                        elif o.get("id") == 2:
                            got = o
                s.close()
            else:
                ws = wsc.WSClient.connect("127.0.0.1", ws_port, timeout=10)
                ws.send_text(json.dumps(reqs[0]))
                while got is None and time.monotonic() < deadline:
                    o = json.loads(ws.recv_message(10).payload)
                    if o.get("id") == 1:
                        ws.send_text(json.dumps(reqs[1]))
                    elif o.get("id") == 2:
                        got = o
                ws.close()
            if not got or got.get("result", {}).get("status") != "ok":
                problems.append(f"{kind}: fresh connection got {got}")
        except Exception as exc:  # noqa: BLE001 - any failure here is the finding
            problems.append(f"{kind}: fresh connection failed: {exc!r}")
    return problems


def start_daemon(binary: str, work: Path, root: Path, extra: list[str]):
    ready = work / "ready.json"
    cmd = [binary, "--listen", "tcp://127.0.0.1:0", "--listen", "ws://127.0.0.1:0",
           "--ready-file", str(ready), "--session-root", str(root), "--session-idle-ms", "2000", *extra]
    err = open(work / "harnessd.stderr", "wb")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                            preexec_fn=hh._die_with_parent, cwd=str(work))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"soak: harnessd exited with {proc.returncode} before it was ready:\n"
                             f"{(work / 'harnessd.stderr').read_text(errors='replace')[-2000:]}")
        try:
            urls = json.loads(ready.read_text())["listen"]
            tcp = next(u for u in urls if u.startswith("tcp://"))
            ws = next(u for u in urls if u.startswith("ws://"))
            return proc, int(tcp.rsplit(":", 1)[1]), int(ws.rsplit(":", 1)[1]), cmd
        except (OSError, ValueError, KeyError, StopIteration):
            time.sleep(0.02)
    proc.kill()
    raise SystemExit("soak: harnessd wrote no ready file within 15 s")


def curve_verdict(samples: list[tuple], seconds: float, fail: Fail) -> str:
    """Flat after warm-up: the last quarter's max RSS within 30% + 20 MiB of the
    post-warm-up minimum, and fds grown by at most 50. Each loaded session holds its
    log open and idle ones are evicted in sweeps, so the raw fd count swings with the
    number of loaded sessions (by ~100 at 1000 sessions); the growth is judged on
    the fds other than session logs (fds - harnessd_open_logs), which a leak of
    sockets or of log files not counted as open would still raise."""
    post = [s for s in samples if seconds * 0.2 <= s[0] <= seconds and s[4] >= 0]
    last = [s for s in post if s[0] >= seconds * 0.75]
    if len(post) < 3 or not last:
        fail("too few RSS/fd samples after warm-up", f"{len(post)} samples")
        return "curve: too few samples"
    rss_min = min(s[1] for s in post)
    rss_max = max(s[1] for s in last)
    other_min = min(s[2] - s[4] for s in post)
    other_max = max(s[2] - s[4] for s in last)
    limit = rss_min * 1.3 + 20
    if rss_max > limit:
        fail("RSS grows after warm-up", f"last quarter max {rss_max:.1f} MiB > {limit:.1f} MiB "
             f"(post-warm-up min {rss_min:.1f} MiB)")
    if other_max - other_min > 50:
        fail("fds grow after warm-up", f"fds other than session logs: last quarter max {other_max} > "
             f"post-warm-up min {other_min} + 50")
    return (f"RSS post-warm-up min {rss_min:.1f} MiB, last-quarter max {rss_max:.1f} MiB (limit {limit:.1f}); "
            f"fds besides session logs min {other_min}, last-quarter max {other_max} (limit {other_min + 50}), "
            f"all fds {min(s[2] for s in post)}..{max(s[2] for s in post)}")


def wait_idle(port: int, pid: int, idle_s: float, baseline_fds: int, fail: Fail) -> str:
    """Once every client is gone and the idle timeout has passed, every session must be
    evicted and the daemon must hold no more descriptors than before the first client."""
    deadline = time.monotonic() + idle_s + 10
    m: dict = {}
    while time.monotonic() < deadline:
        try:
            m = metrics(port)
        except (OSError, http.client.HTTPException, ValueError):
            m = {}
        if m.get("harnessd_sessions") == 0 and m.get("harnessd_open_logs") == 0:
            break
        time.sleep(0.2)
    else:
        fail("sessions still loaded after the idle timeout", f"sessions {m.get('harnessd_sessions')}, "
             f"open logs {m.get('harnessd_open_logs')}")
    try:
        _, fds = proc_sample(pid)
    except OSError:
        return "idle: daemon gone"
    # One socket of the /metrics request itself may still be open.
    if fds > baseline_fds + 1:
        fail("descriptors left once idle", f"{fds} fds, {baseline_fds} before the first client; "
             f"{sorted(os.readlink(f'/proc/{pid}/fd/{f}') for f in os.listdir(f'/proc/{pid}/fd'))[:30]}")
    return f"idle after the run: {int(m.get('harnessd_sessions', -1))} sessions loaded, {fds} fds ({baseline_fds} at start)"


def print_table(samples: list[tuple], seconds: float) -> None:
    rows = [s for s in samples if s[0] <= seconds]
    step = max(1, len(rows) // 20)
    shown = rows[::step]
    if rows and shown[-1] is not rows[-1]:
        shown.append(rows[-1])
    if samples and samples[-1] not in shown:
        shown.append(samples[-1])      # after the drain
    print(f"{'t s':>7} {'RSS MiB':>8} {'fds':>6} {'loaded':>7} {'logs':>6} {'inflight':>8}")
    for t, rss, fds, loaded, logs, infl in shown:
        mark = " (warm-up)" if t < seconds * 0.2 else (" (after the run, idle)" if t > seconds else "")
        print(f"{t:7.1f} {rss:8.1f} {fds:6d} {loaded:7d} {logs:6d} {infl:8d}{mark}")


def main() -> int:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="soak.py [options] [-- harnessd options]")
    ap.add_argument("--sessions", type=int, default=1000, help="sessions driven at once (default 1000)")
    ap.add_argument("--seconds", type=float, default=600, help="length of the run (default 600)")
    ap.add_argument("--connections", type=int, default=32, help="connections, half WebSocket (default 32)")
    ap.add_argument("--harnessd", default=str(REPO / "build" / "harnessd"), help="daemon binary")
    ap.add_argument("--keep", action="store_true", help="keep the session dir (it is also kept on failure)")
    ap.add_argument("--inflight", type=int, default=150, help="prompts kept in flight at most (default 150)")
    ap.add_argument("--rate", type=float, default=200, help="prompts sent per second at most (default 200)")
    ap.add_argument("--cancel-rate", type=float, default=4, help="session/cancel per second (default 4)")
    ap.add_argument("--overlap-rate", type=float, default=1, help="overlapping prompts per second (default 1)")
    ap.add_argument("--drop-rate", type=float, default=0.4, help="connections cut per second (default 0.4)")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args(argv)
    if a.sessions < 1 or a.connections < 2 or a.seconds <= 0:
        ap.error("need --sessions >= 1, --connections >= 2, --seconds > 0")
    if not os.access(a.harnessd, os.X_OK):
        print(f"soak: {a.harnessd} is not an executable (build harnessd first)", file=sys.stderr)
        return 1

    work = Path(tempfile.mkdtemp(prefix="harnessd-soak-"))
    root = work / "sessions"
    root.mkdir()
    # A private copy: a rebuild of build/harnessd during a long run must not touch it.
    binary = str(work / "harnessd")
    shutil.copy2(a.harnessd, binary)
    proc, tcp_port, ws_port, cmd = start_daemon(binary, work, root, extra)
    print(f"soak: {a.seconds:.0f} s, {a.sessions} sessions, {a.connections} connections; "
          f"harnessd pid {proc.pid}: {' '.join(cmd[1:])}", flush=True)
    # Descriptors before any client: the idle daemon must come back to this.
    baseline_fds = proc_sample(proc.pid)[1]
    idle_ms = 2000
    for i, arg in enumerate(extra):
        if arg == "--session-idle-ms" and i + 1 < len(extra):
            idle_ms = int(extra[i + 1])
        elif arg.startswith("--session-idle-ms="):
            idle_ms = int(arg.split("=", 1)[1])
    idle_note = "idle after the run: not reached"
    soak = Soak(a, (tcp_port, ws_port), proc.pid)
    sampler = Sampler(proc.pid, ws_port, 2.0 if a.seconds <= 120 else 5.0, soak)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    exit_code = None
    try:
        sampler.start()
        soak.run(proc)
        run_end = time.monotonic()
        alive = proc.poll() is None
        if alive:
            soak.drain(60)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
        if alive:
            # Dropped connections' turns settle on their own; wait until nothing runs.
            deadline = time.monotonic() + 30
            health = {}
            while time.monotonic() < deadline:
                try:
                    health = json.loads(http_get(ws_port, "/healthz")[1])
                except (OSError, ValueError, http.client.HTTPException):
                    health = {}
                if health.get("runningTurns") == 0 and health.get("connections") == 0:
                    break
                time.sleep(0.2)
            else:
                soak.fail("turns or connections left after the drain", f"/healthz {health}")
            for problem in fresh_connection(tcp_port, ws_port, soak.prefix):
                soak.fail("daemon does not serve a fresh connection", problem)
            idle_note = wait_idle(ws_port, proc.pid, idle_ms / 1000.0, baseline_fds, soak.fail)
        sampler.stop.set()
        sampler.join(10)
        sampler.sample()
        t_check = time.monotonic()
        logs = soak.check_logs(root)
        t_check = time.monotonic() - t_check
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
                soak.fail("harnessd did not exit within 30 s of SIGTERM")
            if rc != 0:
                soak.fail("harnessd exit code after SIGTERM", str(rc))
        else:
            soak.fail("harnessd not alive at the end", f"exit {proc.returncode}")

        print()
        print_table(sampler.samples, a.seconds)
        curve = curve_verdict(sampler.samples, a.seconds, soak.fail)
        st = soak.st
        inf = soak.inflight_samples or [0]
        span = run_end - soak.t0
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(logs["kinds"].items(), key=lambda kv: -kv[1]))
        verdict = "FAIL" if soak.fail else "PASS"
        print()
        print(
            f"soak {verdict}: {span:.0f} s, {a.sessions} sessions over {a.connections} connections "
            f"(TCP+WS), {soak.conn_seq} opened in all ({st['drops']} cut mid-turn, {st['half_closes']} of them "
            f"half-closed). Prompts sent {st['sent']} ({st['sent'] / span:.0f}/s, in flight "
            f"{min(inf)}..{max(inf)}, mean {sum(inf) / len(inf):.0f}): answered ok {st['ok']}, aborted "
            f"{st['aborted']} ({st['aborted_cancelled']} cancelled, {st['aborted_conn_closed']} connection "
            f"closed, {st['aborted_queued']} while queued), error {st['error']}; -32001 {st['busy_overlap'] + st['busy_after_drop'] + st['busy_unexpected']} "
            f"({st['busy_overlap']} between {st['overlaps']} pairs of overlapping prompts, {st['busy_after_drop']} after a "
            f"drop, {st['busy_unexpected']} unexpected); -32005 {st['overloaded']}; lost with their connection "
            f"{st['lost']}. session/cancel {st['cancels']} ({st['cancelled_true']} cancelled a turn). "
            f"Events received {st['events']}, {logs['checked']} checked byte for byte against "
            f"{logs['logs']} logs ({logs['lines']} events, {logs['turns']} turns ended: {kinds}; "
            f"{logs['lost_checked']} of them on cut connections). {curve}; {idle_note}. "
            f"Client CPU {client_cpu:.0f} s ({100 * client_cpu / max(span, 1):.0f}%); log check {t_check:.0f} s.")
        if soak.fail:
            print(soak.fail.report())
            print(f"soak: kept {work} (harnessd.stderr, sessions/)")
        elif a.keep:
            print(f"soak: kept {work}")
        exit_code = 1 if soak.fail else 0
        return exit_code
    finally:
        sampler.stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if exit_code == 0 and not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
