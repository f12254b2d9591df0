"""Faust's internals under the worker's tables, acknowledgements and batches.

canonflow uses Faust's public API (the app, topics, agents, streams, tables, timers)
everywhere else. Where that API does not let the worker keep its one invariant
(STATE NEVER AHEAD OF WHAT WAS PUBLISHED, pipeline.worker.checkpoint), or measurably
costs too much, the worker goes under it, here and in pipeline.worker.faust_consumer
and nowhere else (tests/pipeline/test_layers.py checks that no other module imports
Faust's or mode's internals or touches a table's local store, changelog or persisted
offsets). Each use is below, with
the reason for it and the test that fails if Faust's behaviour it relies on changes
(tests/pipeline/test_faust_internals.py, unless another is named):

1. Tables written in batches (`write_entries`, `local`): the worker writes a table's
   local store (`table.data`) directly and its checkpoint sends the changelog records
   itself, through the output producer, in record batches, after the output they
   stand for. Faust's `table[key] = value` sends each changelog record at once,
   through Faust's producer, before the output it stands for is published.
   Relies on: `Table.data` is the store, and writing it sends nothing.
2. Persisted offsets (`note_persisted`): what Faust's own changelog callback does for
   the records it sent, done for the ones the checkpoint sent, so that a RocksDB store
   recovers from the right offset. Relies on: `Store.set_persisted_offset(tp, offset)`.
3. The current event (`set_current_event`, `partition_record`): Faust's stores find a
   key's partition from the task's current event. In a batch that is the batch's last
   record, whatever partition the key belongs to; so before touching a session's entry
   the agent sets the current event to the record it belongs to (Faust's
   `faust.streams._current_event`, what the public `current_event()` reads), as Faust's
   own stream iteration does for every record. A write that no record carries (an idle
   close, a stall) names a partition record: an object with the attributes Faust's
   stores read (`event.message.partition`). Relies on: `current_event()` reads
   `_current_event`, and a store reads only `message.partition` of it.
4. Acknowledgements held back (`hold_unacknowledged`, `forget_unacknowledged`,
   `hold_ack`, `release_acks`): the agents' batch generator (`take_batches`, 5, as
   Faust's `take_events`) acknowledges a batch in a `finally` when it is closed; an
   agent that stops (or crashes) inside an undelivered batch must not have it
   acknowledged (it is read again after a restart), so its generator is kept from
   being finalized. A committed batch's states go with the next delivery
   (pipeline.worker.pending): its records keep one reference each until then
   (`Message.incref`), so that the batch's acknowledgement does not commit them. And
   Faust's shutdown waits for every record it handed out to be acknowledged (the
   consumer's `unacked` set): an agent that gives up its batch as the worker stops
   takes its records off that set, or SIGTERM would never be honoured
   (test_stop_in_retry.py).
5. Batches that wait for their first record (`take_batches`): Faust's `take_events`
   wakes every `within` seconds whether or not a record came, three tasks a wake-up
   (mode's `wait_first`). With a 10 ms window and eleven agents, an idle worker's event
   loop woke 1,100 times a second: measured, 200 ticks of CPU in 20 s (a tenth of a
   core) against 9 with the window at 1 s. `take_batches` hands out the same batches,
   acknowledged the same way, but an empty batch waits for its first record with no
   timer, and a batch waits at most `within` after its first record joined it. The
   records that come while the agent holds a batch join the next one when the agent
   asks for it, as with take_events, so a busy agent's batches stay as large.
The consumer's and table recovery's ways under Faust (the fetch wait, the assignment
cache, paused changelogs, a fetched record handed on without four tasks, recovery's
corrections, a read position rewound) are in pipeline.worker.faust_consumer, each with
its measurements on Apache Kafka and on Tansu.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable, MutableMapping, Sequence
from typing import Any

from faust.streams import _current_event
from faust.types import TP

from pipeline.ops.records import ProducerRecord, TableEntry
from topics.catalog import changelog_spec

log = logging.getLogger("canonflow")



# ---- 1, 2: tables written in batches ------------------------------------------


def add_table(app: Any, settings: Any, name: str) -> Any:
    """The worker's table `name` (bytes keys and values, default None), co-partitioned
    with the raw topics, its changelog declared with the catalog's configuration
    (topics.catalog.changelog_spec: compacted, an explicit max.message.bytes)."""
    return app.Table(name, partitions=settings.partitions, key_type=bytes, value_type=bytes,
                     default=None,
                     extra_topic_configs=changelog_spec(settings.app_id, name).config())


def local(table: Any) -> MutableMapping[bytes, bytes]:
    """`table`'s local store. Reads see the current event's partition (`set_current_event`),
    or every partition in a context without one; writes send no changelog record (the
    checkpoint sends them: `write_entries`)."""
    return table.data  # type: ignore[no-any-return]


def local_size(table: Any) -> int:
    """Entries in `table`'s local store. Raises what the store raises when it is not
    open (no partition assigned yet)."""
    return len(table.data)


def changelog_name(table: Any) -> str:
    return table.changelog_topic.get_topic_name()  # type: ignore[no-any-return]


def write_entries(table: Any, entries: Iterable[TableEntry]) -> list[ProducerRecord]:
    """Write each entry to `table`'s local store (value None deletes); returns their
    changelog records (None: a tombstone), each in the changelog partition of the
    records it came from, for the checkpoint to deliver. The entry's record names the
    partition whose RocksDB database the entry goes to."""
    data = table.data
    topic = changelog_name(table)
    out: list[ProducerRecord] = []
    for entry in entries:
        if entry.value is None:
            data.pop(entry.key, None)
        else:
            if entry.record is not None:
                set_current_event(entry.record)
            data[entry.key] = entry.value
        out.append(ProducerRecord(topic, entry.value, entry.key, entry.partition))
    return out


def note_persisted(tables: Sequence[Any], ends: dict[tuple[str, int], int]) -> None:
    """Note each changelog partition's last delivered offset (`ends`, as the output
    producer returns them) as persisted, as Faust's own changelog callback does: the
    RocksDB store recovers from there."""
    for table in tables:
        topic = changelog_name(table)
        for (name, partition), offset in ends.items():
            if name == topic:
                table.data.set_persisted_offset(TP(name, partition), offset)


# ---- 3: the current event -------------------------------------------------------


def set_current_event(event: Any) -> None:
    """Make `event` the current event of this task (table partition = its partition)."""
    _current_event.set(weakref.ref(event))


class PartitionRecord:
    """What Faust's stores read of a current event: `event.message.partition`."""

    __slots__ = ("partition", "__weakref__")

    def __init__(self, partition: int):
        self.partition = partition

    @property
    def message(self) -> PartitionRecord:
        return self


def partition_record(partition: int) -> Any:
    """A record of `partition`, for table writes no input record carries (an idle close,
    a stall): pass it to `set_current_event`, and keep it referenced while it is the
    current event (Faust holds it by a weak reference)."""
    return PartitionRecord(partition)


# ---- 4: acknowledgements held back ----------------------------------------------

#: take_batches generators whose last batch was not delivered when their agent stopped
#: or crashed. Held so that they are never finalized while the worker runs: a
#: take_batches generator acknowledges a batch in a `finally` when it is closed, and
#: an undelivered batch must not be acknowledged (it is read again after a restart).
_UNDELIVERED: list[Any] = []


def hold_unacknowledged(batches: Any) -> None:
    """Keep `batches` (a `take_batches` generator whose current batch was not delivered)
    from being closed, and so from acknowledging that batch, while the worker runs."""
    _UNDELIVERED.append(batches)


def hold_ack(event: Any) -> Any:
    """Keep `event`'s record from being acknowledged when its batch is done
    (take_batches acknowledges a batch when the agent asks for the next one); returns its
    message, for `release_acks` once the batch's states are delivered
    (pipeline.worker.pending)."""
    message = event.message
    message.incref()
    return message


def release_acks(app: Any, messages: Iterable[Any]) -> None:
    """Acknowledge the records `hold_ack` held: their offsets may now be committed."""
    consumer, out = app.consumer, app.sensors.on_message_out
    for message in messages:
        if message.ack(consumer):
            out(message.tp, message.offset, message)


def forget_unacknowledged(app: Any, topic: str) -> int:
    """Make Faust's shutdown stop waiting for the records of `topic` it handed out and
    that this worker will not acknowledge (its agent gave up a batch as the worker
    stopped: pipeline.worker.output.Abandoned); returns how many. They stay
    unacknowledged, so their offsets are not committed: they are read again after the
    restart. Why: Faust's shutdown first waits until every record it handed out is
    acknowledged (the consumer's `wait_empty`, through its `unacked` set); with a batch
    held back, SIGTERM was never honoured (SIGKILL after 60 s,
    tests/pipeline/test_stop_in_retry.py)."""
    unacked = app.consumer.unacked
    mine = [message for message in list(unacked) if message.topic == topic]
    for message in mine:
        unacked.discard(message)
    return len(mine)


# ---- 5: batches that wait for their first record ----------------------------------


def take_batches(stream: Any, max_: int, within: float) -> AsyncIterator[list[Any]]:
    """The events of `stream` in batches of at most `max_`, as Faust's `take_events`
    gives them, and acknowledged as it does them (each batch when the next is asked
    for, or when the generator is closed: see 4), but waiting without a timer while no
    record came, and at most `within` seconds after a batch's first record (with
    `within` 0: until the batch is full). Tracked as Faust tracks its own, so that the
    stream's stop closes it as it would take_events'."""
    batches = _take_batches(stream, max_, within)
    stream._active_agens.add(batches)
    return batches


async def _take_batches(stream: Any, max_: int, within: float) -> AsyncIterator[list[Any]]:
    from mode.utils.aiter import aiter

    loop = asyncio.get_running_loop()
    events: list[Any] = []
    first_at = 0.0  # when the batch being filled got its first record (loop time)
    begun = asyncio.Event()  # the batch has a record
    full = asyncio.Event()  # it has max_
    handed_out = asyncio.Event()  # the full batch was handed out: space again
    handing: asyncio.Future[None] | None = None  # the agent holds the batch

    async def add(value: Any) -> Any:
        # the stream's processor: runs for each record, one at a time
        nonlocal handing, first_at
        try:
            if handing is not None:  # the batch is with the agent: this record is the next's
                try:
                    await handing
                finally:
                    handing = None
            event = stream.current_event
            if event is None:
                raise RuntimeError("a batch's record came without its event")
            if not events:
                first_at = loop.time()
                begun.set()
            events.append(event)
            if len(events) >= max_:
                full.set()
                handed_out.clear()
                await stream.wait(handed_out)  # never more than max_ in a batch
        except Exception as exc:  # (not CancelledError: a BaseException, it goes through)
            log.exception("a record could not join its batch: %r", exc)
            await stream.crash(exc)
        return value

    acks = stream.enable_acks
    stream.enable_acks = False  # the batches are acknowledged here, once handed out
    stream.add_processor(add)
    stream._enable_passive(aiter(stream.channel))
    try:
        while not stream.should_stop:
            if not events:
                await stream.wait_for_stopped(begun)
            if events and len(events) < max_:
                if not within:
                    await stream.wait_for_stopped(full)
                else:
                    left = first_at + within - loop.time()
                    if left > 0:
                        await stream.wait_for_stopped(full, timeout=left)
            if events:
                # no record joins while the agent holds the batch (`add` waits on handing)
                batch, handing = list(events), loop.create_future()
                try:
                    yield batch
                finally:
                    events.clear()
                    begun.clear()
                    full.clear()
                    for event in batch:
                        await stream.ack(event)
                    handing.set_result(None)
                    handed_out.set()
    finally:
        stream.enable_acks = acks
        stream._processors.remove(add)
