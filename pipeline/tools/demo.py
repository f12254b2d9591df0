"""`canonflow demo`: the main job on one machine, start to finish, then exit.

Starts the embedded broker, creates the catalog, runs a worker (child process),
produces the bundled sample sessions (pipeline/tools/samples/<provider>__<name>.jsonl,
capture format) into their raw topics, and prints the canonical events as they
arrive, until every event the samples translate to has arrived.

The transcript samples (<runtime>-transcript__<name>.jsonl: a session file as the
runtime writes it; for OpenCode, its database's `event` rows) are interactive
sessions: the demo writes them into a scratch HOME where each runtime writes them, in
steps (the files grow, the database through its WAL), while a shipper
(pipeline.transcripts.ship, `canonflow ship`) follows that HOME and sends each new
record to its transcript raw topic.

Everything the demo writes (the broker's and the worker's logs, the worker's data
directory, the scratch HOME, the shipper's checkpoint) lives in one temporary
directory, removed when the demo ends, by Ctrl-C too. So the demo leaves nothing
behind, and runs beside a `canonflow run` whose data directory is the default one.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from pipeline.settings import Settings
from pipeline.tools.importer import run_import
from pipeline.tools.kafka_io import follow, produce, records_from_file
from pipeline.tools.replay import Replayer, iter_lines
from pipeline.transcripts.checkpoint import Checkpoint
from pipeline.transcripts.discovery import RUNTIMES, Kind, load_kind
from pipeline.transcripts.ship import Shipper
from pipeline.views.render import SESSION_WIDTH, header, render, visible
from pipeline.worker.process import WorkerProcess, broker_for, ensure_topics
from topics.catalog import CANONICAL_TOPIC, PROVIDERS

SAMPLES = Path(__file__).resolve().parent / "samples"
#: provider id of a transcript runtime -> its --runtime name
TRANSCRIPTS = {provider: name for name, provider in RUNTIMES.items()}
#: In how many steps the demo writes each interactive session.
STEPS = 3
#: The session column: wide enough for a UUID, the transcripts' session ids.
UUID_WIDTH = 36
#: The worker log's last lines, printed when the demo fails (the log itself is removed).
LOG_LINES = 20
#: What the columns of an event line say, printed before the first one.
LEGEND = """\
canonflow demo: one line per canonical event (agents.canonical), as it arrives:
  provider      the runtime that wrote the session (its raw topic: agents.raw.<provider>)
  session       the session id, the record key
  #seq          the event's number in its session: from 1, no gaps
  *             synthetic: canonflow made the event up (a start the runtime never
                announced, an item left open when its turn ended)
  type          the event type (docs: the event contract)
  what it says  the item and its command or output, a delta's text, a turn's end state"""
#: The demo's last line: where to go from here.
NEXT = ("Next: the README's \"A five-minute tour\" runs this on a broker that stays up; "
        "then `canonflow tail --view chat` reads the sessions as chats, and "
        "`canonflow ui` shows them live in the browser.")


def samples() -> list[tuple[str, str, Path]]:
    """(provider, session id, path) of every bundled sample whose provider is known (a
    transcript sample's session id is the one its runtime's file gives it)."""
    out = []
    for path in sorted(SAMPLES.glob("*.jsonl")):
        provider, _, name = path.stem.partition("__")
        if provider in PROVIDERS:
            out.append((provider, f"demo-{provider}-{name}", path))
    return out


def expected_count(provider: str, session: str, path: Path) -> int:
    """How many canonical events the sample gives (the same adapters, offline)."""
    rep = Replayer(provider)
    n = 0
    with open(path, "rb") as fh:
        for offset, raw in iter_lines(fh):
            n += len(rep.feed(session, offset, raw, "capture")[0])
    return n


class Interactive:
    """The transcript samples written into `home` where their runtimes write them, in
    STEPS steps: each session file grows by a part of its lines, each database takes a
    part of its rows in one transaction, through its WAL (never checkpointed, as
    OpenCode leaves it)."""

    def __init__(self, chosen: list[tuple[str, str, Path]], home: Path):
        self.home = home
        self.parts: list[tuple[Kind, str, list[bytes]]] = [
            (load_kind(TRANSCRIPTS[provider]), path.stem.partition("__")[2],
             path.read_bytes().splitlines(keepends=True)) for provider, _, path in chosen]
        self.dbs: dict[Path, sqlite3.Connection] = {}

    def write(self, step: int) -> None:
        for kind, name, lines in self.parts:
            part = lines[len(lines) * step // STEPS:len(lines) * (step + 1) // STEPS]
            if kind.tables:
                self._insert(self.home / kind.homes[0] / kind.databases[0], part)
                continue
            dirs, file = kind.files[0].split("/")[:-1], kind.files[0].split("/")[-1]
            dest = self.home.joinpath(kind.homes[0], *(
                "demo" if any(c in d for c in "*?[") else d for d in dirs),
                file.replace("*", name))
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "ab") as fh:
                fh.write(b"".join(part))

    def _insert(self, db: Path, lines: list[bytes]) -> None:
        records = [json.loads(x) for x in lines]
        conn = self.dbs.get(db)
        if conn is None:
            db.parent.mkdir(parents=True, exist_ok=True)
            conn = self.dbs[db] = sqlite3.connect(db, isolation_level=None)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("BEGIN")
        for rec in records:
            table, row = rec["table"], rec["row"]
            cols = ", ".join(f'"{c}"' for c in row)
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{table}" ({cols})')
            conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(row))})',
                         tuple(row.values()))
        conn.execute("COMMIT")

    def close(self) -> None:
        for conn in self.dbs.values():
            conn.close()


def interactive_count(chosen: list[tuple[str, str, Path]], scratch: Path) -> int:
    """How many canonical events the transcript samples give (`canonflow import` of
    them, written out whole in a scratch HOME under `scratch`, removed after)."""
    if not chosen:
        return 0
    with tempfile.TemporaryDirectory(prefix="count-", dir=scratch) as tmp:
        written = Interactive(chosen, Path(tmp))
        try:
            for step in range(STEPS):
                written.write(step)
            events = io.BytesIO()
            run_import([tmp], events, io.BytesIO(), say=lambda s: None)
        finally:
            written.close()
    return len(events.getvalue().splitlines())


async def _follow_while_shipping(settings: Settings, chosen: list[tuple[str, str, Path]],
                                 show: Callable[[Any], bool], deadline: float,
                                 alive: Callable[[], bool], out: IO[str], scratch: Path
                                 ) -> None:
    """Follow the canonical topic while the interactive sessions are written (in a HOME
    under `scratch`) and shipped."""
    if not chosen:
        await follow(settings, [CANONICAL_TOPIC], show, deadline=deadline,
                     give_up=lambda: not alive())
        return
    ship = scratch / "ship"
    ship.mkdir()
    home = ship / "home"
    written = Interactive(chosen, home)
    kinds = [kind for kind, _, _ in written.parts]
    stop = asyncio.Event()

    async def grow() -> None:
        for step in range(STEPS):
            written.write(step)
            await asyncio.sleep(0.5)

    with Checkpoint(str(ship / "ship.json")) as cp:
        shipper = Shipper(settings, [str(home)], cp, kinds, {}, interval=0.2,
                          say=lambda s: print(s, file=out, flush=True))
        shipping = asyncio.create_task(shipper.run(stop=stop))
        growing = asyncio.create_task(grow())
        try:
            await follow(settings, [CANONICAL_TOPIC], show, deadline=deadline,
                         give_up=lambda: not alive() or shipping.done())
        finally:
            stop.set()
            growing.cancel()
            await asyncio.gather(shipping, growing, return_exceptions=True)
            written.close()


@contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the demo as Ctrl-C does, through every `finally` (the worker and
    the broker stopped, the temporary directory removed)."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_demo(settings: Settings, *, timeout: float = 90.0, out=sys.stdout) -> int:  # noqa: ANN001
    """Run the demo; returns 0 when every expected event arrived in time, 1 when not,
    130 when interrupted (Ctrl-C or SIGTERM)."""
    try:
        with _terminated_as_interrupt(), \
                tempfile.TemporaryDirectory(prefix="canonflow-demo-") as tmp:
            return _run(settings, timeout, out, Path(tmp))
    except KeyboardInterrupt:
        print("canonflow demo: interrupted; its temporary files are removed", file=out,
              flush=True)
        return 130


def _run(settings: Settings, timeout: float, out: IO[str], scratch: Path) -> int:
    chosen = [s for s in samples() if s[0] in settings.providers]
    captured = [s for s in chosen if s[0] not in TRANSCRIPTS]
    interactive = [s for s in chosen if s[0] in TRANSCRIPTS]
    want = (sum(expected_count(*s) for s in captured)
            + interactive_count(interactive, scratch))
    width = max(SESSION_WIDTH, UUID_WIDTH, *(len(sid) for _, sid, _ in captured))
    log = scratch / "worker.log"
    seen = 0
    with broker_for(settings, log_path=str(scratch / "broker.log")) as live:
        ensure_topics(live)
        # a data directory of its own: a `canonflow run` may hold the default one
        worker = WorkerProcess(live.replace(web_enabled=False, data_dir=str(scratch / "data")),
                               log_path=str(log)).start()
        try:
            print(f"canonflow demo: worker pid {worker.pid}; producing {len(captured)} sample "
                  f"session(s), expecting {want} canonical events", file=out, flush=True)
            for provider, session, path in captured:
                asyncio.run(produce(live, provider, session,
                                    records_from_file(str(path), "capture")))
            if interactive:
                print(f"canonflow demo: {len(interactive)} interactive session(s) written "
                      f"where their runtimes write them, in {STEPS} steps, while "
                      "`canonflow ship` follows that HOME", file=out)
            print(LEGEND, file=out)
            print(header(width), file=out, flush=True)

            def show(rec) -> bool:  # noqa: ANN001
                nonlocal seen
                seen += 1
                print(render(json.loads(rec.value), width), file=out, flush=True)
                return seen >= want

            asyncio.run(_follow_while_shipping(live, interactive, show,
                                               time.monotonic() + timeout, worker.alive,
                                               out, scratch))
        finally:
            worker.stop()
    if seen < want:
        print(f"canonflow demo: {seen}/{want} canonical events received before the timeout; "
              f"the worker's log ends:", file=out)
        print(_last_lines(log, LOG_LINES), file=out, flush=True)
        return 1
    print(f"canonflow demo: {seen}/{want} canonical events received", file=out)
    print(NEXT, file=out, flush=True)
    return 0


def _last_lines(path: Path, n: int) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"  (no log: {e})"
    return "\n".join("  " + visible(line, lines=False) for line in lines[-n:])
