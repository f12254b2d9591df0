"""Canonical events -> OpenTelemetry spans (GenAI semantic conventions), exported over OTLP.

`canonflow otel-export` reads canonical events (from `agents.canonical`, or from a JSONL
file such as `canonflow replay` output) and sends one trace per turn to an OTLP/HTTP
endpoint (protobuf, POST /v1/traces):

    invoke_agent <provider>        one span per turn (turn.started .. turn.completed)
      └─ execute_tool <toolName>   one span per tool item (item.started .. item.completed)

Attributes follow the GenAI conventions (gen_ai.operation.name, gen_ai.provider.name,
gen_ai.conversation.id = session id, gen_ai.request/response.model, gen_ai.usage.*,
gen_ai.tool.name/.call.id/.type, error.type); canonflow's own ids ride in `canonflow.*`.
Approvals (request.opened / request.resolved) and runtime errors become span events.

Two halves:
* `SpanBuilder` / `build_spans`: pure. Events in, spans out; no clock, no I/O. Trace and
  span ids are hashes of canonical ids (trace = session + turn, turn span = session +
  turn, tool span = session + item) and times come from `createdAt`, so the same
  events always give byte-identical spans, and a re-export after a crash gives the same
  ids (backends keyed by span id see duplicates, not new spans). An event replayed
  from input without capture times has `createdAt` at the epoch: its record's
  timestamp is used when it came from the topic, and a file of such events is refused
  (`NoEventTime`) rather than exported as spans of 1970.
* `export_events` and the `otel_export` click command: the I/O. Batches spans, hands
  them to the official OTLP/HTTP exporter of the OpenTelemetry SDK (so the standard
  OTEL_EXPORTER_OTLP_* settings work), logs and skips a bad event instead of stopping.

Token usage is the turn.completed `tokens` (topics.usage.TokenUsage: each adapter applies
its runtime's rule once), whose `input` already includes cached input, as the OTel rule
for gen_ai.usage.input_tokens asks; the runtime's own `usage` is never read here.

Heavy imports (the OpenTelemetry SDK, aiokafka) happen inside the functions that use them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import click
import msgspec

from topics.canonical import TOOL_ITEM_TYPES
from topics.runtimes import RUNTIMES
from topics.usage import TokenUsage

log = logging.getLogger("canonflow.otel")

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
TRACES_PATH = "/v1/traces"
SCOPE_NAME = "canonflow.otel"
#: The semantic conventions the attributes follow: 1.41.0 is the last release of
#: opentelemetry/semantic-conventions that held the GenAI conventions (with
#: gen_ai.provider.name and the cache token counts; gen_ai.system is gone).
SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"

# OTLP enums (opentelemetry/proto/trace/v1/trace.proto), so the pure half needs no protobuf.
KIND_INTERNAL, KIND_CLIENT = 1, 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2

#: gen_ai.provider.name for a runtime whose model vendor is fixed (well-known values
#: MUST be used when one applies: its registry entry's `vendor`); other runtimes (ACP,
#: Amp, OpenCode) name the provider in the model ("anthropic/claude-haiku-4-5") or by
#: the model's family (MODEL_FAMILIES).
PROVIDER_NAMES = {r.id: r.vendor for r in RUNTIMES if r.vendor is not None}
#: A `provider/model` prefix as models.dev and OpenCode spell it -> the well-known
#: gen_ai.provider.name value; a prefix not listed is used as it is.
PROVIDER_PREFIXES = {
    "google": "gcp.gemini", "google-vertex": "gcp.vertex_ai", "vertex": "gcp.vertex_ai",
    "xai": "x_ai", "mistral": "mistral_ai", "amazon-bedrock": "aws.bedrock",
    "bedrock": "aws.bedrock", "azure": "azure.ai.openai",
}
#: The start of a bare model name -> its vendor, for a model without a prefix.
MODEL_FAMILIES = (
    ("claude", "anthropic"), ("gpt", "openai"), ("o1", "openai"), ("o3", "openai"),
    ("o4", "openai"), ("codex", "openai"), ("gemini", "gcp.gemini"), ("grok", "x_ai"),
    ("mistral", "mistral_ai"), ("codestral", "mistral_ai"), ("devstral", "mistral_ai"),
    ("deepseek", "deepseek"), ("command", "cohere"), ("sonar", "perplexity"),
)
#: gen_ai.provider.name when nothing names the provider (the conventions' value).
OTHER_PROVIDER = "_OTHER"
#: gen_ai.tool.type: `extension` for tools the agent calls out to, `function` otherwise.
EXTENSION_ITEM_TYPES = frozenset({"mcp_tool_call", "web_search"})
#: Cap on a content attribute (tool arguments / result) when content capture is on.
MAX_CONTENT_CHARS = 16 * 1024
#: Completed turn ids remembered per session (late events of those are ignored).
DONE_TURNS_KEPT = 16

AttrValue = str | bool | int | float | tuple[str, ...]


class BadEvent(ValueError):
    """An event without the envelope a span needs (type, sessionId, createdAt)."""


class NoEventTime(ValueError):
    """An event whose `createdAt` is the epoch (its input had no capture times) and no
    record timestamp to use instead: spans dated 1970 would be wrong, so none are made."""


class SpanEvent(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    time_ns: int
    attributes: tuple[tuple[str, AttrValue], ...] = ()


class Span(msgspec.Struct, frozen=True, kw_only=True):
    """One finished span, protobuf-free (see `encode_request` for the wire form)."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes = b""
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: tuple[tuple[str, AttrValue], ...] = ()
    events: tuple[SpanEvent, ...] = ()
    status_code: int = STATUS_UNSET
    status_message: str = ""

    def attrs(self) -> dict[str, AttrValue]:
        return dict(self.attributes)


# ---- ids, times, usage ----------------------------------------------------------


def _hash_id(size: int, *parts: str) -> bytes:
    digest = hashlib.sha256("\x1f".join(("canonflow", *parts)).encode()).digest()[:size]
    return digest if any(digest) else digest[:-1] + b"\x01"  # all-zero ids are invalid


def trace_id_for(session_id: str, turn_id: str | None) -> bytes:
    """16-byte trace id of a turn (or of a session's turn-less items)."""
    return _hash_id(16, "trace", session_id, turn_id or "")


def turn_span_id(session_id: str, turn_id: str) -> bytes:
    return _hash_id(8, "turn", session_id, turn_id)


def item_span_id(session_id: str, item_id: str) -> bytes:
    return _hash_id(8, "item", session_id, item_id)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def unix_nanos(created_at: str) -> int:
    """Nanoseconds since the epoch of an ISO-8601 time; naive times are UTC.

    Raises BadEvent when it is not such a time.
    """
    try:
        dt = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        raise BadEvent(f"createdAt is not an ISO-8601 time: {created_at!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    d = dt - _EPOCH
    return (d.days * 86400 + d.seconds) * 10**9 + d.microseconds * 1000


def turn_tokens(completed: Mapping[str, Any]) -> TokenUsage | None:
    """The `tokens` of a turn.completed payload, None when it has none or they are not a
    TokenUsage (a bad field costs the span its token counts, not the span)."""
    value = completed.get("tokens")
    if not isinstance(value, Mapping):
        return None
    try:
        return msgspec.convert(value, TokenUsage)
    except msgspec.ValidationError:
        return None


def provider_name(provider: str, model: str | None, configured: str | None = None) -> str:
    """gen_ai.provider.name, the model's provider (never the agent runtime's id): the
    configured model provider (Codex's `modelProvider`), the runtime's vendor, the
    prefix of a `vendor/model` name, the family of a bare model name, else `_OTHER`."""
    if configured:
        return configured
    if provider in PROVIDER_NAMES:
        return PROVIDER_NAMES[provider]
    if model and "/" in model:
        prefix = model.split("/", 1)[0].lower()
        return PROVIDER_PREFIXES.get(prefix, prefix)
    name = (model or "").lower()
    for family, vendor in MODEL_FAMILIES:
        if name.startswith(family):
            return vendor
    return OTHER_PROVIDER


# ---- the pure builder -------------------------------------------------------------


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


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _content(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return s[:MAX_CONTENT_CHARS]


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


def _single_key(v: Any) -> str | None:
    return next(iter(v)) if isinstance(v, Mapping) and len(v) == 1 else None


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


# ---- the wire form: the OpenTelemetry SDK's spans, its encoder and exporter ----------


def resource_attributes(env: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """service.name (OTEL_SERVICE_NAME, default canonflow) and OTEL_RESOURCE_ATTRIBUTES."""
    env = os.environ if env is None else env
    attrs: dict[str, str] = {}
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            attrs[key.strip()] = unquote(value.strip())
    attrs["service.name"] = (env.get("OTEL_SERVICE_NAME") or attrs.get("service.name")
                             or "canonflow")
    return tuple(sorted(attrs.items()))


@functools.cache
def _scope_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("canonflow")
    except PackageNotFoundError:
        return "0"


def readable_spans(spans: Iterable[Span], resource: Iterable[tuple[str, AttrValue]] = (
        ("service.name", "canonflow"),)) -> list[Any]:
    """`spans` as the SDK's ReadableSpans (what its OTLP exporter sends), under one
    resource and the canonflow.otel scope, both with SCHEMA_URL."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    res = Resource(dict(resource), schema_url=SCHEMA_URL)
    scope = InstrumentationScope(SCOPE_NAME, _scope_version(), schema_url=SCHEMA_URL)
    kinds = {KIND_INTERNAL: SpanKind.INTERNAL, KIND_CLIENT: SpanKind.CLIENT}
    codes = {STATUS_UNSET: StatusCode.UNSET, STATUS_OK: StatusCode.OK,
             STATUS_ERROR: StatusCode.ERROR}
    flags = TraceFlags(TraceFlags.SAMPLED)

    def context(trace_id: bytes, span_id: bytes) -> SpanContext:
        return SpanContext(int.from_bytes(trace_id), int.from_bytes(span_id),
                           is_remote=False, trace_flags=flags)

    out = []
    for s in spans:
        code = codes[s.status_code]
        out.append(ReadableSpan(
            name=s.name, context=context(s.trace_id, s.span_id),
            parent=context(s.trace_id, s.parent_span_id) if s.parent_span_id else None,
            resource=res, attributes=dict(s.attributes), kind=kinds[s.kind],
            events=[Event(e.name, dict(e.attributes), e.time_ns) for e in s.events],
            status=Status(code, s.status_message if code is StatusCode.ERROR else None),
            start_time=s.start_ns, end_time=s.end_ns, instrumentation_scope=scope))
    return out


def encode_request(spans: Iterable[Span], resource: Iterable[tuple[str, AttrValue]] = (
        ("service.name", "canonflow"),)) -> bytes:
    """The OTLP ExportTraceServiceRequest carrying `spans`, as the exporter encodes it."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(readable_spans(spans, resource)).SerializeToString(deterministic=True)


def traces_url(endpoint: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Where spans go: --endpoint (a base URL), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    (used as is), else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL), else 127.0.0.1:4318.
    /v1/traces is appended to a base URL that does not already end with it.

    Raises ValueError when the result is not an http(s) URL with a host (the exporter
    would retry such a URL until its timeout instead of saying it is wrong).
    """
    from urllib.parse import urlsplit

    env = os.environ if env is None else env
    if not endpoint and env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        url = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    else:
        base = (endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
                ).rstrip("/")
        url = base if base.endswith(TRACES_PATH) else base + TRACES_PATH
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise ValueError(f"OTLP endpoint {url!r}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"OTLP endpoint {url!r} is not an http:// or https:// URL "
                         "with a host")
    return url


class Exporter:
    """Sends span batches through the official OTLP/HTTP span exporter
    (opentelemetry-exporter-otlp-proto-http), so every OTEL_EXPORTER_OTLP_* setting
    works as it does for any OpenTelemetry SDK: headers, certificate and client key,
    timeout (seconds), compression. The SDK exporter retries 429/502/503/504 and
    connection errors with exponential backoff until the timeout runs out.

    `export` never raises for a network or HTTP failure: it logs, counts the spans as
    dropped and returns False, so the exporter goes on with the next batch. The SDK
    exporter blocks, so it runs in a thread.
    """

    def __init__(self, url: str,
                 resource: Iterable[tuple[str, AttrValue]] = (("service.name", "canonflow"),)):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.url, self.resource = url, tuple(resource)
        self.exported = self.dropped = 0
        self._sdk = OTLPSpanExporter(endpoint=url)

    async def __aenter__(self) -> Exporter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._sdk.shutdown()

    async def export(self, spans: list[Span]) -> bool:
        import asyncio

        from opentelemetry.sdk.trace.export import SpanExportResult

        if not spans:
            return True
        batch = readable_spans(spans, self.resource)
        result = await asyncio.to_thread(self._sdk.export, batch)
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            return True
        log.error("otel-export: dropped %d span(s) for %s", len(spans), self.url)
        self.dropped += len(spans)
        return False


class Stats(msgspec.Struct, kw_only=True):
    events: int = 0
    bad_events: int = 0
    spans: int = 0


#: One value to export: an encoded canonical event and the timestamp (ms) of the record
#: that carried it (None from a file), or None: a tick, nothing new, a chance to flush.
Value = tuple[bytes, int | None] | None


async def export_events(values: AsyncIterator[Value], exporter: Exporter,
                        builder: SpanBuilder, *, batch_size: int = 512,
                        flush_interval: float = 1.0, close_at_end: bool = False,
                        session: str | None = None) -> Stats:
    """Feed encoded canonical events through `builder` and export the spans in batches
    of up to `batch_size`, at least every `flush_interval` seconds. A value that is not
    a valid event is logged, counted and skipped. With `close_at_end`, spans still open
    when `values` ends are finished and exported too (for a file, which cannot continue).

    Raises NoEventTime at the first event without a time of its own or of its record.
    """
    import time

    decoder = msgspec.json.Decoder()
    stats, pending = Stats(), []
    last_flush = time.monotonic()
    async for item in values:
        if item is not None:
            value, record_ms = item
            stats.events += 1
            try:
                event = decoder.decode(value)
                if session is None or (isinstance(event, dict)
                                       and event.get("sessionId") == session):
                    pending += builder.feed(event, record_ms)
            except NoEventTime:
                raise
            except Exception as e:  # noqa: BLE001 - a bad event must never stop the export
                stats.bad_events += 1
                log.warning("otel-export: skipped a bad event (%s): %.200r", e, value)
        if len(pending) >= batch_size or (
                pending and time.monotonic() - last_flush >= flush_interval):
            stats.spans += len(pending)
            await exporter.export(pending)
            pending, last_flush = [], time.monotonic()
    if close_at_end:
        pending += builder.close()
    for i in range(0, len(pending), batch_size):
        await exporter.export(pending[i:i + batch_size])
    stats.spans += len(pending)
    return stats


async def file_values(path: str) -> AsyncIterator[Value]:
    """The non-blank lines of a JSONL file ("-" = stdin), without record times."""
    import sys

    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        for line in stream:
            if line.strip():
                yield line, None
    finally:
        if path != "-":
            stream.close()


async def topic_values(settings: Any, *, from_beginning: bool, idle_timeout: float | None,
                       stop: Any) -> AsyncIterator[Value]:
    """Values of agents.canonical (per-partition order) with their record timestamps,
    a None after each empty poll;
    ends when `stop` (an asyncio.Event) is set or nothing came for `idle_timeout` s."""
    import time

    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs
    from topics.catalog import CANONICAL_TOPIC

    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, **kafka_client_kwargs(settings),
                                group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest" if from_beginning else "latest")
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()
        raise
    last = time.monotonic()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for tp in sorted(batch, key=lambda tp: tp.partition):
                for rec in batch[tp]:
                    last = time.monotonic()
                    if rec.value is not None:
                        yield rec.value, rec.timestamp
            yield None
            if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                return
    finally:
        await consumer.stop()


def _url(value: str | None) -> str | None:
    """--endpoint checked when the command line is parsed (a usage error, no retries),
    by the rule the exporter uses (traces_url)."""
    if value:
        try:
            traces_url(value, env={})
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--endpoint") from None
    return value


@click.command("otel-export")
@click.option("--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
              help="kafka://host:port to read agents.canonical from (env CANONFLOW_BROKER).")
@click.option("--from-file", "from_file", type=click.Path(dir_okay=False, allow_dash=True),
              default=None, help="Read canonical events (JSON lines, e.g. `canonflow replay` "
                                 "output; - = stdin) instead of the topic.")
@click.option("--endpoint", default=None, callback=lambda ctx, param, value: _url(value),
              help="OTLP/HTTP base URL; spans go to <endpoint>/v1/traces (env "
                   "OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is; "
                   f"default {DEFAULT_ENDPOINT}). Headers, certificates, timeout and "
                   "compression come from the standard OTEL_EXPORTER_OTLP_* variables.")
@click.option("--session", "-s", default=None, help="Only this session.")
@click.option("--from-beginning/--from-now", default=True, show_default=True,
              help="Topic only: start at the oldest retained event or at new ones.")
@click.option("--idle-timeout", type=float, default=None,
              help="Topic only: exit after this many seconds without an event.")
@click.option("--capture-content", is_flag=True, envvar="CANONFLOW_OTEL_CAPTURE_CONTENT",
              help="Record tool arguments and results (gen_ai.tool.call.arguments/.result; "
                   "may hold secrets; env CANONFLOW_OTEL_CAPTURE_CONTENT).")
@click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True,
              help="Spans per OTLP request.")
def otel_export(broker: str | None, from_file: str | None, endpoint: str | None,
                session: str | None, from_beginning: bool, idle_timeout: float | None,
                capture_content: bool, batch_size: int) -> None:
    """Export canonical events as OpenTelemetry spans (GenAI conventions) over OTLP/HTTP.

    One `invoke_agent` span per turn, one `execute_tool` child span per tool call;
    deterministic ids, so exporting the same events twice gives the same spans. Reads
    agents.canonical until Ctrl-C / SIGTERM (or --idle-timeout), or a file to its end.
    Exit status 1 when some spans could not be delivered. A failed request is retried
    (429/502/503/504, connection errors) with backoff within OTEL_EXPORTER_OTLP_TIMEOUT
    (seconds, default 10), then its spans are dropped.
    """
    import asyncio
    import signal

    if from_file is None:
        from pipeline.settings import from_env

        try:
            settings = from_env(broker=broker)
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        if not settings.broker:
            raise click.UsageError("otel-export needs --broker (or CANONFLOW_BROKER), "
                                   "or --from-file")
    try:
        url = traces_url(endpoint)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    builder = SpanBuilder(capture_content=capture_content)

    async def main() -> tuple[Stats, Exporter]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if from_file is None:  # a file ends by itself; Ctrl-C stops it the usual way
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
        async with Exporter(url, resource=resource_attributes()) as exporter:
            if from_file is not None:
                values = file_values(from_file)
            else:
                values = topic_values(settings, from_beginning=from_beginning,
                                      idle_timeout=idle_timeout, stop=stop)
            stats = await export_events(values, exporter, builder, batch_size=batch_size,
                                        close_at_end=from_file is not None, session=session)
        return stats, exporter

    logging.basicConfig(level=logging.WARNING, format="canonflow: %(message)s")
    try:
        stats, exporter = asyncio.run(main())
    except NoEventTime as e:
        raise click.ClickException(
            f"{e}: spans would be dated 1970. Export from the topic (record timestamps are "
            "used) or replay a capture whose lines carry times (`t`)") from None
    except OSError as e:
        raise click.ClickException(f"cannot read {e.filename or from_file}: {e.strerror}"
                                   ) from None
    except Exception as e:
        from aiokafka.errors import KafkaError

        if isinstance(e, KafkaError):
            raise click.ClickException(f"broker {settings.broker}: {e}") from None
        raise
    click.echo(f"canonflow: otel-export: {stats.events} event(s), {stats.bad_events} bad; "
               f"{exporter.exported} span(s) exported to {url}, {exporter.dropped} dropped",
               err=True)
    if exporter.dropped:
        raise SystemExit(1)
