"""Fault-injection helpers (issue 8): a timed multi-session, multi-provider workload
with its offline oracle, a paced producer and an output observer that keep running
while workers are killed, and the check every fault test ends with (dedupe by
eventId, then exact equality with the offline replay).

Why an empty broker per test (`own_broker`, tests.pipeline.brokers: a Tansu of its
own, or Kafka with every topic deleted): a broker that kept every raw record of every
earlier test would have a new consumer group read the raw topics from the beginning,
so a fault test would re-translate (and time) the whole suite's input, e.g. the
100,000 sessions of test_bounded_state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from adapters import Line, MemorySpool, get, new_session, split_lines, translate_record
from pipeline.privacy.redact import Redactor
from pipeline.settings import Settings
from pipeline.tools.bench_workload import Session as BenchSession
from pipeline.tools.bench_workload import build_workload, records_of
from pipeline.tools.kafka_io import RawRecord
from pipeline.tools.replay import ChatView
from pipeline.worker.process import WorkerProcess, ensure_topics
from tests.pipeline.brokers import TEST_REBALANCE_TIMEOUT, Broker, fresh_broker, on_broker
from topics.canonical import decode_event
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, raw_topic
from topics.chat import encode_chat

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
#: Capture time of the first line of the first session; every line gets an explicit
#: time so the worker (which reads the `t` header) and the replay agree on createdAt
#: and on the eventId epoch.
BASE_T = 1_764_000_000_000
OUTPUT_TOPICS = [CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC]


def own_broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker with nothing on it (see the module docstring; tests.pipeline.brokers
    says which). A test module uses it in place of conftest's with
    `broker = pytest.fixture(name="broker")(own_broker)`."""
    with fresh_broker(tmp_path) as b:
        yield b


@contextlib.contextmanager
def scenario(tmp: Path, app_id: str = "faults") -> Iterator[tuple[Settings, Workers]]:
    """A broker of its own, settings like conftest's (4 partitions, web off, info logs so
    that tests can watch a worker's progress) and a Workers registry; for module-scoped
    fixtures, which cannot use conftest's function-scoped ones. Stops everything."""
    with fresh_broker(tmp) as b:
        s = Settings(app_id=app_id, partitions=4, web_enabled=False, data_dir=str(tmp / "data"),
                     log_level="info", rebalance_timeout=TEST_REBALANCE_TIMEOUT)
        s = on_broker(s, b)
        ensure_topics(s)
        workers = Workers(tmp)
        try:
            yield s, workers
        finally:
            workers.stop_all()


# ---------------------------------------------------------------------------
# The workload and its oracle
# ---------------------------------------------------------------------------


class Work:
    """One session of the workload: its provider, id and raw records, in order."""

    __slots__ = ("provider", "session_id", "records")

    def __init__(self, provider: str, session_id: str, records: list[RawRecord]):
        self.provider, self.session_id, self.records = provider, session_id, records

    @property
    def messages(self) -> int:
        return sum(len(split_lines(r.value)) for r in self.records)


def workload(messages: int, *, prefix: str, batched_every: int = 3, batch: int = 6
             ) -> list[Work]:
    """Copies of every captured conversation (all providers) as distinct sessions, at
    least `messages` native messages in all. Every line gets an explicit capture time;
    every `batched_every`-th session is produced with up to `batch` lines per record
    (one record carries one time, its first line's, for all its lines), the others
    with one native message per record."""
    out: list[Work] = []
    for i, s in enumerate(build_workload(CAPTURED, messages)):
        timed = BenchSession(s.provider, f"{prefix}-{s.session_id}",
                             [Line(ln.data, ln.origin, BASE_T + 1_000_000 * i + 10 * n)
                              for n, ln in enumerate(s.lines)])
        size = batch if batched_every and i % batched_every == batched_every - 1 else 1
        out.append(Work(s.provider, timed.session_id, records_of(timed, size)))
    return out


def long_output_session(prefix: str, deltas: int = 300, size: int = 1024) -> Work:
    """A Codex app-server session whose command prints `deltas` x `size` characters as
    output deltas, one native message per record, and completes without
    `aggregatedOutput` (as Codex may): its item.completed output is the spooled deltas,
    pending in the items table for as long as the command runs."""
    path = CAPTURED / "codex" / "codex-app-server__tool_shell.capture.jsonl"
    lines: list[tuple[str, dict[str, Any]]] = []
    for raw in path.read_bytes().splitlines():
        cap = json.loads(raw)
        msg, params = cap["msg"], cap["msg"].get("params") or {}
        item = params.get("item") or {}
        if msg.get("method") == "item/completed" and item.get("type") == "commandExecution":
            for k in range(deltas):
                chunk = f"{k:06d} " + "o" * (size - 8) + "\n"
                lines.append(("agent", {"method": "item/commandExecution/outputDelta", "params": {
                    "threadId": params["threadId"], "turnId": params["turnId"],
                    "itemId": item["id"], "delta": chunk}}))
            item["aggregatedOutput"] = None
        lines.append((cap["origin"], msg))
    records = [RawRecord(json.dumps(m, separators=(",", ":")).encode(), origin,  # type: ignore[arg-type]
                         BASE_T + 10 * n) for n, (origin, m) in enumerate(lines)]
    return Work("codex", f"{prefix}-long-output", records)


def interleave(work: list[Work]) -> list[tuple[str, bytes, RawRecord]]:
    """(topic, key, record) for every record, sessions round-robin (as a fleet writes)."""
    items: list[tuple[str, bytes, RawRecord]] = []
    depth = max(len(w.records) for w in work)
    for i in range(depth):
        for w in work:
            if i < len(w.records):
                items.append((raw_topic(w.provider), w.session_id.encode(), w.records[i]))
    return items


def replay_record(provider: str, session: Any, session_id: str, record: RawRecord,
                  offset: int, spool: MemorySpool) -> tuple[Any, list[bytes], int]:
    """One raw record through the offline driver, as the worker splits it: every line
    carries the record's origin and time; the session's pending text and output are in
    `spool`. Returns (session, encoded events, failures)."""
    lines = [Line(d, record.origin, record.t) for d in split_lines(record.value)]  # type: ignore[arg-type]
    session, events, failures = translate_record(get(provider), session, session_id, lines,
                                                 offset=offset, spool=spool,
                                                 hold=_REDACTOR.hold)
    return session, [_PUBLISH(e)[0] for e in events], len(failures)


# what the worker publishes: the events redacted (CANONFLOW_REDACT, as in the workers'
# env), the deltas' possible secret starts held back as the worker holds them
_REDACTOR = Redactor.from_env()
_PUBLISH = _REDACTOR.publisher()


def expected_canonical(work: list[Work]) -> dict[str, list[dict[str, Any]]]:
    """The offline replay of every session, record by record: its canonical events."""
    out: dict[str, list[dict[str, Any]]] = {}
    for w in work:
        session, spool = new_session(get(w.provider)), MemorySpool()
        events: list[dict[str, Any]] = []
        for n, r in enumerate(w.records):
            session, evs, failed = replay_record(w.provider, session, w.session_id, r, n, spool)
            assert failed == 0, f"{w.session_id} record {n} does not translate offline"
            events += [json.loads(e) for e in evs]
        out[w.session_id] = events
    return out


def expected_chat(canonical: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """pipeline.tools.replay.ChatView over the expected canonical events of each session."""
    out: dict[str, list[dict[str, Any]]] = {}
    for sid, events in canonical.items():
        view = ChatView()
        out[sid] = [json.loads(encode_chat(r)) for e in events
                    for r in view.feed(decode_event(json.dumps(e)))]
    return out


def total(expected: dict[str, list[Any]]) -> int:
    return sum(len(v) for v in expected.values())


# ---------------------------------------------------------------------------
# Producing and observing while workers come and go
# ---------------------------------------------------------------------------


class Producer:
    """Sends (topic, key, record) items in chunks, `pause` seconds apart, so that a
    workload is still arriving while workers are killed. `sent` counts acknowledged
    records."""

    def __init__(self, settings: Settings, items: list[tuple[str, bytes, RawRecord]], *,
                 chunk: int = 100, pause: float = 0.2):
        self.settings, self.items, self.chunk, self.pause = settings, items, chunk, pause
        self.sent = 0

    async def run(self) -> None:
        from aiokafka import AIOKafkaProducer

        from pipeline.cluster.admin import kafka_client_kwargs

        producer = AIOKafkaProducer(**kafka_client_kwargs(self.settings), acks="all",
                                    linger_ms=5)
        await producer.start()
        try:
            for start in range(0, len(self.items), self.chunk):
                futures = [await producer.send(topic, r.value, key=key, headers=r.headers(),
                                               timestamp_ms=r.t)
                           for topic, key, r in self.items[start:start + self.chunk]]
                await asyncio.gather(*futures)
                self.sent += len(futures)
                await asyncio.sleep(self.pause)
        finally:
            await producer.stop()

    @property
    def done(self) -> bool:
        return self.sent >= len(self.items)


async def produce_records(settings: Settings, items: list[tuple[str, bytes | None, RawRecord]]
                          ) -> list[Any]:
    """Send every (topic, key, record) in order, one at a time so that they keep their
    order whatever their keys; returns their RecordMetadata (partition, offset)."""
    from aiokafka import AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
    await producer.start()
    try:
        return [await producer.send_and_wait(topic, r.value, key=key, headers=r.headers(),
                                             timestamp_ms=r.t)
                for topic, key, r in items]
    finally:
        await producer.stop()


class Observer:
    """Reads the output topics from the beginning, for the whole test, keeping every
    record (duplicates included) in arrival order per topic, and when each canonical
    record came (`came`). `options` go to its consumer."""

    def __init__(self, settings: Settings, topics: list[str] | None = None, **options: Any):
        self.settings = settings
        self.topics = topics or OUTPUT_TOPICS
        self.options = options
        self.records: dict[str, list[Any]] = {t: [] for t in self.topics}
        self.came: list[float] = []  # arrival time of each canonical record
        self._ids: dict[str, set[str]] = {CANONICAL_TOPIC: set(), CHAT_TOPIC: set()}
        self._task: asyncio.Task[None] | None = None
        self._stop = False

    def unique(self, topic: str) -> int:
        """Distinct event ids seen on the canonical or chat topic."""
        return len(self._ids[topic])

    async def start(self) -> Observer:
        from aiokafka import AIOKafkaConsumer

        from pipeline.cluster.admin import kafka_client_kwargs

        consumer = AIOKafkaConsumer(*self.topics, **kafka_client_kwargs(self.settings),
                                    group_id=None, auto_offset_reset="earliest",
                                    enable_auto_commit=False, metadata_max_age_ms=1000,
                                    fetch_max_bytes=50 * 1024 * 1024, **self.options)
        await consumer.start()

        async def loop() -> None:
            try:
                while not self._stop:
                    batch = await consumer.getmany(timeout_ms=100, max_records=20_000)
                    now = time.monotonic()
                    for tp, recs in batch.items():
                        self.records[tp.topic].extend(recs)
                        if tp.topic == CANONICAL_TOPIC:
                            self.came.extend([now] * len(recs))
                        ids = self._ids.get(tp.topic)
                        if ids is not None:
                            field = "eventId" if tp.topic == CANONICAL_TOPIC else "event_id"
                            ids.update(json.loads(r.value)[field] for r in recs)
            finally:
                await consumer.stop()

        self._task = asyncio.ensure_future(loop())
        return self

    async def stop(self) -> None:
        self._stop = True
        if self._task is not None:
            await self._task

    async def wait_for(self, done: Callable[[], bool], *, timeout: float,
                       alive: Callable[[], bool] | None = None, what: str = "") -> None:
        """Wait until done(); raises AssertionError on timeout or when `alive()` fails."""
        deadline = time.monotonic() + timeout
        while not done():
            if alive is not None and not alive():
                raise AssertionError(f"the worker died while waiting for {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: "
                                     f"canonical {self.unique(CANONICAL_TOPIC)} unique, "
                                     f"chat {self.unique(CHAT_TOPIC)} unique")
            await asyncio.sleep(0.02)


async def wait_for_log(path: str, marker: str, *, timeout: float,
                       alive: Callable[[], bool] | None = None) -> bool:
    """Poll a worker's log until `marker` appears; False on timeout or when the worker
    exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as fh:
                if marker.encode() in fh.read():
                    return True
        except FileNotFoundError:
            pass
        if alive is not None and not alive():
            return False
        await asyncio.sleep(0.01)
    return False


_ASSIGNED = "Setting newly assigned partitions"
_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*\{([^}]*)\}\s*\|")


def assigned(log_path: str | None, topic: str) -> set[int] | None:
    """The partitions of `topic` in the worker's latest assignment (Faust logs the table
    at info level), or None before its first assignment."""
    try:
        text = Path(str(log_path)).read_text(errors="replace")
    except FileNotFoundError:
        return None
    at = text.rfind(_ASSIGNED)
    if at < 0:
        return None
    parts: set[int] = set()
    for line in text[at:].splitlines()[1:]:
        if line.startswith("+") and "for group" in line:
            break
        m = _ROW.match(line)
        if m and m.group(1) == topic:
            for piece in m.group(2).split(","):
                lo, _, hi = piece.strip().partition("-")
                if lo:
                    parts.update(range(int(lo), int(hi or lo) + 1))
    return parts


class Workers:
    """Every worker process a test starts, so that all are stopped (by PID) at the end
    whatever happens."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.started: list[WorkerProcess] = []

    def start(self, settings: Settings, name: str, env: dict[str, str] | None = None
              ) -> WorkerProcess:
        log = str(self.tmp_path / f"{name}-{len(self.started)}.log")
        w = WorkerProcess(settings, log_path=log, env=env).start()
        self.started.append(w)
        return w

    def stop_all(self) -> None:
        for w in self.started:
            if w.alive():
                w.kill()


def entry_type(table: str) -> Any:
    """The stored value type of a `sessions.<provider>` table."""
    from adapters import get
    from pipeline.worker.normalize import SessionEntry

    return SessionEntry[get(table[len("sessions."):]).state_type]  # type: ignore[misc]


async def stored_state(settings: Settings) -> dict[tuple[str, str], dict[str, Any]]:
    """The live entries of every table of the app, read from their changelogs:
    (table, session) -> the decoded Session (seq, watermark, partition, ...), and
    ("chat", session) -> the chat projection's state held in the same entry. Only
    while no worker runs, so that nothing is still being written."""
    import msgspec
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

    from pipeline.cluster.admin import kafka_client_kwargs

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
    await admin.start()
    try:
        names = [t for t in await admin.list_topics()
                 if t.startswith(settings.app_id + "-") and t.endswith("-changelog")]
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(*names, **kafka_client_kwargs(settings), group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    idle = 0
    try:
        while idle < 5:
            batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
            idle = 0 if batch else idle + 1
            for tp, recs in batch.items():
                table = tp.topic[len(settings.app_id) + 1:-len("-changelog")]
                for r in recs:
                    if r.value is None:
                        out.pop((table, r.key.decode()), None)
                        out.pop(("chat", r.key.decode()), None)
                    elif table.startswith("sessions."):
                        # a SessionEntry: the session and the chat projection's state
                        entry = msgspec.msgpack.decode(r.value, type=entry_type(table))
                        out[(table, r.key.decode())] = msgspec.structs.asdict(entry.session)
                        if entry.chat is None:
                            out.pop(("chat", r.key.decode()), None)
                        else:
                            out[("chat", r.key.decode())] = msgspec.structs.asdict(entry.chat)
                    elif table.startswith("items."):
                        # a spooled chunk (UTF-8 text), keyed session \0 stream \0 n
                        out[(table, r.key.decode("utf-8", "surrogatepass"))] = {
                            "chunk": r.value.decode("utf-8", "surrogatepass")}
                    else:
                        out[(table, r.key.decode())] = msgspec.msgpack.decode(r.value)
    finally:
        await consumer.stop()
    return out


async def committed(settings: Settings, topics: list[str]) -> dict[tuple[str, int], int]:
    """The app's committed offsets on `topics`: (topic, partition) -> next offset to
    read. (A consumer of the group that never joins it: aiokafka's admin client cannot
    decode Tansu's OffsetFetch answer.)"""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from pipeline.cluster.admin import kafka_client_kwargs

    consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=settings.app_id,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        out: dict[tuple[str, int], int] = {}
        for topic in topics:
            for p in range(settings.partitions):
                offset = await consumer.committed(TopicPartition(topic, p))
                if offset is not None:
                    out[(topic, p)] = offset
        return out
    finally:
        await consumer.stop()


# ---------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------


class Deduped:
    """Output records grouped by session in arrival order, first occurrence of each id
    kept. `duplicates` counts the records dropped; `conflicts` lists ids that came
    again with different content (a crash must replay identical events)."""

    def __init__(self, records: list[Any], id_field: str):
        self.sessions: dict[str, list[dict[str, Any]]] = {}
        self.duplicates = 0
        self.conflicts: list[str] = []
        seen: dict[str, bytes] = {}
        for rec in records:
            obj = json.loads(rec.value)
            eid = obj[id_field]
            if eid in seen:
                self.duplicates += 1
                if seen[eid] != rec.value:
                    self.conflicts.append(eid)
                continue
            seen[eid] = rec.value
            self.sessions.setdefault(rec.key.decode(), []).append(obj)


def assert_same(got: Deduped, expected: dict[str, list[dict[str, Any]]], what: str,
                seq_field: str = "seq") -> None:
    """After dedupe, each session holds exactly the expected records: nothing lost,
    nothing extra, nothing reordered, `seq` gapless from 1, no id with two contents."""
    assert not got.conflicts, (f"{what}: {len(got.conflicts)} ids published twice with "
                               f"different content, e.g. {got.conflicts[:3]}")
    missing = sorted(set(expected) - set(got.sessions))
    extra = sorted(set(got.sessions) - set(expected))
    assert not missing and not extra, f"{what}: sessions missing {missing[:5]}, extra {extra[:5]}"
    bad = [sid for sid, want in expected.items() if got.sessions[sid] != want]
    if bad:
        sid = bad[0]
        have, want = got.sessions[sid], expected[sid]
        first = next((i for i, (a, b) in enumerate(zip(have, want, strict=False)) if a != b),
                     min(len(have), len(want)))
        raise AssertionError(
            f"{what}: {len(bad)} of {len(expected)} sessions differ from the offline replay; "
            f"{sid}: {len(have)} records, expected {len(want)}; first difference at #{first}:\n"
            f"  got      {have[first] if first < len(have) else None}\n"
            f"  expected {want[first] if first < len(want) else None}")
    for sid, recs in got.sessions.items():
        assert [r[seq_field] for r in recs] == list(range(1, len(recs) + 1)), sid
