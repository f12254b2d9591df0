"""The one door between canonflow and Faust's internals.

canonflow uses Faust's public API (the app, topics, agents, streams, tables, timers)
everywhere else. Where that API does not let the worker keep its one invariant
(STATE NEVER AHEAD OF WHAT WAS PUBLISHED, pipeline.worker.checkpoint), or measurably
costs too much, the worker goes under it, here and nowhere else (tests/pipeline/
test_rooms.py checks that no other module imports Faust's or mode's internals or touches
a table's local store, changelog or persisted offsets). Each way under is below, with
the measurement or the issue that justifies it:

1. Tables written in batches (`write_entries`, `local`): the worker writes a table's
   local store directly and sends the changelog records itself, through its own
   producer, in record batches, after the batch's output is delivered. Faust's
   `table[key] = value` sends each changelog record at once, through Faust's producer,
   which on the embedded broker must put every record in its own batch: measured, that
   producer was an eighth of the worker's time (`canonflow bench`), and it would send
   a state before the output it stands for.
2. Persisted offsets (`note_persisted`): what Faust's own changelog callback does for
   the records it sent, done for the ones the worker sent, so that a RocksDB store
   recovers from the right offset.
3. The current event (`acting_for`, `partition_stand_in`): Faust's stores find a key's
   partition from the task's current event. In a batch from `take_batches` that is the
   batch's last record, whatever partition the key belongs to; so before touching a
   session's entry the agent names the record it belongs to, by setting Faust's
   current-event variable (`faust.streams._current_event`, what the public
   `current_event()` reads) as Faust's own stream iteration does for every record. A
   write no record carries (the idle scan's) names a stand-in of its partition.
4. Acknowledgements held back (`hold_unacknowledged`, `forget_unacknowledged`,
   `hold_ack`, `release_acks`): the agents' batch generator (`take_batches`, 9, as
   Faust's `take_events`) acknowledges a batch in a `finally` when it is closed; an
   agent that stops (or crashes) inside an undelivered batch must not have it
   acknowledged (it is read again after a restart), so its generator is kept from
   being finalized. And a delivered batch's states go with the next delivery
   (pipeline.worker.owed): its records keep one reference each until then, so that
   the batch's acknowledgement does not commit them. And Faust's shutdown waits for
   every record it handed out to be acknowledged: an agent that gives up its batch as
   the worker stops takes its records off that list, or SIGTERM would never be
   honoured.
5. Table recovery (`Recovery`, `TableManager`): two corrections, without which a
   restarted worker can lose raw records and a broker that lost its changelogs stops
   the worker for good (see `Recovery`).
6. The consumer's fetch wait (`tune_consumer`): Faust's aiokafka driver asks the
   broker for records with a fixed fetch_max_wait_ms of 1500. A broker that answers a
   fetch only when that wait is over, even when records arrived meanwhile (the
   embedded Tansu: measured, a record produced 0.4 s after a fetch began was read
   1.2 s after its production), holds every record of a live session up to 1.5 s
   (`canonflow bench --latency`: p50 387 ms, p99 1.4 s at 100 messages/s). Kafka
   answers as soon as a record arrives, so there the wait only spaces the fetches of
   an idle worker.
7. The consumer's assignment (`tune_consumer`, `AssignmentCache`): Faust's driver
   converts the consumer's whole assignment to its own partition type every time it
   is asked, and its offset commit asks once per offset: quadratic in the partitions,
   34-38 ms of the consumer thread at every commit with this worker's 420 partitions.
   It is converted once per assignment instead.
8. Paused changelogs (`tune_consumer`, `set_fetching`): Faust pauses a partition only
   in its own books. aiokafka goes on fetching it, and keeps what it fetched until
   Faust asks for that partition (never, for an active table's changelog after its
   recovery). So every fetch of the worker named every table changelog partition it
   had not yet fetched records from (327-357 partitions in a fetch instead of 133,
   measured in `canonflow bench --latency`), and the records the worker wrote itself
   were fetched back and held. The changelog partitions are paused and resumed in
   aiokafka too, as Faust pauses and resumes them.
9. Batches that wait for their first record (`take_batches`): Faust's `take_events`
   wakes every `within` seconds whether or not a record came, three tasks a wake-up
   (mode's `wait_first`). With a 10 ms window and eleven agents, an idle worker's event
   loop woke 1,100 times a second: measured, 200 ticks of CPU in 20 s (a tenth of a
   core) against 9 with the window at 1 s. `take_batches` hands out the same batches,
   acknowledged the same way, but an empty batch waits for its first record with no
   timer, and a batch waits at most `within` after its first record joined it. The
   records that come while the agent holds a batch join the next one when the agent
   asks for it, as with take_events, so a busy agent's batches stay as large.
10. A fetched record handed on without four tasks (`tune_consumer`, `run_until_it_waits`):
   Faust's consumer gives each fetched record to the conductor with
   `wait_first(callback(record), suspend_flow.wait())`, which makes four tasks (the
   callback, the flow's suspension, the consumer's stop and crash), waits for the
   first and cancels the other three: measured, 14% of the worker's main thread at one
   message per record (py-spy), where the callback itself almost never waits (it
   decodes the record and puts its event in the stream's queue). The callback now runs
   at once, in a copy of the context as a task would, until it completes or waits;
   only one that waits is raced against the flow's suspension, as before. Faust's
   tasks ran the callback's first step too, whatever the flow's state, so what runs
   is the same, one loop turn earlier.
11. A read position reset to the partition's start (`rewind`): when the broker made a
   source topic again below the position (pipeline.ops.progress), the position goes to
   the new log's start, and Faust's books of the partition are emptied as a revocation
   empties them: its committed and read offsets, its acknowledged offsets and gaps.
   Faust takes an acknowledgement below the committed offset for a copy and drops it,
   so with the old books the new log's records would never be committed, and Faust's
   shutdown would wait for them forever.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable, MutableMapping, Sequence
from typing import Any

from faust.streams import _current_event
from faust.types import TP

from topics.catalog import changelog_spec

log = logging.getLogger("canonflow")

#: A table entry to write: key, partition, value (None: delete), and the record (or
#: stand-in) whose partition the local store writes it to (None for a deletion).
Entry = tuple[bytes, int, "bytes | None", Any]
#: A changelog record for the output producer: (topic, value (None: a tombstone), key,
#: partition, timestamp ms).
ChangelogRecord = tuple[str, "bytes | None", bytes, int, None]


# ---- 1, 2: tables written in batches ------------------------------------------


def add_table(app: Any, settings: Any, name: str) -> Any:
    """The worker's table `name` (bytes keys and values, default None), co-partitioned
    with the raw topics, its changelog declared with the catalog's configuration
    (topics.catalog.changelog_spec: compacted, an explicit max.message.bytes)."""
    return app.Table(name, partitions=settings.partitions, key_type=bytes, value_type=bytes,
                     default=None,
                     extra_topic_configs=changelog_spec(settings.app_id, name).config())


def local(table: Any) -> MutableMapping[bytes, bytes]:
    """`table`'s local store. Reads see the current event's partition (`acting_for`),
    or every partition in a context without one; writes send no changelog record (the
    worker sends them: `write_entries`, `send_changelog`)."""
    return table.data  # type: ignore[no-any-return]


def local_size(table: Any) -> int:
    """Entries in `table`'s local store. Raises what the store raises when it is not
    open (no partition assigned yet)."""
    return len(table.data)


def changelog_name(table: Any) -> str:
    return table.changelog_topic.get_topic_name()  # type: ignore[no-any-return]


def write_entries(table: Any, entries: Iterable[Entry]) -> list[ChangelogRecord]:
    """Write each (key, partition, value, record) to `table`'s local store (None
    deletes); returns their changelog records (None: a tombstone), each in the
    changelog partition of the records it came from, for the caller to deliver. The
    record names the partition whose RocksDB database the entry goes to."""
    data = table.data
    topic = changelog_name(table)
    out: list[ChangelogRecord] = []
    for key, partition, value, record in entries:
        if value is None:
            data.pop(key, None)
        else:
            if record is not None:
                acting_for(record)
            data[key] = value
        out.append((topic, value, key, partition, None))
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


def send_changelog(table: Any, partition: int, key: bytes, value: bytes | None) -> None:
    """Write one entry (None: delete) to `table`'s local store, and send its changelog
    record to `partition` through Faust's producer (the fleet stage's tables, whose
    entries name their partition in their keys, not in a current event)."""
    if value is None:
        table.data.pop(key, None)
        table.send_changelog(partition, key, None, value_serializer="raw")
    else:
        table.data[key] = value
        table.send_changelog(partition, key, value)


# ---- 3: the current event -------------------------------------------------------


def acting_for(event: Any) -> None:
    """Make `event` the current event of this task (table partition = its partition)."""
    _current_event.set(weakref.ref(event))


class _StandIn:
    """What Faust's stores read of a current event: `event.message.partition`."""

    __slots__ = ("partition", "__weakref__")

    def __init__(self, partition: int):
        self.partition = partition

    @property
    def message(self) -> _StandIn:
        return self


def partition_stand_in(partition: int) -> Any:
    """A stand-in for a record of `partition`, for table writes no record carries (the
    idle scan's): pass it to `acting_for`, and keep it referenced while it acts."""
    return _StandIn(partition)


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
    message, for `release_acks` once what the batch owes is delivered (Owed)."""
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


# ---- 9: batches that wait for their first record ----------------------------------


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
    taken = asyncio.Event()  # the full batch was handed out: room again
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
                taken.clear()
                await stream.wait(taken)  # never more than max_ in a batch
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
                    taken.set()
    finally:
        stream.enable_acks = acks
        stream._processors.remove(add)
