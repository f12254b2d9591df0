"""Kafka clients nobody here wrote read canonflow's output from the broker: values,
keys and CloudEvents headers as aiokafka reads them.

- confluent-kafka (librdkafka 2.16), on Apache Kafka and the embedded Tansu; every
  record it reads is a CloudEvent to the CloudEvents SDK's Kafka binding. It assigns
  itself the partitions: a consumer group of librdkafka's waits about 23 s for its join
  on Tansu (docs, "Embedded broker").
- kcat, Debian's package (librdkafka 2.0.2), on Apache Kafka only: on Tansu its
  ApiVersions request fails ("Local: Read underflow") and it gets no metadata.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from pipeline.tools.kafka_io import produce, records_from_file
from tests.pipeline.brokers import ENGINE
from tests.pipeline.conftest import read_topic, timed
from topics.catalog import CANONICAL_TOPIC
from topics.cloudevents import EVENT_SCHEMA, source

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


def _session_through_the_worker(settings: Any, worker: Any, tmp_path: Path,
                                key: bytes) -> list[Any]:
    """A captured Codex session produced and translated; its events as aiokafka reads them."""
    path = timed(CAPTURED / "codex-exec" / "codex-exec__reasoning.capture.jsonl", tmp_path)
    asyncio.run(produce(settings, "codex-exec", key.decode(), records_from_file(str(path),
                                                                               "capture")))
    first = read_topic(settings, CANONICAL_TOPIC, 1, key=key, worker=worker)
    assert first
    time.sleep(2)  # the rest of the session's events, then both clients read them all
    by_aiokafka = read_topic(settings, CANONICAL_TOPIC, 10_000, key=key, timeout=5.0)
    assert len(by_aiokafka) > 5
    return by_aiokafka


def test_confluent_kafka_reads_the_canonical_events_and_their_headers(settings, worker,
                                                                      tmp_path):
    by_aiokafka = _session_through_the_worker(settings, worker, tmp_path, b"sess-rd")
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
        ce = from_binary(KafkaMessage(headers=headers, key=msg.key(), value=msg.value()),
                         JSONFormat())
        assert (ce.get_id(), ce.get_source(), ce.get_type(), ce.get_dataschema()) == (
            event["eventId"], source("codex-exec", "sess-rd"), f"dev.canonflow.{event['type']}",
            EVENT_SCHEMA)
        assert ce.get_data() == event


@pytest.mark.skipif(ENGINE != "kafka", reason="kcat (librdkafka 2.0.2) gets no metadata from "
                    "Tansu: 'ApiVersionRequest failed: Local: Read underflow'")
@pytest.mark.skipif(shutil.which("kcat") is None, reason="no kcat (apt-get install kcat)")
def test_kcat_reads_the_canonical_events_and_their_cloudevents_headers(settings, worker,
                                                                       tmp_path):
    by_aiokafka = _session_through_the_worker(settings, worker, tmp_path, b"sess-kcat")
    kcat = subprocess.run(["kcat", "-C", "-b", settings.bootstrap, "-t", CANONICAL_TOPIC, "-J",
                           "-o", "beginning", "-e", "-q"],
                          capture_output=True, text=True, timeout=60)
    assert kcat.returncode == 0, kcat.stderr
    got = [m for m in map(json.loads, kcat.stdout.splitlines()) if m["key"] == "sess-kcat"]
    assert [(m["key"], m["payload"]) for m in got] == [
        (r.key.decode(), r.value.decode()) for r in by_aiokafka]
    for m, rec in zip(got, by_aiokafka, strict=True):
        flat = m["headers"]  # kcat -J: [name, value, name, value, ...]
        headers = dict(zip(flat[::2], flat[1::2], strict=True))
        assert headers == {k: v.decode() for k, v in rec.headers}
        event = json.loads(m["payload"])
        assert (headers["ce_id"], headers["ce_source"], headers["ce_type"],
                headers["ce_dataschema"]) == (event["eventId"], source("codex-exec", "sess-kcat"),
                                              f"dev.canonflow.{event['type']}", EVENT_SCHEMA)
