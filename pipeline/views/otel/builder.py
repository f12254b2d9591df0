"""The pure half of the OpenTelemetry export: canonical events in, finished spans out
(`SpanBuilder`, `build_spans`), with no clock and no I/O, so the same events always give
the same spans."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.views.otel.handlers import HANDLERS, _Ctx, agent_for, close_session
from pipeline.views.otel.model import (
    BadEvent,
    NoEventTime,
    Span,
    _str,
    root_agent_id,
    unix_nanos,
)
from pipeline.views.otel.state import _Agent, _Session, _Turn


class SpanBuilder:
    """Turns a stream of canonical events into finished spans, session by session.

    State is explicit and bounded: a turn is forgotten when its turn.completed arrives,
    a tool item when its item.completed does, a subagent when its spawning tool has
    ended (and its own turns, where it has any), a session on session.exited, and the
    least recently active session when more than `max_sessions` are open. Events of one
    session must come in order (they do: one session is one partition).
    """

    def __init__(self, *, capture_content: bool = False, max_sessions: int = 100_000):
        self.capture_content = capture_content
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[str, _Session] = OrderedDict()

    # -- entry points

    def feed(self, event: Mapping[str, Any], record_ms: int | None = None) -> list[Span]:
        """Apply one canonical event (decoded JSON); returns the spans it finished.

        `record_ms` is the timestamp of the Kafka record that carried the event: its
        time when `createdAt` is the epoch (input replayed without capture times).
        Raises BadEvent when the event lacks type, sessionId or a valid createdAt, and
        NoEventTime when its createdAt is the epoch and there is no `record_ms`.
        """
        if not isinstance(event, Mapping):
            raise BadEvent(f"an event is a JSON object, not {type(event).__name__}")
        etype, sid = _str(event.get("type")), _str(event.get("sessionId"))
        if etype is None or sid is None:
            raise BadEvent("an event needs a type and a sessionId")
        now = unix_nanos(event.get("createdAt"))  # type: ignore[arg-type]
        if now <= 0:
            if not record_ms or record_ms <= 0:
                raise NoEventTime(
                    f"event {event.get('seq', '?')} of session {sid} has createdAt "
                    f"{event.get('createdAt')} (its input had no capture times)")
            now = record_ms * 1_000_000
        payload = event.get("payload")
        payload = payload if isinstance(payload, Mapping) else {}
        session = self._session(sid, _str(event.get("provider")) or "unknown")
        out: list[Span] = []
        agent_id = self._subagent(session, etype, event)
        turn_id = _str(event.get("turnId"))
        if turn_id in session.done:
            return out
        turn: _Turn | None = None
        agent: _Agent | None = None
        if agent_id is not None:
            agent = agent_for(session, sid, agent_id, event, now)
            if turn_id in session.turns:  # a subagent inside its parent's turn (Claude)
                session.turns[turn_id].last_ns = max(session.turns[turn_id].last_ns, now)
        elif turn_id:
            turn = self._turn(session, turn_id, now, event)
        c = _Ctx(session, sid, turn, agent_id, agent, event, payload, now, out,
                 self.capture_content)
        if etype == "session.exited":
            close_session(c)
            self.sessions.pop(sid, None)
        elif etype in HANDLERS:
            HANDLERS[etype](c)
        return out

    def close(self) -> list[Span]:
        """Finish every open span (marked `canonflow.incomplete`) and forget all state:
        for the end of a finite input, where no more events can come."""
        out: list[Span] = []
        for sid, session in list(self.sessions.items()):
            close_session(_Ctx(session, sid, None, None, None, {}, {}, 0, out,
                               self.capture_content))
        self.sessions.clear()
        return out

    # -- state

    def _session(self, sid: str, provider: str) -> _Session:
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = _Session(provider, root_agent_id(sid))
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
        else:
            self.sessions.move_to_end(sid)
        return session

    @staticmethod
    def _subagent(session: _Session, etype: str, event: Mapping[str, Any]) -> str | None:
        """The subagent the event belongs to (None: the root agent, whose id
        session.started carries)."""
        agent_id = _str(event.get("agentId"))
        if etype == "session.started" and agent_id:
            session.root_agent = agent_id
            return None
        return None if agent_id == session.root_agent else agent_id

    @staticmethod
    def _turn(session: _Session, turn_id: str, now: int, event: Mapping[str, Any]) -> _Turn:
        turn = session.turns.get(turn_id)
        if turn is None:
            turn = session.turns[turn_id] = _Turn(turn_id, now)
            turn.model = session.model
        turn.last_ns = max(turn.last_ns, now)
        turn.thread_id = turn.thread_id or _str(event.get("threadId"))
        return turn


def build_spans(events: Iterable[Mapping[str, Any]], *, capture_content: bool = False,
                close: bool = True) -> list[Span]:
    """The spans of a finite sequence of canonical events (pure, deterministic).

    With `close`, spans still open at the end are finished too (`canonflow.incomplete`).
    Raises BadEvent for an event without type, sessionId or a valid createdAt.
    """
    builder = SpanBuilder(capture_content=capture_content)
    out: list[Span] = []
    for event in events:
        out += builder.feed(event)
    if close:
        out += builder.close()
    return out
