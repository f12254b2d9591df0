"""Declarations only: the runtimes, the topic catalog and the schemas of every record on a
topic."""

from topics.canonical import (
    EVENT_TYPES,
    PAYLOAD_TYPES,
    SCHEMA_VERSION,
    TOOL_ITEM_TYPES,
    Author,
    CanonicalEvent,
    Decision,
    InputOutcome,
    decode_event,
    encode_event,
)
from topics.catalog import (
    CANONICAL_TOPIC,
    CATALOG,
    CHAT_TOPIC,
    DEADLETTER_TOPIC,
    DEFAULT_PARTITIONS,
    PROVIDERS,
    RAW_TOPICS,
    SESSIONS_TOPIC,
    TopicSpec,
    raw_topic,
    topic,
)
from topics.chat import ChatRecord, decode_chat, encode_chat
from topics.records import CaptureLine, DeadLetter
from topics.runtimes import RUNTIMES, Runtime, runtime
from topics.sessions import SessionSummary, decode_summary, encode_summary
from topics.usage import Cost, CostSource, TokenUsage

__all__ = [
    "CANONICAL_TOPIC",
    "CATALOG",
    "CHAT_TOPIC",
    "DEADLETTER_TOPIC",
    "DEFAULT_PARTITIONS",
    "EVENT_TYPES",
    "PAYLOAD_TYPES",
    "PROVIDERS",
    "RAW_TOPICS",
    "RUNTIMES",
    "SCHEMA_VERSION",
    "SESSIONS_TOPIC",
    "TOOL_ITEM_TYPES",
    "Author",
    "CanonicalEvent",
    "CaptureLine",
    "ChatRecord",
    "Cost",
    "CostSource",
    "DeadLetter",
    "Decision",
    "InputOutcome",
    "Runtime",
    "SessionSummary",
    "TokenUsage",
    "TopicSpec",
    "decode_chat",
    "decode_event",
    "decode_summary",
    "encode_chat",
    "encode_event",
    "encode_summary",
    "raw_topic",
    "runtime",
    "topic",
]
