"""The chat UI's store: a bounded in-memory view of the sessions of `agents.chat`, and
the cursors its Server-Sent-Event subscribers read it with (pipeline.views.ui serves it).

Three topics feed it. `agents.chat` gives the readable records and the state a reader
sees (working, waiting for approval, done...). `agents.sessions` gives each session's
summary as the worker keeps it: model, tokens, cost, runtime. `agents.canonical` gives
what neither says: when each turn and tool call started and ended (their `createdAt`),
each turn's tokens and cost, and the worker's stall notices. The fleet view
(`ChatStore.fleet`) counts these; it adds nothing the topics do not say.

Memory is bounded: at most `max_records` records per session (oldest dropped
first; the page says how many were dropped), a session also trims itself to a
quarter of the byte budget, at most MAX_TURNS turn timings and MAX_TOOLS tool timings
per session (oldest first), and beyond `max_sessions` sessions or `max_bytes` in
all, the least recently active session is evicted. SSE subscribers hold no queue,
only a cursor (the next seq to send) into that store, so a slow browser cannot
grow memory; records dropped before it read them are reported as a gap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, OrderedDict, deque
from datetime import UTC, datetime
from typing import Any

import msgspec

from pipeline.views.render import shown_command
from topics.payloads.base import TOOL_ITEM_TYPES

DEFAULT_MAX_SESSIONS = 1000
#: Turn and tool-call timings kept per session (the oldest are forgotten first).
MAX_TURNS = 200
MAX_TOOLS = 500
#: Days of token and cost totals kept (today's and the days before it).
MAX_DAYS = 7
DEFAULT_MAX_RECORDS = 5000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

#: Session states, as /api/sessions reports them.
WORKING, WAITING_APPROVAL, WAITING_ANSWER, DONE, FAILED = (
    "working", "waiting_approval", "waiting_answer", "done", "failed")

_RECORD_OVERHEAD = 96  # rough bytes per stored record beyond its JSON text

#: The canonical event types the store reads; it skips the others.
_TIMED = frozenset({"turn.started", "turn.completed", "turn.aborted", "item.started",
                    "item.completed", "session.state.changed", "session.exited"})


class SessionView:
    """What the UI knows about one session: its newest records and derived state."""

    __slots__ = ("session_id", "provider", "records", "bytes", "last_seq", "dropped", "phase",
                 "pending_approvals", "pending_questions", "turns", "last_activity", "preview",
                 "summary_record", "turn_times", "tool_times", "stalled", "canonical_seq")

    def __init__(self, session_id: str, provider: str):
        self.session_id, self.provider = session_id, provider
        self.records: deque[tuple[int, str]] = deque()  # (seq, JSON text), seq increasing
        self.bytes = 0
        self.last_seq = 0
        self.dropped = 0  # records this view no longer holds (trimmed, or before it started)
        self.phase = WORKING
        self.pending_approvals: dict[str, dict[str, Any]] = {}
        self.pending_questions: set[str] = set()
        self.turns = 0
        self.last_activity = 0  # epoch ms of the newest record (Kafka timestamp)
        self.preview = ""
        self.summary_record: dict[str, Any] | None = None  # its latest agents.sessions value
        # turn id -> {model, started_at, ended_at, duration_ms, tokens, cost_usd, ...}
        self.turn_times: OrderedDict[str, dict[str, Any]] = OrderedDict()
        # the chat's tool_use_id -> {started_at, ended_at, duration_ms}
        self.tool_times: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.stalled: str | None = None  # what a stalled session waits on, until it recovers
        self.canonical_seq = 0  # the last canonical event taken (redeliveries skipped)

    @property
    def state(self) -> str:
        if self.pending_approvals:
            return WAITING_APPROVAL
        if self.pending_questions:
            return WAITING_ANSWER
        return self.phase

    def apply(self, r: dict[str, Any]) -> None:
        """Update the derived state with one record (already known to be new)."""
        t = r.get("type")
        if t == "done":
            self.phase = FAILED if r.get("is_error") else DONE
            self.turns += 1
            # a turn that ended leaves nothing waiting
            self.pending_approvals.clear()
            self.pending_questions.clear()
            self.preview = _clip(r.get("final_text") or r.get("result") or self.preview)
            return
        if t == "error":
            if not r.get("will_retry"):
                self.phase = FAILED
            self.preview = _clip(str(r.get("message") or ""))
            return
        self.phase = WORKING
        if t == "text":
            self.preview = _clip(str(r.get("accumulated") or r.get("content") or ""))
        elif t == "approval":
            rid = str(r.get("request_id"))
            if r.get("state") == "opened":
                self.pending_approvals[rid] = {"request_id": rid,
                                               "request_type": r.get("request_type"),
                                               "tool_name": r.get("tool_name"),
                                               "detail": _clip(str(r.get("shown_command")
                                                                   or r.get("detail") or ""))}
            else:
                self.pending_approvals.pop(rid, None)
        elif t == "question":
            rid = str(r.get("request_id"))
            if r.get("state") == "asked":
                self.pending_questions.add(rid)
            else:
                self.pending_questions.discard(rid)

    def since(self, seq: int) -> list[tuple[int, str]]:
        """Stored records with seq >= `seq`, oldest first."""
        out: list[tuple[int, str]] = []
        for item in reversed(self.records):
            if item[0] < seq:
                break
            out.append(item)
        out.reverse()
        return out

    @property
    def fleet_state(self) -> str:
        """The one state the fleet view counts a session under: exited (its summary
        says so), stalled (the worker said so and it has not recovered), waiting on a
        person, failed, done or working."""
        summary = self.summary_record or {}
        if summary.get("state") == "exited":
            return "exited"
        if self.stalled is not None:
            return "stalled"
        if self.waiting_on_person:
            return "waiting"
        if self.state == FAILED or summary.get("state") == "error":
            return FAILED
        return self.state

    @property
    def waiting_on_person(self) -> bool:
        summary = self.summary_record or {}
        if summary.get("state") == "exited":
            return False
        return (self.state in (WAITING_APPROVAL, WAITING_ANSWER)
                or bool(summary.get("openRequests")))

    def summary(self) -> dict[str, Any]:
        topic = self.summary_record or {}
        tokens = topic.get("tokens") if isinstance(topic.get("tokens"), dict) else None
        cost = topic.get("costUsd")
        return {"session_id": self.session_id, "provider": self.provider, "state": self.state,
                "fleet_state": self.fleet_state, "stalled": self.stalled,
                "waiting_on_person": self.waiting_on_person,
                "last_activity": self.last_activity, "last_seq": self.last_seq,
                "records": len(self.records), "dropped": self.dropped, "turns": self.turns,
                "pending_approvals": list(self.pending_approvals.values()),
                "preview": self.preview,
                "model": topic.get("model") or self._last_model(),
                "runtime_name": topic.get("runtimeName"),
                "runtime_version": topic.get("runtimeVersion"),
                "tokens": tokens, "cost_usd": cost if isinstance(cost, int | float) else None,
                "unpriced_turns": topic.get("unpricedTurns", 0),
                "first_activity": topic.get("firstActivity"),
                "summary_state": topic.get("state")}

    def _last_model(self) -> str | None:
        for t in reversed(self.turn_times.values()):
            if t.get("model"):
                return str(t["model"])
        return None

    def timings(self) -> dict[str, Any]:
        """The turns' and tool calls' times, tokens and cost, as agents.canonical said."""
        return {"session_id": self.session_id, "turns": list(self.turn_times.values()),
                "tools": dict(self.tool_times), "stalled": self.stalled}

    def text_matches(self, needle: str) -> bool:
        """Whether `needle` (lower case) is in the session's id, runtime, model, preview
        or any record it keeps."""
        s = self.summary()
        heads = (self.session_id, self.provider, s["model"] or "", s["runtime_name"] or "",
                 self.preview)
        return (any(needle in h.lower() for h in heads)
                or any(needle in text.lower() for _, text in self.records))


def _ms(created_at: str) -> int | None:
    """Epoch milliseconds of a canonical `createdAt` (ISO 8601), or None."""
    try:
        when = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def _tool_use_id(event: Any) -> str:
    """The chat's tool_use_id for a canonical tool item: the runtime's own item id
    where the event carries one, else canonflow's (as the chat projection names it)."""
    refs = event.providerRefs
    native = getattr(refs, "providerItemId", None) if refs is not msgspec.UNSET else None
    return native if isinstance(native, str) else str(event.itemId)


def _put(book: OrderedDict[str, dict[str, Any]], key: str, limit: int) -> dict[str, Any]:
    entry = book.get(key)
    if entry is None:
        entry = book[key] = {}
        while len(book) > limit:
            book.popitem(last=False)
    return entry


def _in_state(summary: dict[str, Any], state: str) -> bool:
    """Whether a session's summary is in `state`: "waiting" (on a person) and
    "stalled" whatever else it is, other states as its chat or fleet state."""
    if state == "waiting":
        return bool(summary["waiting_on_person"])
    if state == "stalled":
        return summary["stalled"] is not None
    return state in (summary["state"], summary["fleet_state"])


def _add_shown_command(r: dict[str, Any]) -> bool:
    """Give a tool call or an approval `shown_command`, the command it runs without the
    shell wrapper around it, when there was one; whether it did."""
    t = r.get("type")
    if t == "tool_use":
        held = r.get("input")
        raw = held.get("command", held.get("cmd")) if isinstance(held, dict) else None
    elif t == "approval":
        held = raw = r.get("detail")
    else:
        return False
    command = shown_command(held) if isinstance(raw, str) else None
    if command is None or command == raw:
        return False
    r["shown_command"] = command
    return True


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Watcher:
    """One SSE subscriber: woken when its session (or, for the list, any session)
    changes. Holds no records, only what changed."""

    __slots__ = ("session_id", "wake", "dirty")

    def __init__(self, session_id: str | None):
        self.session_id = session_id
        self.wake = asyncio.Event()
        self.dirty: set[str] = set()  # list watchers: sessions changed or removed


class ChatStore:
    """A bounded, LRU-evicting view of the chat topic. Used from one event loop only."""

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 max_records: int = DEFAULT_MAX_RECORDS, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_sessions < 1 or max_records < 1 or max_bytes < 1:
            raise ValueError("the UI store's limits must be positive")
        self.max_sessions, self.max_records, self.max_bytes = max_sessions, max_records, max_bytes
        self.sessions: OrderedDict[str, SessionView] = OrderedDict()  # least recent first
        self.bytes = 0
        self.accepted = self.duplicates = self.rejected = self.evicted = 0
        self.closing = False
        # UTC day -> the tokens and cost of the turns that completed that day
        self.days: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._watchers: dict[str | None, set[Watcher]] = {}

    def add(self, value: bytes | None, timestamp_ms: int | None = None) -> bool:
        """Take one `agents.chat` record value; False when it is a duplicate (seq already
        seen: at-least-once delivery) or not a chat record (counted, never raised)."""
        try:
            if value is None:  # a tombstone: nothing to show
                raise TypeError
            text = value.decode("utf-8")
            r = json.loads(text)
            sid, seq = r["session_id"], r["seq"]
            if not (isinstance(sid, str) and isinstance(seq, int)
                    and isinstance(r.get("type"), str)):
                raise TypeError
        except (ValueError, TypeError, KeyError):
            self.rejected += 1
            return False
        s = self.sessions.get(sid)
        if s is None or (s.last_seq == 0 and not s.records):  # its first chat record
            s = self._session(sid, r.get("provider"))
            s.dropped = s.last_seq = seq - 1  # started mid-session (or after an eviction)
        elif seq <= s.last_seq:
            self.duplicates += 1
            return False
        if _add_shown_command(r) or "\n" in text or "\r" in text:  # one SSE line a record
            text = json.dumps(r)
        size = len(text) + _RECORD_OVERHEAD
        s.records.append((seq, text))
        s.bytes += size
        self.bytes += size
        s.last_seq = seq
        s.last_activity = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        s.apply(r)
        self.sessions.move_to_end(sid)
        self.accepted += 1
        self._trim(s)
        self._evict(keep=sid)
        self._notify(sid)
        return True

    def _session(self, sid: str, provider: Any) -> SessionView:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = SessionView(sid, str(provider or "?"))
        return s

    def add_summary(self, value: bytes | None, key: bytes | None = None) -> bool:
        """Take one `agents.sessions` record: the session's latest summary (a null
        value, the tombstone after its retention, forgets it). False when it is no
        summary (counted in `rejected`)."""
        if value is None:
            sid = key.decode("utf-8", "replace") if key else None
            s = self.sessions.get(sid) if sid else None
            if s is not None:
                s.summary_record = None
                self._notify(s.session_id)
            return True
        try:
            r = json.loads(value)
            sid = r["sessionId"]
            if not isinstance(sid, str) or not isinstance(r.get("lastSeq"), int):
                raise TypeError
        except (ValueError, TypeError, KeyError):
            self.rejected += 1
            return False
        s = self._session(sid, r.get("provider"))
        old = s.summary_record
        if old is not None and old.get("lastSeq", 0) > r["lastSeq"]:
            self.duplicates += 1  # an older summary read after a newer one
            return False
        s.summary_record = {k: r.get(k) for k in (
            "state", "runtimeName", "runtimeVersion", "model", "turns", "turnOpen",
            "openRequests", "tokens", "costUsd", "unpricedTurns", "firstActivity",
            "lastActivity", "lastSeq", "closedAt")}
        if s.last_activity == 0:
            s.last_activity = _ms(str(r.get("lastActivity"))) or 0
        self.sessions.move_to_end(sid)
        self._evict(keep=sid)
        self._notify(sid)
        return True

    def add_event(self, event: Any) -> bool:
        """Take one canonical event (a topics.canonical struct): turn and tool-call
        times, a turn's tokens and cost, stall notices. False when it changes nothing
        the UI keeps, or was taken before (at-least-once delivery)."""
        tag = event.__struct_config__.tag
        if tag not in _TIMED:
            return False
        s = self._session(event.sessionId, event.provider)
        if event.seq <= s.canonical_seq:
            self.duplicates += 1
            return False
        s.canonical_seq = event.seq
        at = _ms(event.createdAt)
        p = event.payload
        if tag.startswith("item.") and p.itemType not in TOOL_ITEM_TYPES:
            return False  # a message or reasoning item: the chat already shows it
        turn = event.turnId if isinstance(event.turnId, str) else None
        if tag == "turn.started" and turn:
            t = _put(s.turn_times, turn, MAX_TURNS)
            t.update(turn_id=turn, started_at=at)
            if p.model is not msgspec.UNSET:
                t["model"] = p.model
        elif tag in ("turn.completed", "turn.aborted") and turn:
            t = _put(s.turn_times, turn, MAX_TURNS)
            t.update(turn_id=turn, ended_at=at)
            duration = getattr(p, "durationMs", msgspec.UNSET)
            if (duration is msgspec.UNSET and at is not None
                    and t.get("started_at") is not None):
                duration = at - t["started_at"]
            t["duration_ms"] = None if duration is msgspec.UNSET else duration
            if tag == "turn.completed":
                t["state"] = p.state
                self._count_turn(t, p, at)
            else:
                t["state"] = "aborted"
        elif tag in ("item.started", "item.completed"):
            tool = _put(s.tool_times, _tool_use_id(event), MAX_TOOLS)
            if tag == "item.started":
                tool["started_at"] = at
            else:
                tool["ended_at"] = at
                start = tool.get("started_at")
                tool["duration_ms"] = (at - start if at is not None and start is not None
                                       else None)
        elif tag == "session.state.changed":
            if p.health == "stalled":
                s.stalled = str(p.waitingOn) if p.waitingOn is not msgspec.UNSET else "?"
            elif p.health == "recovered" or p.state in ("running", "stopped", "error"):
                s.stalled = None
        elif tag == "session.exited":
            s.stalled = None
        self.sessions.move_to_end(s.session_id)
        self._evict(keep=s.session_id)
        self._notify(s.session_id)
        return True

    def _count_turn(self, t: dict[str, Any], p: Any, at: int | None) -> None:
        if p.tokens is not msgspec.UNSET:
            t["tokens"] = msgspec.to_builtins(p.tokens)
        cost = p.cost if p.cost is not msgspec.UNSET else None
        t["cost_usd"] = cost.usd if cost is not None and cost.usd is not msgspec.UNSET else None
        t["cost_source"] = cost.source if cost is not None else None
        if cost is not None and cost.model is not msgspec.UNSET and not t.get("model"):
            t["model"] = cost.model
        if at is None:
            return
        day = self.days.get(_day(at))
        if day is None:
            day = self.days[_day(at)] = {"turns": 0, "input": 0, "output": 0, "total": 0,
                                         "cost_usd": 0.0, "unpriced_turns": 0}
            for old in sorted(self.days)[:-MAX_DAYS]:
                del self.days[old]
        day["turns"] += 1
        for k in ("input", "output", "total"):
            day[k] += (t.get("tokens") or {}).get(k, 0)
        if t["cost_usd"] is not None:
            day["cost_usd"] += t["cost_usd"]
        elif t["cost_source"] == "unpriced":
            day["unpriced_turns"] += 1

    def fleet(self, now_ms: int | None = None) -> dict[str, Any]:
        """The fleet at a glance, over the sessions kept: counts by state, runtime and
        model, the sessions waiting on a person, stalled or failed, and the tokens and
        cost of the turns that completed today (UTC, by their `createdAt`)."""
        today = _day(now_ms if now_ms is not None else int(time.time() * 1000))
        by_state: Counter[str] = Counter()
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        waiting, stalled, failed = [], [], []
        for s in self.sessions.values():
            summary = s.summary()
            state, model = summary["fleet_state"], summary["model"] or "unknown"
            by_state[state] += 1
            row = rows.setdefault((s.provider, model), {
                "runtime": s.provider, "model": model, "sessions": 0, "states": Counter(),
                "tokens": 0, "cost_usd": 0.0})
            row["sessions"] += 1
            row["states"][state] += 1
            row["tokens"] += (summary["tokens"] or {}).get("total", 0)
            row["cost_usd"] += summary["cost_usd"] or 0.0
            if s.waiting_on_person:
                waiting.append(s.session_id)
            if s.stalled is not None:
                stalled.append(s.session_id)
            if state == FAILED:
                failed.append(s.session_id)
        day = self.days.get(today) or {"turns": 0, "input": 0, "output": 0, "total": 0,
                                       "cost_usd": 0.0, "unpriced_turns": 0}
        return {"sessions": len(self.sessions), "evicted": self.evicted,
                "max_sessions": self.max_sessions, "by_state": dict(by_state),
                "by_runtime": dict(Counter(s.provider for s in self.sessions.values())),
                "by_model": dict(Counter(r["model"] for r in rows.values()
                                         for _ in range(r["sessions"]))),
                "rows": [{**r, "states": dict(r["states"])} for r in sorted(
                    rows.values(), key=lambda r: (-r["sessions"], r["runtime"], r["model"]))],
                "waiting_on_person": waiting, "stalled": stalled, "failed": failed,
                "today": {"date": today, **day}}

    def search(self, *, text: str = "", runtime: str = "", model: str = "",
               state: str = "") -> list[dict[str, Any]]:
        """The summaries of the sessions that match every filter given: `text` (any
        case) in the id, runtime, model, preview or a record kept; `runtime`, `model`,
        `state` (see _in_state) equal."""
        needle = text.strip().lower()
        out = []
        for summary in self.summaries():
            s = self.sessions[summary["session_id"]]
            if runtime and summary["provider"] != runtime:
                continue
            if model and (summary["model"] or "unknown") != model:
                continue
            if state and not _in_state(summary, state):
                continue
            if needle and not s.text_matches(needle):
                continue
            out.append(summary)
        return out

    def _trim(self, s: SessionView) -> None:
        while len(s.records) > 1 and (len(s.records) > self.max_records
                                      or s.bytes > self.max_bytes // 4):
            _, text = s.records.popleft()
            size = len(text) + _RECORD_OVERHEAD
            s.bytes -= size
            self.bytes -= size
            s.dropped += 1

    def _evict(self, keep: str) -> None:
        while len(self.sessions) > 1 and (len(self.sessions) > self.max_sessions
                                          or self.bytes > self.max_bytes):
            sid = next(iter(self.sessions))
            if sid == keep:
                break
            self.bytes -= self.sessions.pop(sid).bytes
            self.evicted += 1
            self._notify(sid)

    def _notify(self, sid: str) -> None:
        for w in self._watchers.get(sid, ()):
            w.wake.set()
        for w in self._watchers.get(None, ()):
            w.dirty.add(sid)
            w.wake.set()

    def watch(self, session_id: str | None) -> Watcher:
        """Subscribe to one session (or, with None, to the list); pair with `unwatch`."""
        w = Watcher(session_id)
        self._watchers.setdefault(session_id, set()).add(w)
        if session_id is not None and session_id in self.sessions:  # being read: keep it
            self.sessions.move_to_end(session_id)
        return w

    def unwatch(self, w: Watcher) -> None:
        group = self._watchers.get(w.session_id)
        if group is not None:
            group.discard(w)
            if not group:
                del self._watchers[w.session_id]

    def close(self) -> None:
        """Wake every subscriber so its stream ends (server shutdown)."""
        self.closing = True
        for group in self._watchers.values():
            for w in group:
                w.wake.set()

    def summaries(self) -> list[dict[str, Any]]:
        """Every session's summary, most recently active first."""
        return [s.summary() for s in sorted(self.sessions.values(),
                                            key=lambda s: s.last_activity, reverse=True)]
