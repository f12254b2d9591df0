"""A delivered batch's pending changelog rides with the next delivery
(pipeline.worker.checkpoint.PendingChangelog): its states after the next batch's output, the chunks it
dropped one delivery later still, its records acknowledged only once its states are
delivered.

The sequencing alone, against a sink that records each delivery (the crash, shutdown
and stall tests run the same code on a real broker)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.ops.records import ProducerRecord
from pipeline.worker import checkpoint as pending_module
from pipeline.worker.checkpoint import PendingChangelog
from pipeline.worker.exceptions import Abandoned


class _Store(dict):
    def __init__(self) -> None:
        super().__init__()
        self.persisted: dict[Any, int] = {}

    def set_persisted_offset(self, tp: Any, offset: int) -> None:
        self.persisted[tp] = offset


def _table(name: str) -> Any:
    return SimpleNamespace(data=_Store(), changelog_topic=SimpleNamespace(
        get_topic_name=lambda: name))


class _Sink:
    """Delivers at once, or raises what `fail` holds."""

    def __init__(self) -> None:
        self.exact_ends = False
        self.deliveries: list[list[ProducerRecord]] = []
        self.fail: BaseException | None = None

    async def publish(self, records: list[ProducerRecord], agent: str, *, exact_ends: bool = False,
                      once: bool = False
                      ) -> dict[tuple[str, int], int]:
        if self.fail is not None:
            raise self.fail
        self.deliveries.append(list(records))
        ends: dict[tuple[str, int], int] = {}
        for r in records:
            ends[(r.topic, r.partition)] = ends.get((r.topic, r.partition), -1) + 1
        return ends


def _pending() -> tuple[PendingChangelog, _Sink, list[Any], Any]:
    sink, released = _Sink(), []
    tables = SimpleNamespace(sessions=_table("sessions-changelog"),
                             items=_table("items-changelog"))
    return PendingChangelog(tables, sink, "normalize.test", released.extend), sink, released, tables


def _state(key: bytes) -> ProducerRecord:
    return ProducerRecord("sessions-changelog", b"state-" + key, key, 0)


def _tomb(key: bytes) -> ProducerRecord:
    return ProducerRecord("items-changelog", None, key, 0)


def _out(n: int) -> ProducerRecord:
    return ProducerRecord("agents.canonical", b"event-%d" % n, b"s", 0)


def test_states_ride_after_the_next_output_and_tombstones_one_delivery_later():
    pending, sink, released, tables = _pending()

    async def main() -> None:
        await pending.publish([_out(1)], [])                      # batch 1's output
        pending.defer([_state(b"s")], [_tomb(b"c1")], ["m1"])
        assert released == [] and sink.deliveries == [[_out(1)]]
        await pending.publish([_out(2)], [])                      # batch 2's output
        assert sink.deliveries[-1] == [_out(2), _state(b"s")]  # the state after it
        assert released == ["m1"]  # batch 1's record, once its state is delivered
        pending.defer([_state(b"s")], [], ["m2"])
        await pending.publish([_out(3)], [])
        # the chunk batch 1 dropped goes first, its state being delivered already
        assert sink.deliveries[-1] == [_tomb(b"c1"), _out(3), _state(b"s")]
        assert released == ["m1", "m2"]
        assert not pending

    asyncio.run(main())
    assert tables.sessions.data.persisted and tables.items.data.persisted


def test_a_batchs_fleet_counts_ride_with_its_states_before_its_records_are_acknowledged():
    """The fleet stage's changelog records of a batch (its count, after `owe`) go in the
    next delivery with the batch's states, and the batch's records are acknowledged only
    once they are delivered; their tables' persisted offsets are noted as the sessions'
    are (a RocksDB store recovers from there)."""
    sink, released = _Sink(), []
    tables = SimpleNamespace(sessions=_table("sessions-changelog"),
                             items=_table("items-changelog"))
    windows, fleet_sessions = _table("windows-changelog"), _table("fleet-sessions-changelog")
    pending = PendingChangelog(tables, sink, "normalize.test", released.extend,
                               (windows, fleet_sessions))
    pane = ProducerRecord("windows-changelog", b"pane", b"p|claude|m|0|0", 0)
    fleet_state = ProducerRecord("fleet-sessions-changelog", b"model", b"s", 0)

    async def main() -> None:
        await pending.publish([_out(1)], [])
        pending.defer([_state(b"s")], [], ["m1"])
        pending.defer_counts([pane, fleet_state])
        assert released == [] and sink.deliveries == [[_out(1)]]
        await pending.publish([_out(2)], [])
        assert sink.deliveries[-1] == [_out(2), _state(b"s"), pane, fleet_state]
        assert released == ["m1"]
        pending.defer([], [], ["m2"])
        pending.defer_counts([pane])
        assert pending
        await pending.flush()
        assert sink.deliveries[-1] == [pane] and released == ["m1", "m2"]

    asyncio.run(main())
    assert windows.data.persisted and fleet_sessions.data.persisted


def test_a_chunk_written_again_is_not_tombstoned_after_it():
    pending, sink, _, _ = _pending()
    put = ProducerRecord("items-changelog", b"chunk", b"c1", 0)

    async def main() -> None:
        await pending.publish([_out(1)], [])
        pending.defer([_state(b"s")], [_tomb(b"c1"), _tomb(b"c2")], ["m1"])
        await pending.publish([_out(2), put], [put])  # c1 written again by batch 2
        pending.defer([], [], ["m2"])
        await pending.flush()

    asyncio.run(main())
    sent = [r for d in sink.deliveries for r in d]
    assert put in sent and _tomb(b"c1") not in sent and _tomb(b"c2") in sent


def test_flush_delivers_everything_pending_in_two_deliveries():
    pending, sink, released, _ = _pending()

    async def main() -> None:
        pending.defer([_state(b"a"), _state(b"b")], [_tomb(b"c")], ["m1", "m2"])
        await pending.flush()

    asyncio.run(main())
    assert sink.deliveries == [[_state(b"a"), _state(b"b")], [_tomb(b"c")]]
    assert released == ["m1", "m2"] and not pending


def test_a_batch_without_states_is_acknowledged_with_the_next_delivery():
    pending, sink, released, _ = _pending()

    async def main() -> None:
        pending.defer([], [], ["m1"])
        await pending.publish([], [])  # nothing to send: nothing is sent

    asyncio.run(main())
    assert sink.deliveries == [] and released == ["m1"]


def test_an_idle_agent_flushes_its_pending_changelog_on_its_own(monkeypatch):
    monkeypatch.setattr(pending_module, "FLUSH_AFTER_SECONDS", 0.02)
    pending, sink, released, _ = _pending()

    async def main() -> None:
        lock = asyncio.Lock()
        pending.defer([_state(b"s")], [], ["m1"])
        pending.schedule(lock, lambda: None)
        await asyncio.sleep(0.005)
        assert sink.deliveries == []  # not at once: the next batch may take it
        for _ in range(100):
            if not pending:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert sink.deliveries == [[_state(b"s")]] and released == ["m1"]


def test_a_delivery_that_fails_keeps_the_changelog_pending_and_the_records_unacknowledged():
    pending, sink, released, _ = _pending()
    given_up: list[bool] = []

    async def main() -> None:
        pending.defer([_state(b"s")], [], ["m1"])
        sink.fail = Abandoned()
        with pytest.raises(Abandoned):
            await pending.publish([_out(1)], [])
        assert pending.states == [_state(b"s")] and released == []
        pending.last = 0.0
        pending.schedule(asyncio.Lock(), lambda: given_up.append(True))
        for _ in range(100):
            if given_up:
                break
            await asyncio.sleep(0.01)
        sink.fail = None
        await pending.settle(asyncio.Lock())  # as the agent stops: one more attempt

    asyncio.run(main())
    assert given_up == [True]
    assert sink.deliveries == [[_state(b"s")]] and released == ["m1"]


# ---- the delivery they ride in: batches queued in rounds -------------------------


class _Batch:
    def __init__(self) -> None:
        self.records: list[bytes] = []

    def append(self, *, key: Any, value: Any, timestamp: Any, headers: Any) -> Any:
        self.records.append(value)
        return True


class _Producer:
    """aiokafka's rule: one batch per partition queued; a second waits until the first
    is sent (here: until the queue is flushed, as a request would)."""

    def __init__(self) -> None:
        self.queued: list[tuple[tuple[str, int], list[bytes]]] = []
        self.requests: list[list[tuple[str, int]]] = []

    def create_batch(self) -> _Batch:
        return _Batch()

    async def send_batch(self, batch: _Batch, topic: str, *, partition: int) -> Any:
        if any(tp == (topic, partition) for tp, _ in self.queued):
            self.requests.append([tp for tp, _ in self.queued])  # one round trip
            self.queued.clear()
        self.queued.append(((topic, partition), batch.records))
        return asyncio.get_running_loop().create_future()


def test_a_delivery_queues_every_partitions_first_batch_before_any_second():
    """With exact ends (the embedded broker) most partitions have two batches: queued
    partition after partition, each second batch cost a request of its own."""
    from pipeline.worker.output import OutputProducer

    items = [ProducerRecord(topic, b"%s-%d-%d" % (topic.encode(), p, n), b"k", p)
             for topic in ("agents.canonical", "sessions-changelog") for p in range(6)
             for n in range(3)]
    producer, sent, unsent = _Producer(), [], []

    asyncio.run(OutputProducer._send(producer, items, sent, unsent, True))
    producer.requests.append([tp for tp, _ in producer.queued])
    assert unsent == [] and len(producer.requests) == 2  # one round trip per round
    assert all(len(r) == 12 for r in producer.requests)
    # each partition's records, in order, the last alone in the second round
    for tp in {(r.topic, r.partition) for r in items}:
        mine = [m for t, _, m in sent if t == tp]
        values = [r.value for r in items if (r.topic, r.partition) == tp]
        assert [[items[i].value for i in m] for m in mine] == [values[:2], values[2:]]
