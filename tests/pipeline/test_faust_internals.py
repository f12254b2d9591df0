"""What pipeline.worker.faust_internals relies on in Faust (its items 1 to 4 and 9):
each test fails when a Faust upgrade changes that behaviour, so that the upgrade is
read against the module before it ships."""

from __future__ import annotations

import asyncio
from typing import Any

import faust
import pytest
from faust.types import TP, Message

from pipeline.ops.records import ProducerRecord, TableEntry
from pipeline.worker.faust_internals import (
    hold_ack,
    local,
    note_persisted,
    partition_record,
    release_acks,
    set_current_event,
    take_batches,
    write_entries,
)


@pytest.fixture
def app(tmp_path: Any) -> faust.App:
    return faust.App("internals-test", broker="kafka://127.0.0.1:1", store="memory://",
                     datadir=str(tmp_path), autodiscover=False, web_enabled=False)


def _table(app: faust.App, name: str = "t") -> Any:
    return app.Table(name, partitions=4, key_type=bytes, value_type=bytes, default=None)


def test_1_a_tables_data_is_its_store_and_writing_it_sends_no_changelog_record(app):
    table = _table(app)
    sent: list[Any] = []
    table.send_changelog = lambda *a, **k: sent.append(a)  # what `table[k] = v` calls
    records = write_entries(table, [TableEntry(b"k", 2, b"v", partition_record(2)),
                                    TableEntry(b"gone", 1, None)])
    assert local(table) is table.data and local(table)[b"k"] == b"v"
    assert sent == []  # the checkpoint sends them
    assert records == [ProducerRecord(table.changelog_topic.get_topic_name(), b"v", b"k", 2),
                       ProducerRecord(table.changelog_topic.get_topic_name(), None, b"gone",
                                      1)]


def test_2_a_store_takes_a_persisted_offset_per_changelog_partition(tmp_path):
    pytest.importorskip("rocksdict")
    app = faust.App("internals-test", broker="kafka://127.0.0.1:1", store="rocksdb://",
                    datadir=str(tmp_path), autodiscover=False, web_enabled=False)
    table = _table(app)
    topic = table.changelog_topic.get_topic_name()
    note_persisted([table], {(topic, 3): 41, ("other", 3): 7})
    assert table.data.persisted_offset(TP(topic, 3)) == 41


def test_3_current_event_reads_the_variable_the_agents_set():
    record = partition_record(3)
    set_current_event(record)
    assert faust.current_event() is record
    assert record.message.partition == 3  # all a store reads of it


def test_4_a_held_record_is_acknowledged_only_when_released():
    message = Message("raw", 0, 5, 0.0, 0, None, b"k", b"v", None)
    event = type("Event", (), {"message": message})()
    message.incref()  # as Faust's conductor does when it hands the record to a stream
    held = hold_ack(event)
    assert message.ack(None) is False and not message.acked  # the batch's ack
    out: list[Any] = []
    app = type("App", (), {"consumer": None, "sensors": type("S", (), {
        "on_message_out": staticmethod(lambda *a: out.append(a))})()})()
    release_acks(app, [held])
    assert message.acked and out == [(message.tp, 5, message)]


def test_4_faust_shutdown_waits_on_the_consumers_unacked_set():
    from faust.transport.consumer import Consumer

    assert isinstance(Consumer.unacked, property)


def test_9_take_batches_uses_these_parts_of_a_faust_stream(app):
    topic = app.topic("raw", key_serializer="raw", value_serializer="raw")

    async def main() -> None:
        stream = topic.stream()
        for part in ("_active_agens", "add_processor", "_processors", "_enable_passive",
                     "enable_acks", "ack", "wait_for_stopped", "wait", "crash",
                     "current_event", "channel", "should_stop"):
            assert hasattr(stream, part), part
        batches = take_batches(stream, 10, 0.1)
        assert batches in stream._active_agens
        await batches.aclose()

    asyncio.run(main())
