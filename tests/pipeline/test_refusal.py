"""Output the cluster refuses for good is dead-lettered, not sent again forever.

The embedded broker (Tansu, memory storage) accepts every record whatever the topic's
max.message.bytes and creates unknown topics on first use (measured: a 5,000-byte record
to a topic of max.message.bytes 1000, and a record to a topic never created, were both
appended), so the refusals of a real Kafka cluster cannot be had from it. The producer
here is a stand-in that answers as aiokafka does when a broker refuses a batch: the
batch's delivery future raises the broker's error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError

from pipeline.ops.metrics import WorkerMetrics
from pipeline.ops.records import ProducerRecord
from pipeline.ops.web import Health
from pipeline.settings import Settings
from pipeline.worker.output import OutputProducer, refusal
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC
from topics.records import decode_deadletter


class _Batch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, key: bytes | None, value: bytes | None, timestamp: Any,
               headers: Any = None) -> int:  # aiokafka's BatchBuilder.append
        self.records.append((key, value))
        return 1


class _Producer:
    """Refuses every batch holding a value longer than `limit` with the broker's
    MESSAGE_TOO_LARGE (a real cluster refuses the batch whole)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.delivered: list[tuple[str, bytes | None]] = []

    def create_batch(self) -> _Batch:
        return _Batch()

    async def send_batch(self, batch: _Batch, topic: str, partition: int) -> Any:
        future = asyncio.get_running_loop().create_future()
        if any(len(v or b"") > self.limit for _, v in batch.records):
            future.set_exception(MessageSizeTooLargeError("MESSAGE_TOO_LARGE"))
        else:
            self.delivered += [(topic, v) for _, v in batch.records]
            future.set_result(type("Meta", (), {"offset": len(self.delivered)})())
        return future


def _sink(producer: _Producer) -> tuple[OutputProducer, WorkerMetrics, Health]:
    metrics, health = WorkerMetrics(), Health()
    sink = OutputProducer(Settings(broker="kafka://127.0.0.1:1", max_message_bytes=900),
                          metrics, health)
    sink._producer = producer
    return sink, metrics, health


def test_a_record_too_large_is_dead_lettered_and_the_partition_moves_on(monkeypatch) -> None:
    monkeypatch.setattr("pipeline.worker.output.RETRY_FIRST_SECONDS", 0.01)  # the batch, then one by one
    producer = _Producer(limit=1000)
    sink, metrics, health = _sink(producer)
    big = json.dumps({"text": "x" * 5000}).encode()
    # one partition: the cluster refuses their batch whole, and only the large record
    # may be dead-lettered
    items = [ProducerRecord(CANONICAL_TOPIC, b'{"n":1}', b"s1", 0, 1),
             ProducerRecord(CANONICAL_TOPIC, big, b"s1", 0, 2),
             ProducerRecord(CANONICAL_TOPIC, b'{"n":3}', b"s1", 0, 3)]
    asyncio.run(asyncio.wait_for(sink.publish(items, "normalize.codex"), 10))
    # the small records were delivered, the large one was dead-lettered with its reason and (cut to the dead-letter limit) its bytes
    assert [v for t, v in producer.delivered if t == CANONICAL_TOPIC] == [b'{"n":1}', b'{"n":3}']
    letters = [decode_deadletter(v) for t, v in producer.delivered if t == DEADLETTER_TOPIC]
    assert len(letters) == 1 and letters[0].errorClass == "Refused.MessageSizeTooLargeError"
    assert letters[0].topic == CANONICAL_TOPIC and letters[0].key == "s1"
    assert letters[0].valueBytes == len(big) and big.startswith(letters[0].value)
    assert health.refused == 1 and "MessageSizeTooLarge" in (health.refused_error or "")
    assert metrics.refused.get((CANONICAL_TOPIC, "MessageSizeTooLargeError")) == 1


def test_which_errors_are_refusals() -> None:
    from aiokafka.errors import (
        KafkaTimeoutError,
        TopicAuthorizationFailedError,
        UnknownTopicOrPartitionError,
    )

    assert refusal(MessageSizeTooLargeError(), 0) and refusal(TopicAuthorizationFailedError(), 0)
    assert not refusal(KafkaConnectionError(), 1e9) and not refusal(KafkaTimeoutError(), 1e9)
    # an unknown topic may be being created: a refusal only once it stayed unknown
    assert not refusal(UnknownTopicOrPartitionError(), 1) and refusal(
        UnknownTopicOrPartitionError(), 600)
