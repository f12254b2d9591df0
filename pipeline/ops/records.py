"""The worker's two record types: what it publishes (`ProducerRecord`, named after
Kafka's own: topic, partition, timestamp, key, value, headers) and what it writes to
a table (`TableEntry`).

One producer record type serves the output topics (canonical events, chat records,
dead letters, session summaries, fleet metrics) and the tables' changelogs: a
changelog record is a producer record without a timestamp, and its value None is a
tombstone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["Headers", "ProducerRecord", "TableEntry"]

#: A record's headers, as aiokafka takes them: (name, value) pairs.
Headers = Sequence[tuple[str, bytes]]


class ProducerRecord(NamedTuple):
    """One record to publish, in the partition it names (the worker keeps a session on
    one partition end to end, so it never leaves the choice to the producer)."""

    topic: str
    value: bytes | None
    key: bytes | None
    partition: int
    timestamp_ms: int | None = None
    headers: Headers | None = None


class TableEntry(NamedTuple):
    """A table entry to write: its key and partition, its value (None: delete), and the
    record (or partition record) whose partition the local store writes it to
    (pipeline.worker.faust_internals, 3)."""

    key: bytes
    partition: int
    value: bytes | None
    record: Any = None
