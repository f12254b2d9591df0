"""The topic catalog: every topic canonflow reads or writes, declared once.

Topic names are literals here and nowhere else (a raw topic's: in its runtime's
entry, topics.runtimes). All co-partitioned topics (the raw topics, the canonical and
chat topics, and the table changelogs that the pipeline derives from them) share one
partition count, so a session's records, its state and its output always live on the
same partition number.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from topics.runtimes import RUNTIMES

#: Every provider canonflow reads, in catalog order (the runtime registry's ids).
PROVIDERS: tuple[str, ...] = tuple(r.id for r in RUNTIMES)

DEFAULT_PARTITIONS = 12
DAY_MS = 24 * 60 * 60 * 1000

#: max.message.bytes of the other topics (raw, dead letters, metrics): Kafka's default.
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
#: max.message.bytes of the canonical and chat topics: Kafka's default, so they need no
#: setting a cluster's policy may refuse. No event is larger (adapters.core.fit): a
#: delta is split, an item's text or output joined from deltas is cut at the per-item
#: cap (CANONFLOW_ITEM_CAP, 64 KiB), and what a runtime sent whole is cut in the middle
#: only where the event would not fit.
EVENT_MAX_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_BYTES
#: What a record needs besides its value within max.message.bytes: the record batch's
#: header (61 bytes), the record's own, its key and its CloudEvents headers.
RECORD_ROOM = 4096
#: The most bytes of JSON one canonical event or chat record holds (MAX_EVENT_BYTES plus
#: its key and headers fit in EVENT_MAX_MESSAGE_BYTES).
MAX_EVENT_BYTES = EVENT_MAX_MESSAGE_BYTES - RECORD_ROOM
#: max.message.bytes of the table changelogs: Kafka's default. A session value is
#: bounded (lengths, digests and hash midstates, held-back tails of at most 8 Ki
#: characters; docs "State") and a spooled chunk holds at most 16 Ki characters (64 KiB
#: of UTF-8), and Faust's producer, which writes them, sends no request above
#: 1,000,000 bytes (producer_max_request_size) whatever the topic takes.
CHANGELOG_MAX_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_BYTES

Cleanup = Literal["delete", "compact", "compact,delete"]


class TopicSpec(Struct, frozen=True, kw_only=True):
    """One topic of the catalog."""

    name: str
    role: Literal["raw", "canonical", "chat", "sessions", "deadletter", "metrics", "changelog"]
    key: str
    value: str
    owner: str
    cleanup_policy: Cleanup = "delete"
    retention_ms: int = 7 * DAY_MS
    #: The topic's max.message.bytes, set explicitly on every topic canonflow creates.
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    provider: str | None = None

    def config(self) -> dict[str, str]:
        """Topic-level configuration as Kafka expects it (string values)."""
        return {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms),
                "max.message.bytes": str(self.max_message_bytes)}


#: provider -> its raw topic (topics.runtimes)
RAW_TOPICS: dict[str, str] = {r.id: r.raw_topic for r in RUNTIMES}
CANONICAL_TOPIC = "agents.canonical"
CHAT_TOPIC = "agents.chat"
DEADLETTER_TOPIC = "agents.deadletter"
SESSIONS_TOPIC = "agents.sessions"
METRICS_TOPIC = "agents.metrics"

_RAW_VALUE = "NDJSON: one or more native messages of the session, exactly as the runtime wrote them"

CATALOG: tuple[TopicSpec, ...] = (
    *(
        TopicSpec(
            name=RAW_TOPICS[p],
            role="raw",
            key="fleet session id (UTF-8)",
            value=_RAW_VALUE,
            owner="agent sandboxes (sidecar)",
            retention_ms=3 * DAY_MS,
            provider=p,
        )
        for p in PROVIDERS
    ),
    TopicSpec(
        name=CANONICAL_TOPIC,
        role="canonical",
        key="fleet session id (UTF-8)",
        value="canonical event (JSON, topics.canonical.CanonicalEvent)",
        owner="canonflow normalize agents",
        retention_ms=7 * DAY_MS,
        max_message_bytes=EVENT_MAX_MESSAGE_BYTES,
    ),
    TopicSpec(
        name=CHAT_TOPIC,
        role="chat",
        key="fleet session id (UTF-8)",
        value="chat record (JSON, topics.chat.ChatRecord)",
        owner="canonflow chat projection",
        retention_ms=7 * DAY_MS,
        max_message_bytes=EVENT_MAX_MESSAGE_BYTES,
    ),
    TopicSpec(
        name=SESSIONS_TOPIC,
        role="sessions",
        key="fleet session id (UTF-8)",
        value="the session's latest summary (JSON, topics.sessions.SessionSummary); "
              "null (a tombstone) once it is closed and its retention is over: keep the "
              "last record per key",
        owner="canonflow normalize agents",
        cleanup_policy="compact",
    ),
    TopicSpec(
        name=DEADLETTER_TOPIC,
        role="deadletter",
        key="fleet session id when known",
        value="dead letter (JSON, topics.records.DeadLetter) with the original bytes",
        owner="canonflow normalize agents",
        retention_ms=30 * DAY_MS,
    ),
    TopicSpec(
        name=METRICS_TOPIC,
        role="metrics",
        key="<window>|<provider>|<model>|<windowStartMs>|<partition>",
        value="fleet metrics of one window (JSON, topics.metrics.FleetMetrics), "
              "its whole value so far: keep the last record per key",
        owner="canonflow fleet-metrics stage",
        cleanup_policy="compact,delete",
        retention_ms=7 * DAY_MS,
    ),
)


#: The worker's Faust tables (`{provider}`: one per provider), whose changelogs
#: `<app id>-<table>-changelog` the worker declares itself with `changelog_spec`'s
#: configuration; `topics create|check` and the Strimzi manifests list them too.
TABLES: tuple[str, ...] = ("sessions.{provider}", "items.{provider}", "fleet.windows",
                           "fleet.sessions")


def changelog_spec(app_id: str, table: str) -> TopicSpec:
    """The changelog topic of the worker's table `table` (compacted, bounded records)."""
    return TopicSpec(
        name=f"{app_id}-{table}-changelog", role="changelog", key="table key",
        value="table value (msgpack) or spooled chunk; null deletes",
        owner="canonflow worker (Faust table)", cleanup_policy="compact",
        max_message_bytes=CHANGELOG_MAX_MESSAGE_BYTES)


def changelog_topics(app_id: str, providers: tuple[str, ...] = PROVIDERS) -> list[TopicSpec]:
    """Every table changelog of a worker with `app_id` reading `providers`."""
    return [changelog_spec(app_id, t.format(provider=p))
            for t in TABLES for p in (providers if "{provider}" in t else ("",))]


def topic(name: str) -> TopicSpec:
    """The catalog entry for `name`. Raises KeyError for a topic not in the catalog."""
    for spec in CATALOG:
        if spec.name == name:
            return spec
    raise KeyError(name)


def raw_topic(provider: str) -> str:
    """The raw topic of `provider`. Raises KeyError for an unknown provider."""
    return RAW_TOPICS[provider]
