"""One raw record in, canonical events and dead letters out: the normalize step
without its I/O, so the worker and the tests run the very same code.

The Faust agent (pipeline.app) reads the session's stored state from its table,
calls `Normalizer.process`, publishes what comes back, waits for delivery, and
only then stores the new state. That order is what makes a crash harmless: state
is never ahead of what was published, and a record delivered again after a crash
is either below the stored watermark (nothing happens) or translated again into
the same events with the same eventIds (a consumer drops the duplicates).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from msgspec import UNSET

from adapters import Line, Session, Translator, get, new_session, split_lines, translate_record
from adapters.base import close_session
from adapters.chat import ChatState, new_chat_session, project_event
from pipeline.redact import Redactor
from topics.canonical import SessionExited, decode_event
from topics.catalog import CANONICAL_TOPIC, raw_topic
from topics.chat import encode_chat
from topics.records import HEADER_ORIGIN, HEADER_TIME, DeadLetter, Origin, encode_deadletter


class Output(msgspec.Struct, frozen=True):
    """What one input record produced: the encoded output records (canonical events,
    or chat records), dead letters, and the new session state. `state` is None when
    the record changed nothing (a redelivery, or a record dead-lettered whole);
    `delete` says the session is over and its state must be removed."""

    state: bytes | None
    records: list[bytes]
    deadletters: list[bytes]
    delete: bool = False


def parse_headers(headers: Any) -> tuple[Origin, int | None]:
    """(origin, capture time ms) from Kafka headers given as a mapping or (k, v) pairs."""
    items: Iterable[tuple[str, Any]] = headers.items() if hasattr(headers, "items") else headers or ()
    origin: Origin = "agent"
    t: int | None = None
    for k, v in items:
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if k == HEADER_ORIGIN and v in ("agent", "client"):
            # the literal itself, not the decoded copy: msgspec's omit_defaults compares
            # by identity, and raw.origin must be written exactly as replay writes it
            origin = "agent" if v == "agent" else "client"
        elif k == HEADER_TIME:
            try:
                t = int(v)
            except (TypeError, ValueError):
                t = None
    return origin, t


class Normalizer:
    """The translation step of one provider's normalize agent."""

    def __init__(self, provider: str, *, include_raw: bool = False,
                 max_record_bytes: int = 1024 * 1024, redactor: Redactor | None = None):
        self.provider = provider
        self.redactor = redactor if redactor is not None else Redactor.from_env()
        self._encode = self.redactor.encoder()
        self.topic = raw_topic(provider)
        self.translator: Translator[Any] = get(provider)
        self.include_raw = include_raw
        self.max_record_bytes = max_record_bytes
        self._encode_state = msgspec.msgpack.Encoder().encode
        self._decode_state = msgspec.msgpack.Decoder(Session[self.translator.state_type]).decode  # type: ignore[name-defined]

    def decode_state(self, stored: bytes | None) -> Session[Any]:
        return self._decode_state(stored) if stored else new_session(self.translator)

    def idle_since(self, stored: bytes) -> tuple[int, int]:
        """(partition, time ms of the last record) of a stored session."""
        session = self._decode_state(stored)
        return session.partition, session.clockMs

    def expire(self, stored: bytes, key: bytes, *, now_ms: int, reason: str = "idle"
               ) -> tuple[int, Output]:
        """Close a stored session nobody continues: (its partition, the synthetic
        closing events, delete=True)."""
        session = self._decode_state(stored)
        events = close_session(self.translator, session, key.decode("utf-8", "replace"),
                               time_ms=now_ms, reason=reason)
        return session.partition, Output(None, [self._encode(e) for e in events], [],
                                         delete=True)

    def process(self, stored: bytes | None, key: bytes | None, value: bytes | None, *,
                partition: int, offset: int, timestamp_ms: int | None = None,
                headers: Any = ()) -> Output:
        """Translate one raw record. Never raises for bad input: it becomes dead letters."""
        origin, t = parse_headers(headers)
        time_ms = t if t is not None else timestamp_ms

        def dead(reason: str, cls: str, data: bytes, line: int | None = None) -> bytes:
            return encode_deadletter(DeadLetter(
                topic=self.topic, partition=partition, offset=offset, provider=self.provider,
                key=key.decode("utf-8", "replace") if key is not None else None,
                errorClass=cls, reason=reason, value=data,
                line=line if line is not None else UNSET, origin=origin,
                timestampMs=time_ms if time_ms is not None else UNSET))

        if key is None:
            return Output(None, [], [dead("record has no key (the key must be the session id)",
                                          "MissingKey", value or b"")])
        if value is None:
            return Output(None, [], [dead("record has no value", "EmptyRecord", b"")])
        if len(value) > self.max_record_bytes:
            return Output(None, [], [dead(
                f"record of {len(value)} bytes exceeds max_record_bytes={self.max_record_bytes}",
                "OversizedRecord", value)])
        try:
            session_id = key.decode("utf-8")
        except UnicodeDecodeError:
            return Output(None, [], [dead("record key is not UTF-8", "MalformedKey", value)])
        try:
            session = self.decode_state(stored)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            # State written by an incompatible version: keep the record, say why.
            return Output(None, [], [dead(f"stored session state cannot be read: {e}",
                                          "StateError", value)])
        lines = [Line(data, origin, time_ms) for data in split_lines(value)]
        new, events, failures = translate_record(
            self.translator, session, session_id, lines, offset=offset, partition=partition,
            include_raw=self.include_raw)
        if new is session:
            return Output(None, [], [])
        return Output(
            self._encode_state(new),
            [self._encode(e) for e in events],
            [dead(str(f.error), type(f.error).__name__, f.data, f.line) for f in failures],
        )


class ChatProjector:
    """The translation step of the chat agent: one canonical event -> chat records."""

    provider = "chat"
    topic = CANONICAL_TOPIC

    def __init__(self) -> None:
        self._encode_state = msgspec.msgpack.Encoder().encode
        self._decode_state = msgspec.msgpack.Decoder(Session[ChatState]).decode

    def process(self, stored: bytes | None, key: bytes | None, value: bytes | None, *,
                partition: int, offset: int, timestamp_ms: int | None = None,
                headers: Any = ()) -> Output:
        """Project one record of agents.canonical. Never raises for bad input."""
        try:
            event = decode_event(value or b"")
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            return Output(None, [], [encode_deadletter(DeadLetter(
                topic=CANONICAL_TOPIC, partition=partition, offset=offset, provider="chat",
                key=key.decode("utf-8", "replace") if key is not None else None,
                errorClass="MalformedRecord", reason=f"not a canonical event: {e}",
                value=value or b""))])
        session = self._decode_state(stored) if stored else new_chat_session()
        # Watermark on the event's own seq (gapless per session), not on its Kafka
        # offset: a normalize worker that crashed between publishing and storing its
        # state publishes the same events again at higher offsets, and they must not
        # be projected twice (found by tests/pipeline/test_crash.py).
        new, records = project_event(session, event, offset=event.seq)
        if new is session:
            return Output(None, [], [])
        if isinstance(event, SessionExited):  # the session is over: forget its chat state
            return Output(None, [encode_chat(r) for r in records], [], delete=True)
        return Output(self._encode_state(new), [encode_chat(r) for r in records], [])


def internal_error(step: Normalizer | ChatProjector, error: Exception, key: bytes | None,
                   value: bytes | None, *, partition: int, offset: int) -> Output:
    """The dead letter for a record the step itself failed on (a bug, not bad input):
    the record is kept, the worker goes on."""
    return Output(None, [], [encode_deadletter(DeadLetter(
        topic=step.topic, partition=partition, offset=offset, provider=step.provider,
        key=key.decode("utf-8", "replace") if key is not None else None,
        errorClass=f"InternalError.{type(error).__name__}", reason=str(error),
        value=value or b""))])
