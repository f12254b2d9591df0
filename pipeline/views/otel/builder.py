"""The pure half of the OpenTelemetry export: canonical events in, finished spans out
(`SpanBuilder`, `build_spans`), with no clock and no I/O, so the same events always give
the same spans."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.views.otel.model import (
    DONE_TURNS_KEPT,
    EXTENSION_ITEM_TYPES,
    KIND_CLIENT,
    KIND_INTERNAL,
    MAX_CONTENT_CHARS,
    STATUS_ERROR,
    STATUS_UNSET,
    AttrValue,
    BadEvent,
    NoEventTime,
    Span,
    SpanEvent,
    _content,
    _single_key,
    _str,
    item_span_id,
    provider_name,
    trace_id_for,
    turn_span_id,
    turn_tokens,
    unix_nanos,
)
from topics.canonical import TOOL_ITEM_TYPES


class _Tool:
    __slots__ = ("item_id", "turn_id", "span_id", "parent_id", "start_ns", "events",
                 "started")

    def __init__(self, item_id: str, turn_id: str | None, span_id: bytes, parent_id: bytes,
                 start_ns: int, started: dict[str, Any]):
        self.item_id, self.turn_id, self.span_id = item_id, turn_id, span_id
        self.parent_id, self.start_ns, self.started = parent_id, start_ns, started
        self.events: list[SpanEvent] = []


class _Turn:
    __slots__ = ("turn_id", "thread_id", "start_ns", "last_ns", "model", "rerouted",
                 "error_class", "abort_reason", "events", "requests")

    def __init__(self, turn_id: str, start_ns: int):
        self.turn_id, self.start_ns, self.last_ns = turn_id, start_ns, start_ns
        self.thread_id: str | None = None
        self.model: str | None = None
        self.rerouted: str | None = None
        self.error_class: str | None = None
        self.abort_reason: str | None = None
        self.events: list[SpanEvent] = []
        self.requests: dict[str, int] = {}  # open request id -> opened at (ns)


class _Session:
    __slots__ = ("provider", "model_provider", "model", "turns", "tools", "done")

    def __init__(self, provider: str):
        self.provider = provider
        self.model_provider: str | None = None
        self.model: str | None = None
        self.turns: dict[str, _Turn] = {}
        self.tools: dict[str, _Tool] = {}
        #: Recently completed turns: a late event of one must not reopen it (its span
        #: is out already, and a second span with the same id would follow).
        self.done: dict[str, None] = {}

    def finish(self, turn_id: str) -> None:
        self.turns.pop(turn_id, None)
        self.done[turn_id] = None
        if len(self.done) > DONE_TURNS_KEPT:
            del self.done[next(iter(self.done))]


class SpanBuilder:
    """Turns a stream of canonical events into finished spans, session by session.

    State is explicit and bounded: a turn is forgotten when its turn.completed arrives,
    a tool item when its item.completed does, a session on session.exited, and the
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
        handler = _HANDLERS.get(etype)
        out: list[Span] = []
        turn_id = _str(event.get("turnId"))
        if turn_id in session.done:
            return out
        turn = self._turn(session, sid, turn_id, now, event) if turn_id else None
        if handler is not None:
            handler(_Ctx(self, session, sid, turn, event, payload, now, out))
        return out

    def close(self) -> list[Span]:
        """Finish every open span (marked `canonflow.incomplete`) and forget all state:
        for the end of a finite input, where no more events can come."""
        out: list[Span] = []
        for sid, session in list(self.sessions.items()):
            self._close_session(session, sid, out)
        self.sessions.clear()
        return out

    # -- state

    def _session(self, sid: str, provider: str) -> _Session:
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = _Session(provider)
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
        else:
            self.sessions.move_to_end(sid)
        return session

    def _turn(self, session: _Session, sid: str, turn_id: str, now: int,
              event: Mapping[str, Any]) -> _Turn:
        turn = session.turns.get(turn_id)
        if turn is None:
            turn = session.turns[turn_id] = _Turn(turn_id, now)
            turn.model = session.model
        turn.last_ns = max(turn.last_ns, now)
        turn.thread_id = turn.thread_id or _str(event.get("threadId"))
        return turn

    # -- spans

    def _turn_span(self, session: _Session, sid: str, turn: _Turn, end_ns: int,
                   completed: Mapping[str, Any] | None) -> Span:
        p = completed or {}
        state = _str(p.get("state"))
        model = turn.model
        vendor = provider_name(session.provider, model, session.model_provider)
        attrs: list[tuple[str, AttrValue]] = [
            ("gen_ai.operation.name", "invoke_agent"),
            ("gen_ai.provider.name", vendor),
            ("gen_ai.agent.name", session.provider),
            ("gen_ai.conversation.id", sid),
        ]
        if model:
            attrs.append(("gen_ai.request.model", model))
        response_model = turn.rerouted or _single_key(p.get("modelUsage")) or model
        if response_model:
            attrs.append(("gen_ai.response.model", response_model))
        stop = _str(p.get("stopReason"))
        if stop:
            attrs.append(("gen_ai.response.finish_reasons", (stop,)))
        tokens = turn_tokens(p)
        if tokens is not None:
            attrs += [("gen_ai.usage.input_tokens", tokens.input),
                      ("gen_ai.usage.output_tokens", tokens.output),
                      ("gen_ai.usage.cache_read.input_tokens", tokens.cachedInput),
                      ("gen_ai.usage.cache_creation.input_tokens", tokens.cacheWrite)]
        status, message = STATUS_UNSET, ""
        if state == "failed":
            status = STATUS_ERROR
            message = _str(p.get("errorMessage")) or "turn failed"
            attrs.append(("error.type", turn.error_class or "_OTHER"))
        attrs.append(("canonflow.provider", session.provider))
        if turn.thread_id:
            attrs.append(("canonflow.thread.id", turn.thread_id))
        attrs.append(("canonflow.turn.id", turn.turn_id))
        attrs.append(("canonflow.turn.state", state or "incomplete"))
        cost = p.get("cost")
        if isinstance(cost, Mapping):
            usd = cost.get("usd")
            if isinstance(usd, (int, float)) and not isinstance(usd, bool):
                attrs.append(("canonflow.turn.cost_usd", float(usd)))
            if isinstance(cost.get("source"), str):
                attrs.append(("canonflow.turn.cost_source", cost["source"]))
        if turn.abort_reason:
            attrs.append(("canonflow.turn.abort_reason", turn.abort_reason))
        if completed is None:
            attrs.append(("canonflow.incomplete", True))
        return Span(trace_id=trace_id_for(sid, turn.turn_id),
                    span_id=turn_span_id(sid, turn.turn_id),
                    name=f"invoke_agent {session.provider}", kind=KIND_CLIENT,
                    start_ns=turn.start_ns, end_ns=max(end_ns, turn.start_ns),
                    attributes=tuple(attrs), events=tuple(turn.events),
                    status_code=status, status_message=message)

    def _tool_span(self, session: _Session, sid: str, tool: _Tool, end_ns: int,
                   completed: Mapping[str, Any] | None, event: Mapping[str, Any] | None
                   ) -> Span:
        p: Mapping[str, Any] = {**tool.started, **(completed or {})}
        item_type = _str(p.get("itemType")) or "unknown"
        name = _str(p.get("toolName")) or item_type
        refs = (event or {}).get("providerRefs")
        call_id = _str(refs.get("providerItemId")) if isinstance(refs, Mapping) else None
        attrs: list[tuple[str, AttrValue]] = [
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", name),
            ("gen_ai.tool.call.id", call_id or tool.item_id),
            ("gen_ai.tool.type",
             "extension" if item_type in EXTENSION_ITEM_TYPES else "function"),
            ("gen_ai.conversation.id", sid),
        ]
        if self.capture_content:
            if "input" in p:
                attrs.append(("gen_ai.tool.call.arguments", _content(p["input"])))
            if "output" in p:
                attrs.append(("gen_ai.tool.call.result", _content(p["output"])))
        exit_code = p.get("exitCode")
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            attrs.append(("process.exit.code", exit_code))
        status_str = _str(p.get("status"))
        status, message = STATUS_UNSET, ""
        if status_str == "declined":
            status, message = STATUS_ERROR, "declined"
            attrs.append(("error.type", "declined"))
        elif p.get("isError") is True or status_str == "failed":
            status, message = STATUS_ERROR, "tool error"
            attrs.append(("error.type", "tool_error"))
        attrs += [("canonflow.provider", session.provider),
                  ("canonflow.item.id", tool.item_id), ("canonflow.item.type", item_type)]
        if status_str:
            attrs.append(("canonflow.item.status", status_str))
        if tool.turn_id:
            attrs.append(("canonflow.turn.id", tool.turn_id))
        if completed is None:
            attrs.append(("canonflow.incomplete", True))
        return Span(trace_id=trace_id_for(sid, tool.turn_id), span_id=tool.span_id,
                    parent_span_id=tool.parent_id, name=f"execute_tool {name}",
                    kind=KIND_INTERNAL, start_ns=tool.start_ns,
                    end_ns=max(end_ns, tool.start_ns), attributes=tuple(attrs),
                    events=tuple(tool.events), status_code=status, status_message=message)

    def _close_turn(self, session: _Session, sid: str, turn: _Turn, end_ns: int,
                    completed: Mapping[str, Any] | None, out: list[Span]) -> None:
        for item_id, tool in list(session.tools.items()):
            if tool.turn_id == turn.turn_id:
                out.append(self._tool_span(session, sid, tool, end_ns, None, None))
                del session.tools[item_id]
        out.append(self._turn_span(session, sid, turn, end_ns, completed))
        session.finish(turn.turn_id)

    def _close_session(self, session: _Session, sid: str, out: list[Span]) -> None:
        for turn in list(session.turns.values()):
            self._close_turn(session, sid, turn, turn.last_ns, None, out)
        for tool in session.tools.values():
            out.append(self._tool_span(session, sid, tool, tool.start_ns, None, None))
        session.tools.clear()

    def _event_target(self, session: _Session, turn: _Turn | None,
                      item_id: str | None) -> list[SpanEvent] | None:
        tool = session.tools.get(item_id) if item_id else None
        if tool is not None:
            return tool.events
        return turn.events if turn is not None else None


# ---- handlers, one per canonical event type that matters -------------------------


class _Ctx:
    """What a handler sees: the builder, the event's session (and turn, if it has one),
    the event, its payload and time, and the list finished spans go to."""

    __slots__ = ("b", "s", "sid", "turn", "e", "p", "now", "out")

    def __init__(self, b: SpanBuilder, s: _Session, sid: str, turn: _Turn | None,
                 e: Mapping[str, Any], p: Mapping[str, Any], now: int, out: list[Span]):
        self.b, self.s, self.sid, self.turn = b, s, sid, turn
        self.e, self.p, self.now, self.out = e, p, now, out


def _on_session_configured(c: _Ctx) -> None:
    config = c.p.get("config")
    if isinstance(config, Mapping):  # keep two strings, not the (large) config
        c.s.model_provider = _str(config.get("modelProvider")) or c.s.model_provider
        c.s.model = _str(config.get("model")) or c.s.model


def _on_session_exited(c: _Ctx) -> None:
    c.b._close_session(c.s, c.sid, c.out)
    c.b.sessions.pop(c.sid, None)


def _on_turn_started(c: _Ctx) -> None:
    if c.turn is not None:
        c.turn.start_ns = min(c.turn.start_ns, c.now)
        c.turn.model = _str(c.p.get("model")) or c.turn.model


def _on_turn_completed(c: _Ctx) -> None:
    if c.turn is not None:
        c.b._close_turn(c.s, c.sid, c.turn, c.now, c.p, c.out)


def _on_turn_aborted(c: _Ctx) -> None:
    if c.turn is not None:
        c.turn.abort_reason = _str(c.p.get("reason")) or "aborted"


def _on_model_rerouted(c: _Ctx) -> None:
    if c.turn is not None:
        c.turn.rerouted = _str(c.p.get("toModel")) or c.turn.rerouted


def _on_item_started(c: _Ctx) -> None:
    item_id = _str(c.e.get("itemId"))
    if item_id is None or c.p.get("itemType") not in TOOL_ITEM_TYPES or item_id in c.s.tools:
        return
    c.s.tools[item_id] = _new_tool(c, item_id, dict(c.p))


def _on_item_completed(c: _Ctx) -> None:
    item_id = _str(c.e.get("itemId"))
    if item_id is None or c.p.get("itemType") not in TOOL_ITEM_TYPES:
        return
    tool = c.s.tools.pop(item_id, None) or _new_tool(c, item_id, {})
    c.out.append(c.b._tool_span(c.s, c.sid, tool, c.now, c.p, c.e))


def _new_tool(c: _Ctx, item_id: str, started: dict[str, Any]) -> _Tool:
    turn_id = c.turn.turn_id if c.turn is not None else None
    parent_item = c.s.tools.get(_str(c.e.get("parentItemId")) or "")
    if parent_item is not None and parent_item.turn_id == turn_id:
        parent = parent_item.span_id  # a subagent's tool under its Task call
    else:
        parent = turn_span_id(c.sid, turn_id) if turn_id else b""
    return _Tool(item_id, turn_id, item_span_id(c.sid, item_id), parent, c.now, started)


def _on_request(c: _Ctx) -> None:
    """request.opened / request.resolved: an event on the tool span the request gates
    (when it names an open tool item), else on the turn span."""
    target = c.b._event_target(c.s, c.turn, _str(c.e.get("itemId")))
    if target is None:
        return
    request_id, opened = _str(c.e.get("requestId")), c.e.get("type") == "request.opened"
    attrs: list[tuple[str, AttrValue]] = [
        ("canonflow.request.type", _str(c.p.get("requestType")) or "unknown")]
    if _str(c.p.get("decision")):
        attrs.append(("canonflow.request.decision", c.p["decision"]))  # the runtime's word
    if _str(c.p.get("outcome")):
        attrs.append(("canonflow.request.outcome", c.p["outcome"]))  # the shared one
    if _str(c.p.get("toolName")):
        attrs.append(("gen_ai.tool.name", c.p["toolName"]))
    if request_id:
        attrs.append(("canonflow.request.id", request_id))
        if c.turn is not None and opened:
            c.turn.requests[request_id] = c.now
        elif c.turn is not None and request_id in c.turn.requests:
            waited = c.now - c.turn.requests.pop(request_id)
            attrs.append(("canonflow.request.wait_ms", waited // 1_000_000))
    target.append(SpanEvent(name=str(c.e["type"]), time_ns=c.now, attributes=tuple(attrs)))


def _on_runtime_error(c: _Ctx) -> None:
    if c.turn is None:
        return
    error_class = _str(c.p.get("class")) or "_OTHER"
    if c.p.get("willRetry") is not True:
        c.turn.error_class = error_class  # the error a failed turn ends with
    attrs: list[tuple[str, AttrValue]] = [("error.type", error_class)]
    if _str(c.p.get("message")):
        attrs.append(("exception.message", c.p["message"][:MAX_CONTENT_CHARS]))
    if isinstance(c.p.get("willRetry"), bool):
        attrs.append(("canonflow.error.will_retry", c.p["willRetry"]))
    c.turn.events.append(SpanEvent(name="runtime.error", time_ns=c.now,
                                   attributes=tuple(attrs)))


_HANDLERS = {
    "session.configured": _on_session_configured,
    "session.exited": _on_session_exited,
    "turn.started": _on_turn_started,
    "turn.completed": _on_turn_completed,
    "turn.aborted": _on_turn_aborted,
    "model.rerouted": _on_model_rerouted,
    "item.started": _on_item_started,
    "item.completed": _on_item_completed,
    "request.opened": _on_request,
    "request.resolved": _on_request,
    "runtime.error": _on_runtime_error,
}


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
