"""A librdkafka client (confluent-kafka) reads canonflow's output from the broker
(Apache Kafka, or the embedded Tansu): values, keys and CloudEvents headers as aiokafka
reads them. It assigns itself the partitions: a consumer group of librdkafka's waits
about 23 s for its join on Tansu (README, Embedded broker limits)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.tools.kafka_io import produce, records_from_file
from tests.pipeline.conftest import read_topic, timed
from topics.catalog import CANONICAL_TOPIC

confluent_kafka = pytest.importorskip("confluent_kafka")
CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"

pytestmark = pytest.mark.tansu


def _read_with_librdkafka(bootstrap: str, topic: str, partitions: int, want: int,
                          timeout: float = 60.0) -> list[Any]:
    """`want` records of `topic`, every partition from its beginning, no consumer group."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "librdkafka-reader",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
        return got
    finally:
        consumer.close()


def test_confluent_kafka_reads_the_canonical_events_and_their_headers(settings, worker,
                                                                      tmp_path):
    path = timed(CAPTURED / "codex-exec" / "codex-exec__reasoning.capture.jsonl", tmp_path)
    asyncio.run(produce(settings, "codex-exec", "sess-rd", records_from_file(str(path),
                                                                            "capture")))
    first = read_topic(settings, CANONICAL_TOPIC, 1, key=b"sess-rd", worker=worker)
    assert first
    time.sleep(2)  # the rest of the session's events, then both clients read them all
    by_aiokafka = read_topic(settings, CANONICAL_TOPIC, 10_000, key=b"sess-rd", timeout=5.0)
    got = _read_with_librdkafka(settings.bootstrap, CANONICAL_TOPIC, settings.partitions,
                                len(by_aiokafka))
    assert [(m.key(), m.value()) for m in got] == [(r.key, r.value) for r in by_aiokafka]
    for msg, rec in zip(got, by_aiokafka, strict=True):
        headers = dict(msg.headers() or [])
        assert headers == dict(rec.headers)
        event = json.loads(msg.value())
        assert headers["ce_id"] == event["eventId"].encode()
        assert headers["ce_subject"] == b"sess-rd"
        assert headers["ce_type"] == f"dev.canonflow.{event['type']}".encode()
