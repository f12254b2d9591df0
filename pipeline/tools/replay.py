"""Offline replay: the adapters without a broker (`canonflow replay`).

Reads native messages from files (or stdin), one per line, feeds each line as its
own record through the provider's translator, and writes canonical events as JSON
lines. Lines that cannot be translated become dead-letter records (JSON) on the
error stream, and replay goes on. Deliberately imports neither faust nor aiokafka,
so it starts fast.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Literal

import msgspec

from adapters import (
    Line,
    MemorySpool,
    Session,
    Translator,
    close_session,
    fit_or_warn,
    get,
    idle_close_time,
    new_session,
    translate_record,
)
from adapters.projections.chat import ChatState, project_next
from pipeline.privacy.redact import LetterRun, Redactor
from pipeline.settings import item_cap_from_env
from topics.canonical import decode_event, encode_event
from topics.catalog import MAX_EVENT_BYTES, raw_topic
from topics.chat import encode_chat
from topics.records import (
    BadRecordId,
    DeadLetter,
    advanced,
    capture_line_decoder,
    encode_deadletter,
    record_id,
    seen,
)

Format = Literal["native", "capture"]
View = Literal["canonical", "chat"]


def default_session_id(path: str) -> str:
    """A file's session id when none is given: its name without the extensions."""
    if path == "-":
        return "stdin"
    name = os.path.basename(path)
    for ext in (".jsonl", ".ndjson", ".json", ".capture"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


class WrongFormat(ValueError):
    """A capture file read as native messages (the default `--format native`)."""


class _Envelope(msgspec.Struct):
    origin: str | None = None
    msg: msgspec.Raw = msgspec.Raw(b"")


_envelope = msgspec.json.Decoder(_Envelope)


def check_format(raw: bytes, fmt: Format, line: int) -> None:
    """Raises WrongFormat when `raw`, read as `fmt` "native", is a capture line (an object
    with `origin` "agent" or "client" and `msg`): translated as a native message, every
    line of the file would be a dead letter. No runtime's message has both at its top."""
    if fmt != "native":
        return
    try:
        env = _envelope.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return  # no capture line (translated, the line is its own dead letter)
    if env.origin in ("agent", "client") and len(env.msg):
        raise WrongFormat(f"line {line} is a capture line ({{\"origin\", \"msg\"}}): "
                          "use --format capture")


#: What parse_line raises for a line that is not a capture line.
CAPTURE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)


def parse_line(raw: bytes, fmt: Format) -> Line:
    """One input line as a Line. Raises msgspec errors (CAPTURE_ERRORS) for a bad
    capture envelope: a DecodeError for one nested deeper than the decoder goes."""
    return parse_capture(raw, fmt)[0]


def parse_capture(raw: bytes, fmt: Format) -> tuple[Line, tuple[str, int] | None]:
    """One input line as a Line, and the record id its capture line carries (None:
    none, or a native line). Raises msgspec errors (CAPTURE_ERRORS) for a bad capture
    envelope (a DecodeError for one nested deeper than the decoder goes), BadRecordId for
    a bad `record-id`."""
    if fmt == "capture":
        try:
            cap = capture_line_decoder.decode(raw)
        except RecursionError:  # the worker's words for the same line, read as native
            raise msgspec.DecodeError("JSON nested too deeply to decode") from None
        rid = record_id(cap.record_id) if cap.record_id is not None else None
        return Line(bytes(cap.msg), cap.origin, cap.t), rid
    return Line(raw, None), None  # as a raw record without an `origin` header


class Replayer:
    """Translates lines of one provider, keeping each session's state between lines."""

    def __init__(self, provider: str, *, include_raw: bool = False,
                 hold: Callable[[str], int] | None | msgspec.UnsetType = msgspec.UNSET,
                 cap: int | None = None):
        self.provider = provider
        # the redactor's (CANONFLOW_REDACT, as the worker's): a delta's tail that may
        # start a secret waits for the next delta
        self.hold = Redactor.from_env().hold if hold is msgspec.UNSET else hold
        # the per-item cap (CANONFLOW_ITEM_CAP, as the worker's): a long item's
        # completion is cut where the worker cuts it
        self.cap = item_cap_from_env() if cap is None else cap
        self.translator: Translator[Any] = get(provider)
        self.include_raw = include_raw
        self.sessions: dict[str, Session[Any]] = {}
        # each session's producer marks, as the worker's SessionEntry.producers
        self.producers: dict[str, dict[str, int]] = {}
        self.spool = MemorySpool()  # the open items' pending text and output
        self.topic = raw_topic(provider) if provider else ""

    def feed(self, session_id: str, offset: int, raw: bytes, fmt: Format,
             time_ms: int | None = None) -> tuple[list[Any], list[DeadLetter]]:
        """Translate one input line; returns (canonical events, dead letters).
        `time_ms` is a native line's capture time (the worker's `t` header)."""
        session = self.sessions.get(session_id) or new_session(self.translator)
        try:
            line, rid = parse_capture(raw, fmt)
        except (*CAPTURE_ERRORS, BadRecordId) as e:
            self.sessions[session_id] = msgspec.structs.replace(session, watermark=offset)
            return [], [self._dead(session_id, offset, raw, "MalformedCapture",
                                   f"not a capture line: {e}")]
        if rid is not None:  # a copy of a line the session had is dropped, as the worker does
            marks = self.producers.get(session_id, {})
            if seen(marks, rid):
                return [], []
            self.producers[session_id] = advanced(marks, rid)
        if time_ms is not None and fmt == "native":
            line = Line(line.data, line.origin, time_ms)
        session, events, failures = translate_record(
            self.translator, session, session_id, [line], offset=offset,
            include_raw=self.include_raw, spool=self.spool, cap=self.cap, hold=self.hold)
        self.sessions[session_id] = session
        dead = [self._dead(session_id, offset, f.data, type(f.error).__name__, str(f.error),
                           origin=line.origin or msgspec.UNSET) for f in failures]
        return events, dead

    def forget(self, session_id: str) -> None:
        """Drop what is kept of a session that will be fed no more (its state, the
        chunks of its open items), so that translating many sessions one after the
        other keeps one session's state, not all of them."""
        self.sessions.pop(session_id, None)
        self.producers.pop(session_id, None)
        self.spool.drop_session(session_id)

    def close(self, session_id: str, *, idle_ms: int) -> list[Any]:
        """The events that close a session nobody continues, as the worker's idle close
        gives them (adapters.close_session: its open items failed, its open turn
        completed or interrupted, session.exited), at its last record's time plus
        `idle_ms`; then the session is forgotten. No events for a session never fed."""
        session = self.sessions.get(session_id)
        events: list[Any] = []
        if session is not None and session.seq > 0:
            events = close_session(self.translator, session, session_id,
                                   time_ms=idle_close_time(session, idle_ms), reason="idle",
                                   spool=self.spool)
        self.forget(session_id)
        return events

    def _dead(self, session_id: str, offset: int, data: bytes, cls: str, reason: str,
              origin: Any = msgspec.UNSET) -> DeadLetter:
        return DeadLetter(topic=self.topic, partition=-1, offset=offset, provider=self.provider,
                          key=session_id, errorClass=cls, reason=reason, value=data,
                          origin=origin)


def iter_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line bytes) for every non-blank line."""
    for n, raw in enumerate(stream, 1):
        raw = raw.rstrip(b"\r\n")
        if raw.strip():
            yield n, raw


BLOCK = 1 << 16


def iter_blocks(stream: IO[bytes]) -> Iterator[list[bytes]]:
    """The non-blank lines of `stream` (as iter_lines gives them), a list per block
    read: what has arrived (read1), at most BLOCK bytes, and the lines it completes.
    One split per block instead of a readline and two strips per line; a line longer
    than a block is joined once, when its end arrives."""
    read = getattr(stream, "read1", stream.read)
    parts: list[bytes] = []  # the unfinished line's blocks
    while True:
        block = read(BLOCK)
        if not block:
            break
        end = block.rfind(b"\n")
        if end < 0:
            parts.append(block)
            continue
        head = block[:end]
        if parts:
            parts.append(head)
            head = b"".join(parts)
        parts = [block[end + 1:]] if end + 1 < len(block) else []
        yield [ln.rstrip(b"\r") for ln in head.split(b"\n") if ln.strip()]
    last = b"".join(parts).rstrip(b"\r")
    if last.strip():
        yield [last]


class ChatView:
    """The chat projection over replayed canonical events (`--view chat`)."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session[ChatState]] = {}
        self.spool = MemorySpool()

    def feed(self, event: Any) -> list[Any]:
        session, records = project_next(self.sessions.pop(event.sessionId, None), event,
                                        self.spool)
        if session is not None:
            self.sessions[event.sessionId] = session
        return records

    def forget(self, session_id: str) -> None:
        """Drop the chat state of a session that will get no more events."""
        self.sessions.pop(session_id, None)
        self.spool.drop_session(session_id)


def replay(provider: str, inputs: Iterable[tuple[str, IO[bytes]]], out: IO[bytes],
           err: IO[bytes], *, fmt: Format = "native", session: str | None = None,
           include_raw: bool = False, view: View = "canonical") -> int:
    """Replay every input; returns the number of dead letters written to `err`.

    Canonical events are written a block read at a time: encoded as JSON lines in one
    call, redacted through one prefilter pass over the block's events, the events that
    may hold a rule's literal one by one (Redactor.suspects; the bytes are the same
    either way), and written at once.

    Raises WrongFormat for a capture file read as native messages (check_format, on
    each file's first non-blank line)."""
    redactor = Redactor.from_env()
    rep = Replayer(provider, include_raw=include_raw, hold=redactor.hold)
    chat = ChatView() if view == "chat" else None
    write = _chat_writer(out, redactor, chat) if chat is not None else _event_writer(out, redactor)
    # dead letters redacted as the worker's are (CANONFLOW_DEADLETTER_ORIGINAL), the
    # dead lines that follow one another together (a private key, line by line)
    letters = LetterRun(redactor, lambda d: err.write(encode_deadletter(d) + b"\n"))
    dead_count = 0
    offset = 0  # one running position across files: a session may span several
    feed = rep.feed
    inputs = list(inputs)
    # the files each session has left: after its last one, what is kept of it goes
    # (many files replayed keep one session's state, not every file's)
    left = Counter(session or default_session_id(path) for path, _ in inputs)
    for path, stream in inputs:
        first = offset
        sid = session or default_session_id(path)
        for lines in iter_blocks(stream):
            if offset == first and lines:  # a file's first line says its format
                try:
                    check_format(lines[0], fmt, 1)
                except WrongFormat as e:
                    raise WrongFormat(f"{path}: {e}") from None
            events: list[Any] = []
            for raw in lines:
                offset += 1
                evs, dead = feed(sid, offset, raw, fmt)
                if (evs or not dead) and letters.held:
                    letters.end()  # the letters of the lines before it first
                events += evs
                if dead:  # the events before it first: out and err keep their order
                    write(events)
                    events = []
                    letters.add(dead)
                    dead_count += len(dead)
            write(events)
        letters.end()
        left[sid] -= 1
        if not left[sid]:
            rep.forget(sid)
            if chat is not None:
                chat.forget(sid)
    out.flush()
    return dead_count


_encode_lines = msgspec.json.Encoder().encode_lines


def _event_writer(out: IO[bytes], redactor: Redactor) -> Callable[[list[Any]], None]:
    """Writes canonical events as the worker publishes them (redacted).

    The events are encoded at once (encode_event's bytes, each and a newline), and
    written as they are but for the ones the redactor says may hold a secret
    (Redactor.suspects: one prefilter pass over the block's events, their envelopes
    skipped), which are redacted one by one (`apply` on each, as `publish` does)."""
    apply = redactor.apply
    suspects = redactor.suspects

    def write(events: list[Any]) -> None:
        if not events:
            return
        data = _encode_lines(events)
        which = suspects(events)
        if which == [] and len(data) <= MAX_EVENT_BYTES:
            out.write(data)
            return
        lines = data.split(b"\n")  # the last is the empty one after the last newline
        for i in range(len(events)) if which is None else which:
            lines[i] = apply(lines[i])
        for i, line in enumerate(lines):
            if len(line) > MAX_EVENT_BYTES:  # cut as the worker cuts it
                lines[i] = encode_event(fit_or_warn(decode_event(line), len(line),
                                                    MAX_EVENT_BYTES)[0])
        out.write(b"\n".join(lines))

    return write


def _chat_writer(out: IO[bytes], redactor: Redactor, chat: ChatView
                 ) -> Callable[[list[Any]], None]:
    """Writes the chat records of canonical events as consumers see them (redacted),
    projected by `chat`."""
    publish = redactor.publisher()

    def write(events: list[Any]) -> None:
        for ev in events:
            data, published = publish(ev)
            if published is None:  # a redaction hook made it undecodable
                continue
            if len(data) > MAX_EVENT_BYTES:  # cut as the worker cuts it
                published = fit_or_warn(published, len(data), MAX_EVENT_BYTES)[0]
            for record in chat.feed(published):
                out.write(encode_chat(record))
                out.write(b"\n")

    return write
