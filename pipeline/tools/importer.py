"""`canonflow import`: the runtimes' session files, translated offline (no broker).

The records are exactly the ones `canonflow ship` would send (pipeline.transcripts:
the same discovery, the same readers, finished files read to their end), translated
as `canonflow replay` translates (its Replayer, its redaction, its chat view) with the
capture time the shipper gives them (`t` 0: the rows carry their own), so an import
of finished files equals what the worker publishes from a shipper, event for event.

Sessions come out one after the other, ordered by provider and session id; each
session's records in file order (a session written to several files: in path order)
or, for a database, in its TABLES order. Byte-identical on every run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from typing import IO, Any

from pipeline.privacy.redact import LetterRun, Redactor
from pipeline.settings import idle_timeout_from_env
from pipeline.tools.replay import ChatView, Replayer, View
from pipeline.transcripts.discovery import Found, Kind, load_kinds, locate
from pipeline.transcripts.sources import (
    NO_TIME,
    READ_LIMIT,
    Database,
    FileSource,
    SourceError,
    TooLong,
    long_line_letter,
)
from topics.chat import encode_chat
from topics.records import encode_deadletter


class SpillError(Exception):
    """The temporary file an import's records wait in cannot be made or written (a full
    or read-only $TMPDIR): the import stops, before it has written anything."""


class Spilled:
    """Every session's records, in a temporary file: what memory keeps per record is its
    number and where its bytes are (three ints), so an import of a whole fleet's history
    needs memory for its largest read, not for its every byte."""

    def __init__(self) -> None:
        try:
            self.file = tempfile.TemporaryFile(prefix="canonflow-import-")
        except OSError as e:
            raise SpillError(f"cannot make a temporary file for the records ({e}); set "
                             "TMPDIR to a directory with room") from None
        self.end = 0
        #: (provider, session id) -> the last time one of its files changed (epoch s)
        self.modified: dict[tuple[str, str], float] = {}
        #: (provider, session id) -> (number, offset, size) of each of its records
        self.index: dict[tuple[str, str], array[int]] = {}
        #: the lines too long to ship (long_line_letter's arguments), in read order
        self.long_lines: list[tuple[Kind, str, str, int, TooLong]] = []

    def last_number(self, key: tuple[str, str]) -> int:
        where = self.index.get(key)
        return where[-3] if where else 0

    def add(self, key: tuple[str, str], number: int, value: bytes) -> None:
        where = self.index.get(key)
        if where is None:
            where = self.index[key] = array("q")
        try:
            self.file.write(value)
        except OSError as e:
            raise SpillError(f"cannot write the records' temporary file in "
                             f"{tempfile.gettempdir()} after {self.end:,} bytes "
                             f"({e.strerror or e}); set TMPDIR to a directory with room"
                             ) from None
        where.extend((number, self.end, len(value)))
        self.end += len(value)

    def records(self, key: tuple[str, str]) -> Iterator[tuple[int, bytes]]:
        """(number, native record) of `key`'s records, in the order they were added."""
        where = self.index[key]
        self.file.flush()
        for i in range(0, len(where), 3):
            self.file.seek(where[i + 1])
            yield where[i], self.file.read(where[i + 2])

    def close(self) -> None:
        self.file.close()


def read_sessions(found: list[Found], errors: list[str], *, limit: int = READ_LIMIT
                  ) -> Spilled:
    """Every session's records from `found`, read `limit` bytes at a time as the
    shipper reads them; a source that cannot be read adds its error line to `errors`
    and gives nothing more. A record's number is its line's in its file (after the lines
    of the session's earlier files), or its row's in its session. Raises SpillError."""
    out = Spilled()
    try:
        _read_into(out, found, errors, limit)
    except BaseException:
        out.close()
        raise
    return out


def _read_into(out: Spilled, found: list[Found], errors: list[str], limit: int) -> None:
    for f in found:
        src: Any = None
        try:
            root = f.root or None
            src = Database(f.path, f.kind, root=root) if f.db else \
                FileSource(f.path, f.kind, root=root)
            changed = _changed(f.path, f.db)
            bases: dict[tuple[str, str], int] = {}
            n = 0  # the file's lines so far
            more = True
            while more:
                reading = src.read(final=True, limit=limit)
                more = reading.more
                # a file's last read ends with its end, which is not a line
                records = reading.records if f.db or more else reading.records[:-1]
                for session, value, mark in records:
                    src.commit(mark)
                    n += 1
                    if session is None or value is None:  # a position only, or a blank line
                        continue
                    if isinstance(value, TooLong):  # as the shipper: one dead letter
                        out.long_lines.append((f.kind, f.path, session,
                                               mark.pos - value.raw_size, value))
                        continue
                    key = (f.kind.provider, session)
                    out.modified[key] = max(out.modified.get(key, 0.0), changed)
                    if f.db:  # the row's number in its session
                        out.add(key, out.last_number(key) + 1, value)
                    else:  # its line number, after the lines of the session's earlier files
                        base = bases.get(key)
                        if base is None:
                            base = bases[key] = out.last_number(key)
                        out.add(key, base + n, value)
        except OSError as e:
            errors.append(f"cannot read {f.path}: {e.strerror or e}")
        except SourceError as e:
            errors.append(str(e))
        finally:
            if f.db and src is not None:
                src.close()


def _changed(path: str, db: bool) -> float:
    """When a session's file last changed (a database's: its -wal's too)."""
    times = [os.stat(path).st_mtime]
    if db and os.path.exists(path + "-wal"):
        times.append(os.stat(path + "-wal").st_mtime)
    return max(times)


def run_import(paths: list[str], out: IO[bytes], err: IO[bytes], *, runtime: str | None = None,
               session: str | None = None, view: View = "canonical",
               include_raw: bool = False, say: Callable[[str], None] | None = None) -> int:
    """Import `paths`; returns the exit status: 1 when a path could not be read (each
    said in one line through `say`), else 0. Dead letters go to `err` as JSON."""
    say = say or (lambda s: print(f"canonflow import: {s}", file=sys.stderr, flush=True))
    kinds, missing = load_kinds(runtime)
    if runtime is not None and runtime in missing:
        say(missing[runtime])
        return 1
    located = locate(paths, kinds, missing, explicit=runtime is not None)
    errors = located.errors
    try:
        sessions = read_sessions(located.found, errors)
    except SpillError as e:
        say(f"{e}: nothing imported")
        return 1
    try:
        order = sorted(sessions.index)
        names = {key: (key[1] if session is None else session if len(order) == 1
                       else f"{session}/{key[1]}") for key in order}
        providers = {f.kind.provider: f.kind for f in located.found}
        _translate(order, sessions, names, providers, out, err, include_raw, view, errors)
    finally:
        sessions.close()
    for line in errors:
        say(line)
    return 1 if errors else 0


def _translate(order: list[tuple[str, str]], sessions: Spilled, names: dict[Any, str],
               providers: dict[str, Kind], out: IO[bytes], err: IO[bytes],
               include_raw: bool, view: View, errors: list[str]) -> None:
    redactor = Redactor.from_env()
    publish = redactor.publisher()
    idle_s = idle_timeout_from_env()
    now = time.time()
    # dead records that follow one another redacted together (a private key, line by line)
    letters = LetterRun(redactor, lambda d: err.write(encode_deadletter(d) + b"\n"))
    for args in sessions.long_lines:  # one dead letter each, as the shipper sends it
        err.write(encode_deadletter(long_line_letter(*args, redact=redactor.dead_letter))
                  + b"\n")
    chat = ChatView() if view == "chat" else None
    replayers: dict[str, Replayer | None] = {}
    for key in order:
        provider = key[0]
        if provider not in replayers:
            try:
                replayers[provider] = Replayer(provider, include_raw=include_raw,
                                               hold=redactor.hold)
            except (KeyError, ImportError) as e:  # registered, but no translator to run
                replayers[provider] = None
                errors.append(f"{providers[provider].name} sessions not translated: {e}")
        rep = replayers[provider]
        if rep is None:
            continue
        sid = names[key]

        def write(events: list[Any]) -> None:
            for ev in events:
                data, published = publish(ev)
                if chat is None:
                    out.write(data + b"\n")
                elif published is not None:  # None: a redaction hook made it undecodable
                    for record in chat.feed(published):
                        out.write(encode_chat(record) + b"\n")

        for number, value in sessions.records(key):
            events, dead = rep.feed(sid, number, value, "native", time_ms=NO_TIME)
            if (events or not dead) and letters.held:
                letters.end()  # the dead records before it first
            write(events)
            letters.add(dead)
        letters.end()
        # the session is done (its records are all read): what was kept of it goes. A
        # file quiet for longer than the idle timeout is over: the session is closed as
        # the worker's idle close closes it (its last turn ends, the session exits)
        if now - sessions.modified.get(key, now) > idle_s:
            write(rep.close(sid, idle_ms=int(idle_s * 1000)))
        else:
            rep.forget(sid)
        if chat is not None:
            chat.forget(sid)
    out.flush()
    err.flush()
