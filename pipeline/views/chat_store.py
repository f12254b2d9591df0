"""The chat UI's store: a bounded in-memory view of the sessions of `agents.chat`, and
the cursors its Server-Sent-Event subscribers read it with (pipeline.views.ui serves it).

Memory is bounded: at most `max_records` records per session (oldest dropped
first; the page says how many were dropped), a session also trims itself to a
quarter of the byte budget, and beyond `max_sessions` sessions or `max_bytes` in
all, the least recently active session is evicted. SSE subscribers hold no queue,
only a cursor (the next seq to send) into that store, so a slow browser cannot
grow memory; records dropped before it read them are reported as a gap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict, deque
from typing import Any

from pipeline.views.render import shown_command

DEFAULT_MAX_SESSIONS = 200
DEFAULT_MAX_RECORDS = 5000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

#: Session states, as /api/sessions reports them.
WORKING, WAITING_APPROVAL, WAITING_ANSWER, DONE, FAILED = (
    "working", "waiting_approval", "waiting_answer", "done", "failed")

_RECORD_OVERHEAD = 96  # rough bytes per stored record beyond its JSON text


class SessionView:
    """What the UI knows about one session: its newest records and derived state."""

    __slots__ = ("session_id", "provider", "records", "bytes", "last_seq", "dropped", "phase",
                 "pending_approvals", "pending_questions", "turns", "last_activity", "preview")

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

    def summary(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "provider": self.provider, "state": self.state,
                "last_activity": self.last_activity, "last_seq": self.last_seq,
                "records": len(self.records), "dropped": self.dropped, "turns": self.turns,
                "pending_approvals": list(self.pending_approvals.values()),
                "preview": self.preview}


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
        if s is None:
            s = self.sessions[sid] = SessionView(sid, str(r.get("provider") or "?"))
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
