"""The span model of the OpenTelemetry export: protobuf-free `Span`s, their
deterministic ids (hashes of canonical ids), event times, the typed token usage a span
carries, and the GenAI provider name. Pure: no clock, no I/O."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from adapters.core.ids import canonical_id
from topics.runtimes import RUNTIMES
from topics.usage import TokenUsage

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


def agent_span_id(session_id: str, agent_id: str, turn_id: str | None = None) -> bytes:
    """8-byte span id of a subagent's invoke_agent span (with `turn_id`: of the span of
    its own turn that started after its first span ended)."""
    if turn_id is None:
        return _hash_id(8, "agent", session_id, agent_id)
    return _hash_id(8, "agent", session_id, agent_id, turn_id)


def root_agent_id(session_id: str) -> str:
    """The id of a session's root agent, as the conversation core derives it (its
    `session.started` carries it; this is for an export that starts after it)."""
    return canonical_id("agt", session_id, "")


def spawner_of(agent_id: str) -> str:
    """The canonical tool item that started the subagent `agent_id`: they share a hash
    (docs "Agents": `agt_<h>` was started by `itm_<h>`)."""
    return "itm_" + agent_id.split("_", 1)[-1]


def agent_of(item_id: str) -> str:
    """The subagent the tool item `item_id` starts, if it starts one."""
    return "agt_" + item_id.split("_", 1)[-1]


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


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _content(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return s[:MAX_CONTENT_CHARS]


def _single_key(v: Any) -> str | None:
    return next(iter(v)) if isinstance(v, Mapping) and len(v) == 1 else None
