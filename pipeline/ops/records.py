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
from typing import Any

import msgspec

__all__ = ["Headers", "ProducerRecord", "TableEntry"]

#: A record's headers, as aiokafka takes them: (name, value) pairs.
Headers = Sequence[tuple[str, bytes]]


class ProducerRecord(msgspec.Struct, frozen=True, gc=False):
    """One record to publish, in the partition it names (the worker keeps a session on
    one partition end to end, so it never leaves the choice to the producer).

    A Struct, not a NamedTuple: the worker makes a few per native message, and a
    Struct is made in a fifth of a NamedTuple's time. It holds no container that could
    be part of a reference cycle, so the garbage collector does not track it."""

    topic: str
    value: bytes | None
    key: bytes | None
    partition: int
    timestamp_ms: int | None = None
    headers: Headers | None = None


class TableEntry(msgspec.Struct, frozen=True):
    """A table entry to write: its key and partition, its value (None: delete), and the
    record (or partition record) whose partition the local store writes it to
    (pipeline.worker.faust_internals, 3)."""

    key: bytes
    partition: int
    value: bytes | None
    record: Any = None
