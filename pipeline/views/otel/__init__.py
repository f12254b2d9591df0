"""Canonical events -> OpenTelemetry spans (GenAI semantic conventions), exported over OTLP.

`canonflow otel-export` reads canonical events (from `agents.canonical`, or from a JSONL
file such as `canonflow replay` output) and sends one trace per turn to an OTLP/HTTP
endpoint (protobuf, POST /v1/traces):

    invoke_agent <provider>            the root agent: one span per turn (turn.started ..
      │                                turn.completed), gen_ai.agent.id its id
      ├─ execute_tool <toolName>       one span per tool item (item.started .. completed)
      └─ execute_tool Task             a tool call that starts a subagent (itm_<h>)
           └─ invoke_agent <name>      the subagent (agentId agt_<h>), INTERNAL
                └─ execute_tool ...    its tool calls, its own subagents nested alike

A subagent's span lasts from its first event until the tool call that started it ends
(and its own turns with it, where its runtime gives it turns: their usage and cost are
summed on its span); a turn of it that starts after that gets a span of its own, under
the same tool call, with the same gen_ai.agent.id.

Attributes follow the GenAI conventions (gen_ai.operation.name, gen_ai.provider.name,
gen_ai.conversation.id = session id, gen_ai.request/response.model, gen_ai.usage.*,
gen_ai.tool.name/.call.id/.type, error.type); canonflow's own ids ride in `canonflow.*`.
Approvals (request.opened / request.resolved) and runtime errors become span events.

Two halves:
* `SpanBuilder` / `build_spans`: pure. Events in, spans out; no clock, no I/O. Trace and
  span ids are hashes of canonical ids (trace = session + turn, turn span = session +
  turn, tool span = session + item, subagent span = session + agent) and times come from `createdAt`, so the same
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

Modules: `model` (Span, ids, times, usage, provider name), `builder` (the pure half:
`state` what it keeps, `handlers` what each event does and what ends when, `finish` the
spans and their attributes), `wire` (the SDK's spans, encoder and exporter; the endpoint), `command` (the reading
loop and the click command).
"""

from pipeline.views.otel.builder import SpanBuilder, build_spans
from pipeline.views.otel.command import Stats, export_events, file_values, otel_export, topic_values
from pipeline.views.otel.model import (
    SCHEMA_URL,
    SCOPE_NAME,
    BadEvent,
    NoEventTime,
    Span,
    SpanEvent,
    item_span_id,
    provider_name,
    trace_id_for,
    turn_span_id,
    turn_tokens,
    unix_nanos,
)
from pipeline.views.otel.wire import (
    DEFAULT_ENDPOINT,
    Exporter,
    encode_request,
    readable_spans,
    resource_attributes,
    traces_url,
)

__all__ = [
    "DEFAULT_ENDPOINT", "SCHEMA_URL", "SCOPE_NAME", "BadEvent", "Exporter", "NoEventTime",
    "Span", "SpanBuilder", "SpanEvent", "Stats", "build_spans", "encode_request",
    "export_events", "file_values", "item_span_id", "otel_export", "provider_name",
    "readable_spans", "resource_attributes", "topic_values", "trace_id_for", "traces_url",
    "turn_span_id", "turn_tokens", "unix_nanos",
]
