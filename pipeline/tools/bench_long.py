"""`canonflow bench --long`: what one long session costs, per provider and size.

The sessions (pipeline.tools.bench_long_sessions) are real captured conversations whose
final answer and shell command output were made long (64 KiB, 1 MiB, 8 MiB), streamed
one native message per record the way the runtime streams them.

Every generated session is checked offline through `canonflow replay`'s Replayer: no
dead letter, the answer's deltas join to the intended answer, the command's output is
the intended output.

Then each session runs alone through the real worker (a fresh embedded broker,
`canonflow run` as a child process with the default settings but `batch_max=1`, so every
record is its own batch and rewrites its session's table value: the pace of a live
session, the worst case; only the session's provider, no web server). The worker first
translates the unpatched capture (a warm-up, under another key), so the session's time
does not include the worker's start. Measured per session: changelog bytes (the session's records
in this app's `sessions.<provider>` and `items.<provider>` changelogs), canonical and
chat bytes, each per native byte; the largest table value written; the worker's peak
RSS; the seconds from the first record produced to the last canonical event observed.
The canonical events are checked against the offline replay, event by event.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from adapters import Line
from pipeline.privacy.redact import Redactor
from pipeline.settings import Settings
from pipeline.tools.bench_kafka import BenchError, changelogs, fresh_broker, rss_mb, scratch_dir
from pipeline.tools.bench_long_sessions import (
    CHUNK,
    WHOLE_MAX,
    LongSession,
    captured_lines,
    long_session,
    size_label,
)
from pipeline.tools.bench_workload import timeless
from pipeline.tools.kafka_io import RawRecord
from pipeline.tools.replay import ChatView, Replayer
from pipeline.worker.process import WorkerProcess, ensure_topics
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, raw_topic
from topics.chat import encode_chat

#: The default sizes of the answer and of the command output.
SIZES: tuple[int, ...] = (64 * 1024, 1024 * 1024, 8 * 1024 * 1024)
LONG_PROVIDERS: tuple[str, ...] = ("codex", "claude", "opencode", "acp")
#: Targets shown beside each figure.
TARGETS: dict[str, float] = {"changelog_per_native": 1.5, "canonical_per_native": 1.3,
                             "chat_per_native": 2.0, "largest_table_value": 64 * 1024}
_WARMUP = "bench-long-warmup"


def parse_sizes(text: str) -> list[int]:
    """'64k,1m,8m' -> sizes in bytes (k = KiB, m = MiB)."""
    sizes: list[int] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        unit = {"k": 1024, "m": 1024 * 1024}.get(part[-1], 0)
        if not unit or not part[:-1].isdigit() or int(part[:-1]) == 0:
            raise ValueError(f"size {part!r}: use a number of KiB or MiB, like 64k or 8m")
        sizes.append(int(part[:-1]) * unit)
    if not sizes:
        raise ValueError("no size given")
    return sizes


# ---------------------------------------------------------------------------
# The offline check (canonflow replay)
# ---------------------------------------------------------------------------


class Replayed(msgspec.Struct):
    events: list[bytes]  # encoded as published (redacted), createdAt removed
    chat: int  # chat records
    chat_bytes: int


def replay_session(session: LongSession, lines: Iterable[Line] | None = None,
                   session_id: str | None = None, cap: int | None = None) -> Replayed:
    """`canonflow replay --format capture` of the session (its Replayer, the worker's
    default redaction, the chat view; items cut at `cap`, else CANONFLOW_ITEM_CAP's):
    its canonical events and chat records. Raises BenchError on a dead letter."""
    sid = session_id or session.session_id
    rep = Replayer(session.provider, cap=cap)
    chat = ChatView()
    publish = Redactor.from_env({}).publisher()  # the worker's: CANONFLOW_* not inherited
    events: list[bytes] = []
    n_chat = chat_bytes = 0
    for offset, line in enumerate(lines if lines is not None else session.lines, 1):
        raw = b'{"origin":"%s","t":%d,"msg":%s}' % (line.origin.encode(), line.time_ms or 0,
                                                    line.data)
        evs, dead = rep.feed(sid, offset, raw, "capture")
        if dead:
            raise BenchError(f"{sid}: line {offset} was dead-lettered: {dead[0].reason}")
        for ev in evs:
            data, published = publish(ev)
            events.append(timeless(data))
            for record in chat.feed(published) if published is not None else []:
                n_chat += 1
                chat_bytes += len(encode_chat(record))
    return Replayed(events, n_chat, chat_bytes)


def check_session(session: LongSession, replayed: Replayed) -> None:
    """The answer's deltas join to the intended answer; the command's output is the
    intended one (deltas and completion). Raises BenchError."""
    texts: dict[str, list[str]] = {}
    output_deltas: list[str] = []
    outputs: list[dict[str, Any]] = []
    for data in replayed.events:
        ev = json.loads(data)
        p = ev.get("payload") or {}
        if ev["type"] == "content.delta" and p.get("streamKind") == "assistant_text":
            texts.setdefault(ev.get("itemId", ""), []).append(p["delta"])
        elif ev["type"] == "content.delta" and p.get("streamKind") == "command_output":
            output_deltas.append(p["delta"])
        elif ev["type"] == "item.completed" and "output" in p:
            outputs.append(p)
    sid = session.session_id
    answer = "".join("".join(parts) for parts in list(texts.values())[-session.answer_items:])
    if answer != session.answer:
        raise BenchError(f"{sid}: the answer's deltas join to {len(answer)} characters, not "
                         f"the intended {len(session.answer)}")
    if session.output_streamed and "".join(output_deltas) != session.output:
        raise BenchError(f"{sid}: the command's output deltas are not the intended output")
    if not any(p.get("output") == session.output
               or (p.get("outputTruncated") and p.get("outputLength") == len(session.output))
               for p in outputs):
        raise BenchError(f"{sid}: no completed item carries the intended output")


# ---------------------------------------------------------------------------
# Through the worker
# ---------------------------------------------------------------------------


class Drive(msgspec.Struct):
    events: list[bytes]  # the session's canonical events (values), in order
    canonical_bytes: int
    chat: int
    chat_bytes: int
    first_produced: float
    last_canonical: float


async def _drive(live: Settings, warmup: list[RawRecord], warm_events: int,
                 session: LongSession, want_events: int, want_chat: int, timeout: float,
                 alive: Callable[[], bool]) -> Drive:
    """Produce the warm-up conversation and wait for its events (the worker is then
    running), then produce the session, observing agents.canonical and agents.chat
    until all of its events and chat records arrived."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    kw = kafka_client_kwargs(live)
    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, CHAT_TOPIC, **kw, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_bytes=64 * 1024 * 1024,
                                max_partition_fetch_bytes=32 * 1024 * 1024)
    producer = AIOKafkaProducer(**kw, linger_ms=5, max_batch_size=256 * 1024)
    await consumer.start()
    await producer.start()
    topic = raw_topic(session.provider)
    seen = _Seen(session.session_id.encode(),
                 _WARMUP.encode() + b"-" + session.session_id.encode())
    deadline = time.monotonic() + timeout

    async def send(key: bytes, records: list[RawRecord]) -> None:
        futures = [await producer.send(topic, r.value, key=key, headers=r.headers())
                   for r in records]
        await asyncio.gather(*futures)

    async def consume(done: Callable[[], bool]) -> None:
        while not done():
            if time.monotonic() > deadline or not alive():
                return
            batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
            now = time.perf_counter()
            for tp, recs in batch.items():
                for r in recs:
                    seen.add(tp.topic, r.key, r.value, now)

    try:
        await send(seen.warm, warmup)
        await consume(lambda: seen.warm_events >= warm_events)
        if seen.warm_events < warm_events:
            raise BenchError(f"the worker did not translate the warm-up conversation "
                             f"({seen.warm_events} of {warm_events} events)")
        first = time.perf_counter()
        sending = asyncio.ensure_future(send(seen.sid, [
            RawRecord(ln.data, ln.origin, ln.time_ms) for ln in session.lines]))
        await consume(lambda: len(seen.events) >= want_events and seen.chat >= want_chat)
        await sending
    finally:
        await producer.stop()
        await consumer.stop()
    return Drive(seen.events, seen.canonical_bytes, seen.chat, seen.chat_bytes, first,
                 seen.last)


class _Seen:
    """What `_drive` observed on the output topics: the warm-up's canonical events
    counted, the session's kept, and when the last of them arrived."""

    def __init__(self, sid: bytes, warm: bytes):
        self.sid, self.warm = sid, warm
        self.warm_events = self.chat = self.chat_bytes = self.canonical_bytes = 0
        self.events: list[bytes] = []
        self.last = 0.0

    def add(self, topic: str, key: bytes | None, value: bytes, now: float) -> None:
        if key == self.warm and topic == CANONICAL_TOPIC:
            self.warm_events += 1
        elif key != self.sid:
            return
        elif topic == CANONICAL_TOPIC:
            self.events.append(value)
            self.canonical_bytes += len(value)
            self.last = now
        else:
            self.chat += 1
            self.chat_bytes += len(value)


def run_long_session(settings: Settings, session: LongSession, expected: Replayed,
                     fixtures: Path, timeout: float) -> dict[str, Any]:
    """One session alone through a worker of its own on a fresh embedded broker."""
    broker, live = fresh_broker(settings)
    log = tempfile.NamedTemporaryFile(prefix="canonflow-bench-long-", suffix=".log",
                                      delete=False)
    log.close()
    scratch = scratch_dir("canonflow-bench-long-")
    try:
        live = live.replace(app_id=f"bench-long-{os.getpid()}-{session.session_id}",
                            web_enabled=False, batch_max=1, providers=(session.provider,),
                            data_dir=scratch.name)
        ensure_topics(live)
        warm_lines = captured_lines(fixtures, session.provider)
        warm_sid = f"{_WARMUP}-{session.session_id}"
        warm_events = len(replay_session(session, warm_lines, warm_sid, live.item_cap).events)
        warmup = [RawRecord(ln.data, ln.origin, ln.time_ms) for ln in warm_lines]
        worker = WorkerProcess(live, log_path=log.name).start()
        try:
            drive = asyncio.run(_drive(live, warmup, warm_events, session,
                                       len(expected.events), expected.chat, timeout,
                                       alive=worker.alive))
            rss = rss_mb(worker.pid)
        finally:
            worker.stop()
        got = [timeless(v) for v in drive.events]
        if got != expected.events:
            raise BenchError(f"{session.session_id}: {len(got)} canonical events differ from "
                             f"the offline replay's {len(expected.events)} (worker log: "
                             f"{log.name})")
        if drive.chat != expected.chat:
            raise BenchError(f"{session.session_id}: {drive.chat} chat records, the offline "
                             f"replay gives {expected.chat} (worker log: {log.name})")
        stats: dict[str, Any] = {}
        _, _, changelog = asyncio.run(changelogs(live, session=session.session_id.encode(),
                                                  stats=stats))
    finally:
        if broker:
            broker.stop()
        scratch.cleanup()
    return _row(session, drive, changelog, stats, rss)



def _row(session: LongSession, drive: Drive, changelog: int, stats: dict[str, Any],
         rss: float) -> dict[str, Any]:
    """The figures of one session through the worker (its events already verified)."""
    native = session.native_bytes
    return {
        "provider": session.provider,
        "size": size_label(session.size),
        "records": len(session.lines),
        "answer_chars": len(session.answer),
        "answer_items": session.answer_items,
        "output_chars": len(session.output),
        "output_streamed": session.output_streamed,
        "native_bytes": native,
        "changelog_bytes": changelog,
        "changelog_records": stats.get("records", 0),
        # per table: the session states' and the items' spooled chunks (and the chat's)
        "changelog_bytes_by_table": stats.get("by_table", {}),
        "canonical_bytes": drive.canonical_bytes,
        "chat_bytes": drive.chat_bytes,
        "changelog_per_native": changelog / native,
        "canonical_per_native": drive.canonical_bytes / native,
        "chat_per_native": drive.chat_bytes / native,
        "largest_table_value": stats.get("largest_value", 0),
        "largest_table_key": stats.get("largest_key", ""),
        "worker_peak_rss_mb": rss,
        "seconds": drive.last_canonical - drive.first_produced,
        "events": len(drive.events),
        "chat_records": drive.chat,
        "verified": True,
    }


def run_long_bench(settings: Settings, *, sizes: Iterable[int] = SIZES,
                   providers: Iterable[str] = LONG_PROVIDERS,
                   fixtures: Path | None, timeout: float, say: Callable[[str], None]
                   ) -> dict[str, Any]:
    """Every (provider, size) session: generated, checked offline, then run through the
    worker; the figures of each, in one result."""
    from pipeline.tools.bench_workload import default_fixtures

    fixtures = fixtures or (Path(__file__).resolve().parents[2] / "tests" / "fixtures"
                            / "captured")
    if not fixtures.is_dir():
        fixtures = default_fixtures()
    rows: list[dict[str, Any]] = []
    start = time.monotonic()
    sizes, providers = list(sizes), list(providers)
    for size in sizes:
        for provider in providers:
            session = long_session(fixtures, provider, size)
            expected = replay_session(session, cap=settings.item_cap)
            check_session(session, expected)
            say(f"{session.session_id}: {len(session.lines):,} records, "
                f"{session.native_bytes / 2**20:.1f} MiB native, replay checked "
                f"({len(expected.events):,} events)")
            row = run_long_session(settings, session, expected, fixtures, timeout)
            say(f"{session.session_id}: {row['seconds']:.1f} s through the worker, "
                f"{row['events']:,} events verified")
            rows.append(row)
    return {
        "workload": {"sizes": [size_label(n) for n in sizes], "providers": providers, "chunk": CHUNK,
                     "whole_max": WHOLE_MAX, "batch_max": 1, "partitions": settings.partitions,
                     "item_cap": settings.item_cap,
                     "seconds": time.monotonic() - start},
        "targets": TARGETS,
        "sessions": rows,
    }
