"""`canonflow ship`: the sidecar that makes the runtimes' session files live.

It follows the homes and session files under its paths (discovery), reads what each
source gained since its checkpointed position (sources), and produces every new
native record, unchanged, to the runtime's transcript raw topic
(`agents.raw.<runtime>-transcript`), keyed by session, one record per line or row. A
line longer than that topic takes goes, in the same batch, as one dead letter to
`agents.deadletter` (its head, redacted, its size and hash); a source that is not a
regular file inside its root is one line on stderr, never read (pipeline.transcripts.roots).

Headers: `origin: agent`; `t: 0`, no capture time: a transcript row carries its own
(the adapters read it), and a time the shipper made up would differ between a live
shipper and `canonflow import` of the same file, and with it the events' ids;
`canonflow-ship: <shipper>:<batch>:<index>`, which a restarted shipper looks for
(checkpoint); `record-id: ship:<shipper>:<n>`, n increasing over the shipper's records,
so the worker translates a record once even if a produce retry sends it again. So a restarted shipper sends nothing twice and skips nothing, whether it
stopped (SIGTERM: the batch in flight is delivered first) or was killed.

Each poll costs one stat per followed file and one per directory on the FILES
patterns' paths (a directory is listed again only when its mtime moved); a file is
opened only when its size, mtime or inode moved. `--once` reads until nothing is left,
then exits: the backfill.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.cluster.admin import kafka_client_kwargs
from pipeline.privacy.redact import RedactionError, Redactor
from pipeline.settings import Settings
from pipeline.transcripts.checkpoint import Checkpoint, CheckpointError, Flying
from pipeline.transcripts.discovery import Found, Kind, Tree, locate
from pipeline.transcripts.sources import (
    NO_TIME,
    READ_LIMIT,
    Database,
    DbMark,
    DbState,
    FileMark,
    FileSource,
    FileState,
    SourceError,
    TooLong,
    long_line_letter,
)
from topics.catalog import DEADLETTER_TOPIC, raw_topic
from topics.records import (
    HEADER_ORIGIN,
    HEADER_RECORD,
    HEADER_TIME,
    DeadLetter,
    encode_deadletter,
)

HEADER_SHIP = "canonflow-ship"
#: Record ids a batch spans: its i-th record's `record-id` is `ship:<shipper>:<batch *
#: RECORDS_PER_BATCH + i>`, increasing over the shipper's records, as the worker's
#: producer marks need. A batch holds fewer (BATCH_BYTES of lines, two bytes at least).
RECORDS_PER_BATCH = 1 << 24
#: The most one batch carries; a source with more is read on at once, without a pause.
BATCH_BYTES = 8 * 1024 * 1024
#: Seconds between attempts to reach a broker or find the topics.
RETRY_SECONDS = 5.0
#: Seconds a restarted shipper reads its partitions back for a batch left in flight.
RECOVERY_SECONDS = 60.0


@dataclass
class Stats:
    """What the shipper did, for its log line and the tests."""

    polls: int = 0
    records: int = 0
    sessions: set[str] = field(default_factory=set)
    opened: int = 0  # sources read (their stat moved)
    last_poll_s: float = 0.0
    listed: int = 0  # directory listings read


@dataclass
class _Batch:
    values: list[tuple[str, str, bytes]] = field(default_factory=list)  # topic, key, value
    files: list[tuple[int, str, FileMark]] = field(default_factory=list)
    dbs: list[tuple[int, str, DbMark]] = field(default_factory=list)
    size: int = 0
    more: bool = False


class Shipper:
    """Follows `paths` and ships what they gain; the checkpoint keeps its place."""

    def __init__(self, settings: Settings, paths: list[str], checkpoint: Checkpoint,
                 kinds: list[Kind], missing: dict[str, str], *,
                 say: Callable[[str], None], interval: float = 1.0,
                 redact: Callable[[DeadLetter], DeadLetter] | None = None):
        self.settings, self.paths, self.cp = settings, paths, checkpoint
        self.kinds, self.missing, self.say, self.interval = kinds, missing, say, interval
        self.redact = redact  # a dead letter's value, as the worker redacts its own
        self.tree = Tree()
        self.files: dict[str, FileSource] = {}
        self.dbs: dict[str, Database] = {}
        self.stats = Stats()
        self.since: dict[str, dict[int, int]] = {}
        self._warned: dict[str, str] = {}
        self._turn = 0  # the source a poll starts from, so a busy one starves none
        self._dirty = False  # positions moved since the checkpoint was last written

    # -- reading -------------------------------------------------------------------

    def scan(self) -> None:
        """Add the sources that appeared under the paths (checkpointed ones resume)."""
        found = locate(self.paths, self.kinds, self.missing, tree=self.tree)
        for f in found.found:
            self._add(f)
        for line in found.errors:
            self._warn("scan:" + line.split(":")[0], line)

    def _add(self, f: Found) -> None:
        st = self.cp.state
        if f.db and f.path not in self.dbs:
            self.dbs[f.path] = Database(f.path, f.kind, st.dbs.setdefault(f.path, DbState()),
                                        root=f.root or None)
        elif not f.db and f.path not in self.files:
            self.files[f.path] = FileSource(f.path, f.kind,
                                            st.files.setdefault(f.path, FileState()),
                                            root=f.root or None)

    def poll(self) -> _Batch:
        """One pass over the sources: the records they gained, up to BATCH_BYTES."""
        t0 = time.perf_counter()
        listed = self.tree.listed
        self.scan()
        batch = _Batch()
        sources: list[Any] = [*self.files.values(), *self.dbs.values()]
        n = len(sources)
        for k in range(n):
            src = sources[(self._turn + k) % n]
            if batch.size >= BATCH_BYTES:
                batch.more = True
                self._turn = (self._turn + k) % n
                break
            self._read(src, batch)
        self.stats.polls += 1
        self.stats.listed += self.tree.listed - listed
        self.stats.last_poll_s = time.perf_counter() - t0
        return batch

    def _read(self, src: Any, batch: _Batch) -> None:
        try:
            if not src.changed():
                return
            reading = src.read(limit=min(READ_LIMIT, BATCH_BYTES - batch.size + 1))
        except FileNotFoundError:
            self._forget(src)
            return
        except (OSError, SourceError) as e:
            self._warn(src.path, f"{src.path}: {e}" if isinstance(e, OSError) else str(e))
            return
        self._warned.pop(src.path, None)
        self.stats.opened += 1
        if reading.rewritten:
            self.say(f"canonflow ship: {src.path}: {reading.rewritten}; shipping it again "
                     "from its start (the adapter drops what it already published)")
        topic = raw_topic(src.kind.provider)
        marks = batch.dbs if isinstance(src, Database) else batch.files
        last = -1  # this source's last record in the batch
        for session, value, mark in reading.records:
            if isinstance(value, TooLong):  # more than its topic takes: one dead letter
                letter = long_line_letter(src.kind, src.path, session, mark.pos - value.raw_size,
                                          value, self.redact)
                value = encode_deadletter(letter)
                self.say(f"canonflow ship: {letter.reason}; its dead letter goes to "
                         f"{DEADLETTER_TOPIC}")
                batch.values.append((DEADLETTER_TOPIC, session, value))
                batch.size += len(value)
                last = len(batch.values) - 1
            elif value is not None:
                batch.values.append((topic, session, value))
                batch.size += len(value)
                last = len(batch.values) - 1
            # a mark without a record moves the position only: committed with the
            # source's record before it (at once when there is none)
            marks.append((last, src.path, mark))
        batch.more = batch.more or reading.more

    def _forget(self, src: Any) -> None:
        """A source that vanished: its position goes too (a new file there starts over)."""
        if isinstance(src, Database):
            src.close()
            self.dbs.pop(src.path, None)
            self.cp.forget_db(src.path)
        else:
            self.files.pop(src.path, None)
            self.cp.forget_file(src.path)

    def _warn(self, key: str, line: str) -> None:
        if self._warned.get(key) != line:  # once per source and reason, not every poll
            self._warned[key] = line
            self.say(f"canonflow ship: {line}")

    def unfinished(self) -> list[str]:
        """Files whose last line is not finished (not shipped): for `--once`'s report."""
        out = []
        for src in self.files.values():
            if src.path in self._warned:  # not read (refused, unreadable): said already
                continue
            try:
                size = os.stat(src.path).st_size
            except OSError:
                continue
            if size > src.state.pos:
                out.append(f"{src.path}: its last {size - src.state.pos} bytes are not a "
                           "finished line yet: not shipped")
        return out

    # -- sending -------------------------------------------------------------------

    async def run(self, *, once: bool = False, stop: asyncio.Event | None = None) -> Stats:
        """Ship until `stop` is set (or, with `once`, until nothing is left)."""
        from aiokafka import AIOKafkaProducer

        stop = stop or asyncio.Event()
        kw = kafka_client_kwargs(self.settings)
        if self.settings.producer_max_batch_size:  # the embedded broker: exact offsets
            kw["max_batch_size"] = self.settings.producer_max_batch_size
        producer = AIOKafkaProducer(**kw, acks="all")
        if not await self._until_started(producer, stop):
            return self.stats
        try:
            if not await self._partitions(stop, producer) or not await self.settle(stop):
                return self.stats
            while not stop.is_set():
                batch = await asyncio.to_thread(self.poll)
                if batch.values or batch.files or batch.dbs:
                    await self._send(producer, batch, stop)
                elif self._dirty:
                    self._save()
                if batch.more or (once and batch.values):
                    continue
                if once or await _stopped(stop, self.interval):
                    break
            self._save(whole=True)  # at rest, the checkpoint is one file again
        finally:
            await producer.stop()
            for db in self.dbs.values():
                db.close()
        return self.stats

    def _save(self, *, whole: bool = False) -> None:
        self.cp.save(whole=whole)
        self._dirty = False

    async def _send(self, producer: Any, batch: _Batch, stop: asyncio.Event) -> None:
        st = self.cp.state
        number = st.batch + 1
        if batch.values:  # positions only (blank lines, stats) need no flight record
            st.flying = Flying(batch=number, since={t: dict(p) for t, p in self.since.items()},
                               files=batch.files, dbs=batch.dbs)
            self._save()
        prefix = f"{st.shipper}:{number}:"
        first = number * RECORDS_PER_BATCH  # the batch's records' ids (HEADER_RECORD)
        try:
            futures = [await producer.send(
                topic, value, key=key.encode(), headers=[
                    (HEADER_ORIGIN, b"agent"), (HEADER_TIME, b"%d" % NO_TIME),
                    (HEADER_SHIP, f"{prefix}{i}".encode()),
                    (HEADER_RECORD, f"ship:{st.shipper}:{first + i}".encode())])
                for i, (topic, key, value) in enumerate(batch.values)]
            delivered = await asyncio.gather(*futures)
        except Exception as e:  # noqa: BLE001 - a failed send: find out what arrived
            self.say(f"canonflow ship: sending failed ({type(e).__name__}: {e}); looking up "
                     "what was delivered, then reading on from there")
            await self.settle(stop)
            return
        for md in delivered:
            parts = self.since.setdefault(md.topic, {})
            parts[md.partition] = max(parts.get(md.partition, 0), md.offset + 1)
        self._commit(batch.files, batch.dbs, set(range(len(batch.values))))
        st.flying, st.batch = None, number
        self.stats.records += sum(t != DEADLETTER_TOPIC for t, _, _ in batch.values)
        self.stats.sessions.update(key for t, key, _ in batch.values if t != DEADLETTER_TOPIC)
        self._dirty = True

    def _commit(self, files: list[tuple[int, str, FileMark]],
                dbs: list[tuple[int, str, DbMark]], delivered: set[int]) -> None:
        """Apply the marks of delivered records (and the position-only marks that
        follow a delivered record, or none, of their source)."""
        cp = self.cp
        stopped: set[str] = set()
        for i, path, fmark in files:  # one session per file: its records arrive in order
            if path in stopped:
                continue
            if i >= 0 and i not in delivered:
                stopped.add(path)
                continue
            cp.apply_file(path, fmark)
        incomplete = {path for i, path, m in dbs if m.session is not None and i not in delivered}
        for i, path, dmark in dbs:  # sessions go to several partitions: each on its own
            if dmark.session is not None and i in delivered or \
                    dmark.session is None and path not in incomplete:
                cp.apply_db(path, dmark)

    async def _until_started(self, producer: Any, stop: asyncio.Event) -> bool:
        """Start the producer, waiting for a broker that does not answer yet (a sidecar
        may start before its cluster); False when stopped first."""
        return await self._retrying(
            producer.start, stop,
            lambda e: f"broker {self.settings.broker} not reachable ({type(e).__name__})")

    async def _retrying(self, attempt: Callable[[], Awaitable[Any]], stop: asyncio.Event,
                        failed: Callable[[Exception], str]) -> bool:
        """Await `attempt()` until it succeeds, saying each failure and waiting
        RETRY_SECONDS between them; False when stopped first."""
        while True:
            try:
                await attempt()
                return True
            except Exception as e:  # noqa: BLE001 - the cluster is away: wait, again
                self.say(f"canonflow ship: {failed(e)}; trying again in {RETRY_SECONDS:.0f} s")
                if await _stopped(stop, RETRY_SECONDS):
                    return False

    async def _partitions(self, stop: asyncio.Event, producer: Any) -> bool:
        """Every partition of the transcript topics, from its current end (a lower bound
        of where this run's records land). Waits for topics that do not exist yet;
        False when stopped first.

        The partitions come from `producer` (a metadata request naming the topic): a
        consumer that has asked for no topic knows none (Kafka answers its first
        metadata request, for no topic, with none; the embedded Tansu with all)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(**kafka_client_kwargs(self.settings), group_id=None,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            # the dead-letter topic too: a line too long to ship is sent there
            topics = [*(raw_topic(k.provider) for k in self.kinds), DEADLETTER_TOPIC]
            while True:
                existing = await consumer.topics()
                absent = [t for t in topics if t not in existing]
                if not absent:
                    break
                self.say(f"canonflow ship: waiting for topics {', '.join(absent)} "
                         "(`canonflow topics create`, or a worker, creates them)")
                if await _stopped(stop, RETRY_SECONDS):
                    return False
            tps = [TopicPartition(t, p) for t in topics
                   for p in sorted(await producer.partitions_for(t))]
            ends = await consumer.end_offsets(tps)
            for tp, end in ends.items():
                self.since.setdefault(tp.topic, {})[tp.partition] = end
        finally:
            await consumer.stop()
        return True

    async def settle(self, stop: asyncio.Event) -> bool:
        """Recover a batch left in flight, trying again while the cluster does not
        answer; False when stopped first (the batch stays in flight in the checkpoint,
        for the next start)."""
        return await self._retrying(
            self.recover, stop,
            lambda e: f"cannot read back the batch in flight ({type(e).__name__}: {e})")

    async def recover(self) -> None:
        """Settle a batch left in flight by a crash or a failed send: commit the marks of
        the records that reached the cluster, so the rest is read and sent again."""
        flying = self.cp.state.flying
        if flying is None:
            return
        delivered = await self._delivered(flying)
        self._commit(flying.files, flying.dbs, delivered)
        total = len({i for i, _, _ in [*flying.files, *flying.dbs] if i >= 0})
        self.say(f"canonflow ship: batch {flying.batch} was in flight: {len(delivered)} of "
                 f"its {total} records had arrived; the rest is sent again")
        self.cp.state.flying, self.cp.state.batch = None, flying.batch
        self._save()

    async def _delivered(self, flying: Flying) -> set[int]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(**kafka_client_kwargs(self.settings), group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        found: set[int] = set()
        prefix = f"{self.cp.state.shipper}:{flying.batch}:".encode()
        try:
            tps = [TopicPartition(t, p) for t, parts in flying.since.items() for p in parts]
            ends = await consumer.end_offsets(tps)
            todo = {tp: end for tp, end in ends.items()
                    if flying.since[tp.topic][tp.partition] < end}
            consumer.assign(list(todo))
            for tp in todo:
                consumer.seek(tp, flying.since[tp.topic][tp.partition])
            deadline = time.monotonic() + RECOVERY_SECONDS
            while todo:
                if time.monotonic() > deadline:  # sent again rather than perhaps lost
                    self.say(f"canonflow ship: could not read {sorted(map(str, todo))} to its "
                             f"end in {RECOVERY_SECONDS:.0f} s; their records are sent again")
                    break
                got = await consumer.getmany(timeout_ms=1000)
                for records in got.values():
                    for rec in records:
                        for k, v in rec.headers or ():
                            if k == HEADER_SHIP and v.startswith(prefix):
                                found.add(int(v[len(prefix):]))
                for tp in list(todo):
                    if await consumer.position(tp) >= todo[tp]:
                        del todo[tp]
        finally:
            await consumer.stop()
        return found


async def _stopped(stop: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except TimeoutError:
        return False


def ship(settings: Settings, paths: list[str], *, checkpoint: str, runtime: str | None = None,
         once: bool = False, interval: float = 1.0,
         say: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> int:
    """Run the shipper until SIGINT/SIGTERM (or, with `once`, until nothing is left);
    returns the exit status (1: the checkpoint is held or unreadable, or the named
    runtime has no adapter)."""
    from pipeline.transcripts.discovery import load_kinds

    kinds, missing = load_kinds(runtime)
    if runtime is not None and runtime in missing:
        say(f"canonflow ship: {missing[runtime]}")
        return 1
    for why in missing.values():
        say(f"canonflow ship: not followed: {why}")
    try:
        redactor = Redactor.from_env()
    except RedactionError as e:
        say(f"canonflow ship: {e}")
        return 1
    try:
        cp = Checkpoint(checkpoint).open()
    except CheckpointError as e:
        say(f"canonflow ship: {e}")
        return 1
    try:
        shipper = Shipper(settings, paths, cp, kinds, missing, say=say, interval=interval,
                          redact=redactor.dead_letter)
        stats = asyncio.run(_main(shipper, once))
    finally:
        cp.close()
    say(f"canonflow ship: {stats.records} record(s) of {len(stats.sessions)} session(s) -> "
        f"{settings.broker} ({len(shipper.files)} file(s), {len(shipper.dbs)} database(s) "
        f"followed; checkpoint {checkpoint})")
    if once:
        for line in shipper.unfinished():
            say(f"canonflow ship: {line}")
    return 0


async def _main(shipper: Shipper, once: bool) -> Stats:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return await shipper.run(once=once, stop=stop)
