"""Producing captures into raw topics and following output topics (plain aiokafka)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import msgspec

from pipeline.cluster.admin import kafka_client_kwargs
from pipeline.settings import Settings
from pipeline.tools.replay import (
    CAPTURE_ERRORS,
    Format,
    Replayer,
    WrongFormat,
    check_format,
    iter_lines,
    parse_capture,
    parse_line,
)
from topics.canonical import RuntimeWarningEvent
from topics.catalog import raw_topic
from topics.consumer import Gap
from topics.records import HEADER_ORIGIN, HEADER_RECORD, HEADER_TIME

#: The latest capture time a date can say (9999-12-31T23:59:59.999Z), as the adapters read it.
LATEST_MS = 253_402_300_799_999


def datable(t: int | None) -> bool:
    """A capture time the adapters take (none at all is one: the record's time stands in)."""
    return t is None or 0 <= t <= LATEST_MS


class RawRecord:
    """One record for a raw topic: NDJSON lines of one origin (None: a native file's,
    sent without an `origin` header, as replay reads it)."""

    __slots__ = ("value", "origin", "t", "rid")

    def __init__(self, value: bytes, origin: str | None, t: int | None,
                 rid: str | None = None):
        self.value, self.origin, self.t, self.rid = value, origin, t, rid

    @property
    def timestamp_ms(self) -> int | None:
        """The record's Kafka timestamp: its capture time when a date can say it, else
        none (the producer's clock): a Kafka timestamp is a signed 64-bit number, and
        the `t` header alone is enough for the worker to refuse the line."""
        return self.t if datable(self.t) else None

    def headers(self) -> list[tuple[str, bytes]]:
        h = [(HEADER_ORIGIN, self.origin.encode())] if self.origin is not None else []
        if self.t is not None:
            h.append((HEADER_TIME, str(self.t).encode()))
        if self.rid is not None:
            h.append((HEADER_RECORD, self.rid.encode()))
        return h


def file_stream(path: str) -> str:
    """The producer stream of a file's records (topics.records.HEADER_RECORD): its real
    path, hashed, so the same file sent again gives its records the same ids."""
    real = os.path.realpath(path).encode("utf-8", "surrogateescape")
    return "produce:" + hashlib.blake2b(real, digest_size=8).hexdigest()


def iter_records(path: str, fmt: Format, batch: int = 1) -> Iterator[RawRecord]:
    """The raw records of a file, read as they are sent: up to `batch` consecutive lines
    of the same origin each (a record takes the capture time of its first line). A line
    whose capture time no date can say (`datable`) is a record of its own: the worker
    makes it that line's dead letter, as replay does, and the lines around it keep
    their times.

    Each record's `record-id` is its last line's: the one its capture line carries,
    else `<file_stream>:<the byte offset where the line ends>`. So a file sent again
    (a retried `canonflow produce`, with the same --batch) sends the same ids, and the
    worker translates each record once.

    Raises msgspec errors for a malformed capture line, BadRecordId for a bad
    `record-id` in one, WrongFormat for a capture file read as native messages, when the
    iteration reaches them.
    """
    lines: list[bytes] = []  # the record being filled
    origin: str | None = ""
    t: int | None = None
    rid = ""
    stream = file_stream(path)
    first = True
    end = 0  # the byte offset after the line read
    with open(path, "rb") as fh:
        for n, got in enumerate(fh, 1):
            end += len(got)
            raw = got.rstrip(b"\r\n")
            if not raw.strip():
                continue
            if first:  # the first line says the file's format
                check_format(raw, fmt, n)
                first = False
            line, said = parse_capture(raw, fmt)
            if lines and (line.origin != origin or len(lines) >= batch or not datable(t)
                          or not datable(line.time_ms)):
                yield RawRecord(b"\n".join(lines), origin, t, rid)
                lines = []
            if not lines:
                origin, t = line.origin, line.time_ms
            lines.append(line.data)
            rid = f"{said[0]}:{said[1]}" if said is not None else f"{stream}:{end}"
    if lines:
        yield RawRecord(b"\n".join(lines), origin, t, rid)


_decode_json = msgspec.json.Decoder().decode


def check_file(path: str, fmt: Format, provider: str | None = None) -> None:
    """Read every line of `path` as `produce` will send it, and send nothing: raises
    WrongFormat, naming the first line the worker could not take as `fmt` says (a
    capture file read as native messages, a line that is not a capture line, a native
    line that is not one JSON object), or when no line is a message of `provider`.

    The provider's test is its adapter's, offline (replay's Replayer): a line whose
    events are more than unknown-type warnings and synthetic events is one of its
    messages, and the translation stops at the first such line (the first few, for a
    file of the provider's). A file that has none (every line malformed for the
    adapter, or of types it does not know) is another runtime's, or no runtime's."""
    # only whether a line gives events matters: no redaction, any item cap
    recognise = Replayer(provider, hold=None, cap=1 << 20) if provider else None
    empty = True
    with open(path, "rb") as fh:
        for n, raw in iter_lines(fh):
            if empty:  # the first line says the file's format
                check_format(raw, fmt, n)
                empty = False
            try:
                line = parse_line(raw, fmt)
            except CAPTURE_ERRORS as e:
                raise WrongFormat(f"not a capture file: line {n}: {e}") from None
            if fmt == "native":
                _check_native(line.data, n)
            if recognise is not None:
                events, _ = recognise.feed("check", n, raw, fmt)
                if any(not e.synthetic and not isinstance(e, RuntimeWarningEvent)
                       for e in events):
                    recognise = None
    if recognise is not None and not empty:
        raise WrongFormat(f"no line is a {provider} message (each is malformed or of a "
                          "type its adapter does not know): another runtime's file?")


def _check_native(data: bytes, n: int) -> None:
    """Raises WrongFormat unless `data` is one JSON object, as every native message is."""
    try:
        obj = _decode_json(data)
    except msgspec.DecodeError as e:
        raise WrongFormat(f"line {n} is not JSON ({e}): a native line is one JSON "
                          "object") from None
    except RecursionError:
        raise WrongFormat(f"line {n} is JSON nested too deeply to decode") from None
    if not isinstance(obj, dict):
        raise WrongFormat(f"line {n} is a JSON {type(obj).__name__}: a native line is one "
                          "JSON object")


def records_from_file(path: str, fmt: Format, batch: int = 1) -> list[RawRecord]:
    """iter_records's records, all of them (a file small enough to hold)."""
    return list(iter_records(path, fmt, batch))


#: Sends produce() keeps in flight before it waits for them: its memory, whatever the
#: number of records.
IN_FLIGHT = 4096


async def produce(settings: Settings, provider: str, session: str,
                  records: Iterable[RawRecord]) -> int:
    """Send records to the provider's raw topic keyed by `session`; returns the count."""
    from aiokafka import AIOKafkaProducer

    kw = kafka_client_kwargs(settings)
    if settings.producer_max_batch_size:  # the embedded broker: exact offsets (--from-now)
        kw["max_batch_size"] = settings.producer_max_batch_size
    producer = AIOKafkaProducer(**kw, acks="all")
    n = 0
    try:  # a start that fails (no broker) closes what it opened too
        await producer.start()
        topic, key = raw_topic(provider), session.encode()
        futures = []
        for r in records:
            futures.append(await producer.send(topic, r.value, key=key, headers=r.headers(),
                                               timestamp_ms=r.timestamp_ms))
            n += 1
            if len(futures) >= IN_FLIGHT:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return n


async def follow(settings: Settings, topics: list[str],
                 on_record: Callable[[Any], Awaitable[bool] | bool], *,
                 from_beginning: bool = True, idle_timeout: float | None = None,
                 deadline: float | None = None,
                 give_up: Callable[[], bool] | None = None) -> None:
    """Call on_record(ConsumerRecord) for every record of `topics` until it returns True,
    nothing arrives for `idle_timeout` seconds, `deadline` (monotonic) passes, or
    `give_up()` says so."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(*topics, **kafka_client_kwargs(settings), group_id=None,
                                auto_offset_reset="earliest" if from_beginning else "latest",
                                enable_auto_commit=False)
    try:  # a start that fails (no broker) closes what it opened too
        await consumer.start()
        last = time.monotonic()
        while True:
            now = time.monotonic()
            if deadline is not None and now > deadline:
                return
            if idle_timeout is not None and now - last > idle_timeout:
                return
            if give_up is not None and give_up():
                return
            batch = await consumer.getmany(timeout_ms=200)
            for tp in sorted(batch, key=lambda tp: (tp.topic, tp.partition)):
                for rec in batch[tp]:
                    last = time.monotonic()
                    done = on_record(rec)
                    if not isinstance(done, bool):
                        done = await done
                    if done:
                        return
    finally:
        await consumer.stop()


async def follow_events(settings: Settings, topic: str,
                        on_record: Callable[[Any], Awaitable[bool] | bool], *,
                        on_gap: Callable[[Gap, Any], None] | None = None,
                        from_beginning: bool = True, idle_timeout: float | None = None) -> None:
    """As `follow`, for agents.canonical or agents.chat through the consumer library
    (pipeline.cluster.consumer, no group): a copy of a record already passed on (a
    worker's redelivery) is not passed on again, and a gap in a session's seq goes to
    on_gap(Gap, the record after it)."""
    from pipeline.cluster.consumer import Consumer

    async with Consumer(topic, from_beginning=from_beginning, idle_timeout=idle_timeout,
                        **kafka_client_kwargs(settings)) as events:
        async for item, rec in events.records():
            if isinstance(item, Gap):
                if on_gap is not None:
                    on_gap(item, rec)
                continue
            done = on_record(rec)
            if not isinstance(done, bool):
                done = await done
            if done:
                return
