"""What a delivered batch owes rides with the next delivery (issue 24,
pipeline.worker.owed): its states after the next batch's output, the chunks it dropped
one delivery later still, its records acknowledged only once its states are delivered.

The sequencing alone, against a sink that records each delivery (the crash, shutdown
and stall tests run the same code on a real broker)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.worker import owed as owed_module
from pipeline.worker.output import Abandoned
from pipeline.worker.owed import Owed


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
        self.deliveries: list[list[tuple]] = []
        self.fail: BaseException | None = None

    async def publish(self, records: list[tuple], agent: str, *, exact_ends: bool = False
                      ) -> dict[tuple[str, int], int]:
        if self.fail is not None:
            raise self.fail
        self.deliveries.append(list(records))
        ends: dict[tuple[str, int], int] = {}
        for r in records:
            ends[(r[0], r[3])] = ends.get((r[0], r[3]), -1) + 1
        return ends


def _owed() -> tuple[Owed, _Sink, list[Any], Any]:
    sink, released = _Sink(), []
    tables = SimpleNamespace(sessions=_table("sessions-changelog"),
                             items=_table("items-changelog"))
    return Owed(tables, sink, "normalize.test", released.extend), sink, released, tables


def _state(key: bytes) -> tuple:
    return ("sessions-changelog", b"state-" + key, key, 0, None)


def _tomb(key: bytes) -> tuple:
    return ("items-changelog", None, key, 0, None)


def _out(n: int) -> tuple:
    return ("agents.canonical", b"event-%d" % n, b"s", 0, None)


def test_states_ride_after_the_next_output_and_tombstones_one_delivery_later():
    owed, sink, released, tables = _owed()

    async def main() -> None:
        await owed.deliver([_out(1)], [])                      # batch 1's output
        owed.owe([_state(b"s")], [_tomb(b"c1")], ["m1"])
        assert released == [] and sink.deliveries == [[_out(1)]]
        await owed.deliver([_out(2)], [])                      # batch 2's output
        assert sink.deliveries[-1] == [_out(2), _state(b"s")]  # the state after it
        assert released == ["m1"]  # batch 1's record, once its state is delivered
        owed.owe([_state(b"s")], [], ["m2"])
        await owed.deliver([_out(3)], [])
        # the chunk batch 1 dropped goes first, its state being delivered already
        assert sink.deliveries[-1] == [_tomb(b"c1"), _out(3), _state(b"s")]
        assert released == ["m1", "m2"]
        assert not owed

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
    owed = Owed(tables, sink, "normalize.test", released.extend, (windows, fleet_sessions))
    pane = ("windows-changelog", b"pane", b"p|claude|m|0|0", 0, None)
    fleet_state = ("fleet-sessions-changelog", b"model", b"s", 0, None)

    async def main() -> None:
        await owed.deliver([_out(1)], [])
        owed.owe([_state(b"s")], [], ["m1"])
        owed.owe_counts([pane, fleet_state])
        assert released == [] and sink.deliveries == [[_out(1)]]
        await owed.deliver([_out(2)], [])
        assert sink.deliveries[-1] == [_out(2), _state(b"s"), pane, fleet_state]
        assert released == ["m1"]
        owed.owe([], [], ["m2"])
        owed.owe_counts([pane])
        assert owed
        await owed.flush()
        assert sink.deliveries[-1] == [pane] and released == ["m1", "m2"]

    asyncio.run(main())
    assert windows.data.persisted and fleet_sessions.data.persisted


def test_a_chunk_written_again_is_not_tombstoned_after_it():
    owed, sink, _, _ = _owed()
    put = ("items-changelog", b"chunk", b"c1", 0, None)

    async def main() -> None:
        await owed.deliver([_out(1)], [])
        owed.owe([_state(b"s")], [_tomb(b"c1"), _tomb(b"c2")], ["m1"])
        await owed.deliver([_out(2), put], [put])  # c1 written again by batch 2
        owed.owe([], [], ["m2"])
        await owed.flush()

    asyncio.run(main())
    sent = [r for d in sink.deliveries for r in d]
    assert put in sent and _tomb(b"c1") not in sent and _tomb(b"c2") in sent


def test_flush_delivers_everything_owed_in_two_deliveries():
    owed, sink, released, _ = _owed()

    async def main() -> None:
        owed.owe([_state(b"a"), _state(b"b")], [_tomb(b"c")], ["m1", "m2"])
        await owed.flush()

    asyncio.run(main())
    assert sink.deliveries == [[_state(b"a"), _state(b"b")], [_tomb(b"c")]]
    assert released == ["m1", "m2"] and not owed


def test_a_batch_without_states_is_acknowledged_with_the_next_delivery():
    owed, sink, released, _ = _owed()

    async def main() -> None:
        owed.owe([], [], ["m1"])
        await owed.deliver([], [])  # nothing to send: nothing is sent

    asyncio.run(main())
    assert sink.deliveries == [] and released == ["m1"]


def test_an_idle_agent_delivers_what_it_owes_on_its_own(monkeypatch):
    monkeypatch.setattr(owed_module, "FLUSH_AFTER_SECONDS", 0.02)
    owed, sink, released, _ = _owed()

    async def main() -> None:
        lock = asyncio.Lock()
        owed.owe([_state(b"s")], [], ["m1"])
        owed.schedule(lock, lambda: None)
        await asyncio.sleep(0.005)
        assert sink.deliveries == []  # not at once: the next batch may take it
        for _ in range(100):
            if not owed:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert sink.deliveries == [[_state(b"s")]] and released == ["m1"]


def test_a_delivery_that_fails_keeps_the_debt_and_the_records_unacknowledged():
    owed, sink, released, _ = _owed()
    given_up: list[bool] = []

    async def main() -> None:
        owed.owe([_state(b"s")], [], ["m1"])
        sink.fail = Abandoned()
        with pytest.raises(Abandoned):
            await owed.deliver([_out(1)], [])
        assert owed.states == [_state(b"s")] and released == []
        owed.last = 0.0
        owed.schedule(asyncio.Lock(), lambda: given_up.append(True))
        for _ in range(100):
            if given_up:
                break
            await asyncio.sleep(0.01)
        sink.fail = None
        await owed.settle(asyncio.Lock())  # as the agent stops: one more attempt

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

    items = [(topic, b"%s-%d-%d" % (topic.encode(), p, n), b"k", p, None)
             for topic in ("agents.canonical", "sessions-changelog") for p in range(6)
             for n in range(3)]
    producer, sent, unsent = _Producer(), [], []

    asyncio.run(OutputProducer._send(producer, items, sent, unsent, True))
    producer.requests.append([tp for tp, _ in producer.queued])
    assert unsent == [] and len(producer.requests) == 2  # one round trip per round
    assert all(len(r) == 12 for r in producer.requests)
    # each partition's records, in order, the last alone in the second round
    for tp in {(t, p) for t, _, _, p, _ in items}:
        mine = [m for t, _, m in sent if t == tp]
        assert [[items[i][1] for i in m] for m in mine] == [
            [v for t, v, _, p, _ in items if (t, p) == tp][:2],
            [v for t, v, _, p, _ in items if (t, p) == tp][2:]]
