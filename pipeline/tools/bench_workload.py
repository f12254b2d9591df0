"""The bench's workload: the captured conversations copied into many sessions, the
records each becomes, and the canonical events the offline replay expects of them
(pipeline.tools.bench)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters import Line, MemorySpool, get, new_session, translate_record
from pipeline.tools.kafka_io import RawRecord
from pipeline.tools.replay import parse_line

ROOT = Path(__file__).resolve().parents[2]  # the repository
_T0 = 1_764_000_000_000


class Session(msgspec.Struct):
    provider: str
    session_id: str
    lines: list[Line]


def default_fixtures() -> Path:
    for cand in (Path.cwd().parent / "shared" / "fixtures" / "captured",
                 ROOT / "tests" / "fixtures" / "captured"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError("no captured fixtures found; pass --fixtures DIR")


def build_workload(fixtures: Path, messages: int) -> list[Session]:
    """Copies of every captured conversation, as distinct sessions, until the workload
    holds at least `messages` native messages (interleaved by provider later)."""
    convs: list[tuple[str, str, list[Line]]] = []
    for path in sorted(fixtures.glob("*/*.capture.jsonl")):
        lines = [parse_line(raw, "capture") for raw in path.read_bytes().splitlines()
                 if raw.strip()]
        # every line gets a capture time (the `t` header), so the worker and the
        # offline replay see the same times and give the same event ids
        lines = [ln if ln.time_ms is not None else Line(ln.data, ln.origin, _T0 + 10 * i)
                 for i, ln in enumerate(lines)]
        convs.append((path.parent.name, path.name.split(".")[0], lines))
    if not convs:
        raise FileNotFoundError(f"no *.capture.jsonl under {fixtures}")
    sessions: list[Session] = []
    total, copy = 0, 0
    while total < messages:
        for provider, name, lines in convs:
            sessions.append(Session(provider, f"bench-{copy}-{name}", lines))
            total += len(lines)
        copy += 1
    return sessions


def n_messages(sessions: list[Session]) -> int:
    return sum(len(s.lines) for s in sessions)


def line_groups(session: Session, batch: int) -> list[list[Line]]:
    """The lines of each raw record of a session: up to `batch` consecutive lines of one
    origin (a client request ends a record)."""
    out: list[list[Line]] = []
    for line in session.lines:
        last = out[-1] if out else None
        if last is not None and len(last) < batch and last[0].origin == line.origin:
            last.append(line)
        else:
            out.append([line])
    return out


def records_of(session: Session, batch: int) -> list[RawRecord]:
    """The raw records of a session (line_groups), as they are produced."""
    return [RawRecord(b"\n".join(ln.data for ln in group), group[0].origin, group[0].time_ms)
            for group in line_groups(session, batch)]


def expected_events(sessions: list[Session]) -> dict[str, list[bytes]]:
    """Offline replay of every session: its canonical events as the worker publishes them
    (redacted, CANONFLOW_REDACT), createdAt removed."""
    from pipeline.privacy.redact import Redactor

    redactor = Redactor.from_env()
    publish = redactor.publisher()
    out: dict[str, list[bytes]] = {}
    for s in sessions:
        t = get(s.provider)
        session, spool = new_session(t), MemorySpool()
        events: list[bytes] = []
        for n, line in enumerate(s.lines):
            session, evs, _ = translate_record(t, session, s.session_id, [line], offset=n,
                                               spool=spool, hold=redactor.hold)
            events += [timeless(publish(e)[0]) for e in evs]
        out[s.session_id] = events
    return out


def timeless(data: bytes) -> bytes:
    obj = json.loads(data)
    obj.pop("createdAt", None)
    return json.dumps(obj, sort_keys=True).encode()


def interleaved(sessions: list[Session], batch: int,
                topic_of: Callable[[Session], str]) -> list[tuple[str, bytes, RawRecord]]:
    """Records of all sessions, interleaved round-robin (as a fleet writes them)."""
    queues = [(topic_of(s), s.session_id.encode(), records_of(s, batch)) for s in sessions]
    out: list[tuple[str, bytes, RawRecord]] = []
    i = 0
    while queues:
        nxt = []
        for topic, key, recs in queues:
            if i < len(recs):
                out.append((topic, key, recs[i]))
                nxt.append((topic, key, recs))
        queues = nxt
        i += 1
    return out
