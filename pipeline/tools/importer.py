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

import sys
from collections.abc import Callable
from typing import IO, Any

from pipeline.privacy.redact import Redactor
from pipeline.tools.replay import ChatView, Replayer, View
from pipeline.transcripts.discovery import Found, Kind, load_kinds, locate
from pipeline.transcripts.sources import NO_TIME, Database, FileSource, SourceError
from topics.chat import encode_chat
from topics.records import encode_deadletter

#: (provider, session id) -> its records: (line or row number, native record)
Sessions = dict[tuple[str, str], list[tuple[int, bytes]]]


def read_sessions(found: list[Found], errors: list[str]) -> Sessions:
    """Every session's records from `found`; a source that cannot be read adds its
    error line to `errors` and gives nothing."""
    out: Sessions = {}
    for f in found:
        try:
            src: Any = Database(f.path, f.kind) if f.db else FileSource(f.path, f.kind)
            try:
                records = src.read(final=True, limit=sys.maxsize).records
            finally:
                if f.db:
                    src.close()
        except OSError as e:
            errors.append(f"cannot read {f.path}: {e.strerror or e}")
            continue
        except SourceError as e:
            errors.append(str(e))
            continue
        if not f.db:
            records = records[:-1]  # the last one is the read's end, not a line
        bases: dict[tuple[str, str], int] = {}
        for n, (session, value, _) in enumerate(records, 1):
            if session is None or value is None:  # a position only, or a blank line
                continue
            key = (f.kind.provider, session)
            got = out.setdefault(key, [])
            if f.db:  # the row's number in its session
                got.append(((got[-1][0] if got else 0) + 1, value))
            else:  # its line number, after the lines of the session's earlier files
                base = bases.setdefault(key, got[-1][0] if got else 0)
                got.append((base + n, value))
    return out


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
    sessions = read_sessions(located.found, errors)
    order = sorted(sessions)
    names = {key: (key[1] if session is None else session if len(order) == 1
                   else f"{session}/{key[1]}") for key in order}
    providers = {f.kind.provider: f.kind for f in located.found}
    _translate(order, sessions, names, providers, out, err, include_raw, view, errors)
    for line in errors:
        say(line)
    return 1 if errors else 0


def _translate(order: list[tuple[str, str]], sessions: Sessions, names: dict[Any, str],
               providers: dict[str, Kind], out: IO[bytes], err: IO[bytes],
               include_raw: bool, view: View, errors: list[str]) -> None:
    redactor = Redactor.from_env()
    publish = redactor.publisher()
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
        for number, value in sessions[key]:
            events, dead = rep.feed(sid, number, value, "native", time_ms=NO_TIME)
            for ev in events:
                data, published = publish(ev)
                if chat is None:
                    out.write(data + b"\n")
                elif published is not None:  # None: a redaction hook made it undecodable
                    for record in chat.feed(published):
                        out.write(encode_chat(record) + b"\n")
            for d in dead:
                err.write(encode_deadletter(redactor.dead_letter(d)) + b"\n")
    out.flush()
    err.flush()
