"""`canonflow ship` end to end on a real broker (Kafka or Tansu): a HOME that grows
while the shipper runs, a shipper killed and restarted, bad input beside good; what the
worker publishes equals `canonflow import` of the finished files."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pipeline.settings import Settings, child_env
from pipeline.tools.importer import run_import
from pipeline.tools.kafka_io import follow
from pipeline.transcripts.checkpoint import Checkpoint, read_state
from pipeline.transcripts.discovery import load_kinds
from pipeline.transcripts.ship import Shipper
from pipeline.worker.process import WorkerProcess
from tests.transcripts.helpers import insert, pair_dir, rows, schema_of, writer
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC, raw_topic
from topics.records import decode_deadletter

ROOT = Path(__file__).resolve().parents[2]


class ShipperProcess:
    """`canonflow ship` as a child process, stopped by its own PID."""

    def __init__(self, settings: Settings, home: Path, checkpoint: Path, log: Path):
        self.args = [sys.executable, "-m", "pipeline.cli", "ship", "--interval", "0.1",
                     "--checkpoint", str(checkpoint), str(home)]
        self.env = child_env(settings)
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ShipperProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=ROOT)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def wait_until(what: str, done: Callable[[], bool], timeout: float = 60.0,
               log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}"
                                 + (f"; shipper log:\n{log.read_text()}" if log else ""))
        time.sleep(0.05)


def checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint as a shipper opening it would find it (its file and journal)."""
    try:
        return msgspec.to_builtins(read_state(str(path)))
    except (FileNotFoundError, ValueError):
        return {}


def shipped_to(path: Path, file: Path) -> bool:
    """Whether the checkpoint says `file` was shipped to its last finished line."""
    data = file.read_bytes()
    end = data.rfind(b"\n") + 1
    return checkpoint(path).get("files", {}).get(str(file), {}).get("pos") == end


def imported(home: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    out, err = io.BytesIO(), io.BytesIO()
    run_import([str(home)], out, err, say=lambda s: None)
    return ([json.loads(x) for x in out.getvalue().splitlines()],
            [decode_deadletter(x) for x in err.getvalue().splitlines()])


def read_until(settings: Settings, topic: str, enough: Callable[[list[Any]], bool],
               worker: WorkerProcess, timeout: float = 90.0) -> list[Any]:
    got: list[Any] = []

    def take(rec: Any) -> bool:
        got.append(rec)
        return enough(got)

    asyncio.run(follow(settings, [topic], take, deadline=time.monotonic() + timeout,
                       give_up=lambda: not worker.alive()))
    return got


def by_event_id(records: list[Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        e = json.loads(r.value)
        out.setdefault(e["eventId"], e)
    return out


def session_lines(runtime: str, scenario: str) -> tuple[str, list[bytes]]:
    f = next((pair_dir(runtime, scenario) / ".claude").rglob("*.jsonl"))
    return f.name, f.read_bytes().splitlines(keepends=True)


def append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        fh.write(data)


def test_a_home_growing_while_shipped_and_a_shipper_killed_mid_file_give_what_import_gives(
        settings: Settings, worker: WorkerProcess, tmp_path: Path):
    homes = tmp_path / "homes"  # two users' HOMEs: alice's sessions, bob's broken database
    home = homes / "alice"
    project = home / ".claude" / "projects" / "-sandbox-workspace"
    name_a, lines_a = session_lines("claude-code-sdk-stdio", "multi_turn")
    name_b, lines_b = session_lines("claude-code-stream-json", "tool_shell")
    file_a, file_b = project / name_a, project / name_b
    fixture_db = next((pair_dir("opencode-serve", "multi_turn") / ".local").rglob("opencode.db"))
    events_rows = [r for t, r in rows(fixture_db.with_name("opencode.db.rows.jsonl"))
                   if t == "event"]
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    w = writer(db, schema_of(fixture_db))  # the runtime: WAL mode, never checkpointed
    # beside the good: a file no runtime wrote where a transcript would be, and a
    # corrupt database in another HOME of the same folder
    notes = project / "notes.jsonl"
    append(notes, b'{"not": "a transcript"}\n\x00garbage\n')
    bad_db = homes / "bob" / ".local" / "share" / "opencode" / "opencode.db"
    bad_db.parent.mkdir(parents=True)
    bad_db.write_bytes(b"SQLite format 3\x00" + b"\x07" * 8192)
    cp = tmp_path / "ship.json"
    log = tmp_path / "ship.log"
    ship = ShipperProcess(settings, homes, cp, log).start()
    try:
        third = len(lines_a) // 3
        append(file_a, b"".join(lines_a[:third]))  # step 1: the session starts
        for r in events_rows[:10]:
            insert(w, "event", r)
        wait_until("the first lines", lambda: shipped_to(cp, file_a), log=log)
        for ln in lines_a[third:2 * third]:  # step 2: line by line, the last one half
            append(file_a, ln)
            time.sleep(0.01)
        append(file_a, lines_a[2 * third][:40])
        time.sleep(0.3)
        ship.kill()  # mid-file: a half line waits, a batch may be in flight
        ship = ShipperProcess(settings, homes, cp, log).start()
        append(file_a, lines_a[2 * third][40:])  # step 3: the rest, a second session,
        for ln in lines_a[2 * third + 1:]:  # more rows through the WAL
            append(file_a, ln)
        append(file_b, b"".join(lines_b[:5]))
        for n in range(10, len(events_rows), 7):
            w.execute("BEGIN")
            for r in events_rows[n:n + 7]:
                insert(w, "event", r)
            w.execute("COMMIT")
        append(file_b, b"".join(lines_b[5:]))
        last_seq = events_rows[-1]["seq"]
        sid = events_rows[-1]["aggregate_id"]
        wait_until("everything shipped", lambda: shipped_to(cp, file_a) and shipped_to(
            cp, file_b) and shipped_to(cp, notes) and checkpoint(cp)["dbs"][str(db)]["tables"][
            "event"]["sessions"].get(sid) == [1, last_seq], log=log)
    finally:
        status = ship.stop()
    assert status == 0, log.read_text()
    assert os.path.getsize(str(db) + "-wal") > os.path.getsize(db)  # read through the WAL
    expected, dead = imported(homes)
    w.close()
    want = {e["eventId"]: e for e in expected}
    got = by_event_id(read_until(settings, CANONICAL_TOPIC,
                                 lambda recs: want.keys() <= by_event_id(recs).keys(), worker))
    assert got == want  # after dedupe by eventId: nothing missing, nothing extra
    assert {e["sessionId"] for e in expected} == {file_a.stem, file_b.stem, sid}
    lines = log.read_text().splitlines()
    assert sum(str(bad_db) in x for x in lines) == 2, lines  # one line per shipper run
    assert not [x for x in lines if "Traceback" in x]
    letters = read_until(settings, DEADLETTER_TOPIC, lambda recs: len(recs) >= len(dead), worker)
    assert sorted(decode_deadletter(r.value).value for r in letters) == sorted(
        d.value for d in dead) == [b'\x00garbage', b'{"not": "a transcript"}']


@pytest.mark.tansu
def test_a_batch_left_in_flight_by_a_crash_is_neither_sent_twice_nor_skipped(
        settings: Settings, tmp_path: Path):
    """The crash is made exact here: a batch recorded in flight, only its first half
    delivered. The restarted shipper finds which records arrived and sends the rest."""
    home = tmp_path / "home"
    name, lines = session_lines("claude-code-sdk-stdio", "multi_turn")
    append(home / ".claude" / "projects" / "-w" / name, b"".join(lines))
    kinds, missing = load_kinds()
    cp_path = str(tmp_path / "ship.json")

    async def crash_mid_batch() -> int:
        from aiokafka import AIOKafkaProducer

        from pipeline.cluster.admin import kafka_client_kwargs
        from pipeline.transcripts.checkpoint import Flying
        from pipeline.transcripts.ship import HEADER_SHIP

        with Checkpoint(cp_path) as cp:
            shipper = Shipper(settings, [str(home)], cp, kinds, missing, say=lambda s: None)
            producer = AIOKafkaProducer(**kafka_client_kwargs(settings), max_batch_size=1)
            await producer.start()
            await shipper._partitions(asyncio.Event(), producer)
            batch = shipper.poll()
            cp.state.flying = Flying(batch=1, since=shipper.since, files=batch.files)
            cp.save()
            half = len(batch.values) // 2
            for i, (topic, key, value) in enumerate(batch.values[:half]):
                await (await producer.send(topic, value, key=key.encode(), headers=[
                    (HEADER_SHIP, f"{cp.state.shipper}:1:{i}".encode())]))
            await producer.stop()
            return half  # ... and the process dies here

    half = asyncio.run(crash_mid_batch())
    with Checkpoint(cp_path) as cp:
        stats = asyncio.run(Shipper(settings, [str(home)], cp, kinds, missing,
                                    say=lambda s: None).run(once=True))
    assert stats.records == len([x for x in lines if x.strip()]) - half

    got: list[bytes] = []

    def take(rec: Any) -> bool:
        got.append(rec.value)
        return False

    asyncio.run(follow(settings, [raw_topic("claude-transcript")], take, idle_timeout=3.0))
    assert got == [x.rstrip(b"\n") for x in lines if x.strip()]  # each once, in order


@pytest.mark.tansu
def test_once_ships_what_exists_and_says_what_waits(settings: Settings, tmp_path: Path):
    home = tmp_path / "home"
    name, lines = session_lines("claude-code-stream-json", "text")
    f = home / ".claude" / "projects" / "-w" / name
    append(f, b"".join(lines) + lines[0][:30])
    cmd = [sys.executable, "-m", "pipeline.cli", "ship", "--once", "--checkpoint",
           str(tmp_path / "cp.json"), str(home)]
    env = child_env(settings)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{len(lines)} record(s) of 1 session(s)" in r.stderr
    assert f"{f}: its last 30 bytes are not a finished line yet: not shipped" in r.stderr
    # stopped, the checkpoint is one file again: its journal folded into it
    assert not (tmp_path / "cp.json.journal").exists() or \
        (tmp_path / "cp.json.journal").read_bytes() == b""
    assert checkpoint(tmp_path / "cp.json")["files"][str(f)]["pos"] == len(b"".join(lines))
    assert msgspec.json.decode((tmp_path / "cp.json").read_bytes())["files"][str(f)]["pos"] \
        == len(b"".join(lines))
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert "0 record(s) of 0 session(s)" in again.stderr  # the checkpoint: nothing twice


@pytest.mark.parametrize("held", [True])
def test_a_second_shipper_on_the_same_checkpoint_is_one_error_line(
        settings: Settings, tmp_path: Path, held: bool):
    cp = tmp_path / "cp.json"
    with Checkpoint(str(cp)):
        env = child_env(settings)
        r = subprocess.run([sys.executable, "-m", "pipeline.cli", "ship", "--once",
                            "--checkpoint", str(cp), str(tmp_path)], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=60)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"canonflow ship: {cp}: another shipper holds it "
                                     f"({cp}.lock)"]


def test_checkpoint_state_is_json_a_person_can_read(tmp_path: Path):
    with Checkpoint(str(tmp_path / "cp.json")) as cp:
        cp.save()
    assert set(msgspec.json.decode((tmp_path / "cp.json").read_bytes())) == {
        "version", "generation", "shipper", "batch", "files", "dbs", "flying"}
