"""Hostile files in a runtime's home, through real `canonflow ship` and `canonflow
import` processes and the embedded broker: links out of the named directory, a FIFO,
a link to /dev/zero, a 200 MB line. Nothing outside the root reaches any topic, a
special file is skipped with one line, a line too long to ship is one dead letter,
and memory stays bounded."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.settings import Settings, child_env
from pipeline.tools.kafka_io import follow
from pipeline.worker.process import WorkerProcess
from tests.transcripts.test_ship import (
    ROOT,
    ShipperProcess,
    append,
    session_lines,
    shipped_to,
    wait_until,
)
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC, raw_topic
from topics.records import decode_deadletter

MARKER = b"hostile-outside-content-5c1e"
#: A child is stopped by the kernel (MemoryError) past this much data, so a
#: regression fails the test instead of exhausting a shared machine.
DATA_LIMIT = 1 << 30
#: What a shipper or an import may hold at its peak (README "Interactive sessions").
RSS_BOUND = 100 * 1024 * 1024
BIG_LINE = 200 * 1024 * 1024


def _limit_data() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))


#: Runs `python -m pipeline.cli ...` and, at its exit, writes its own peak RSS (VmHWM:
#: the high-water mark of its memory since exec) to the file $CANONFLOW_TEST_HWM names.
#: The child's rusage would not do: Linux counts in it the pages of the parent it was
#: forked from (a pytest process that ran many tests first: 200 MB).
_MEASURED = """
import atexit, os, runpy, sys
def _hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(os.environ["CANONFLOW_TEST_HWM"], "w").write(line.split()[1])
atexit.register(_hwm)
sys.argv = ["canonflow", *sys.argv[1:]]
runpy.run_module("pipeline.cli", run_name="__main__")
"""


def run_measured(args: list[str], env: dict[str, str], tmp: Path, timeout: float = 180.0
                 ) -> tuple[int, str, bytes, int]:
    """Run a child to its end: (exit status, stderr, stdout, its peak RSS in bytes).
    `args` is `[python, "-m", "pipeline.cli", ...]`."""
    out, err = tmp / f"out-{time.monotonic_ns()}", tmp / f"err-{time.monotonic_ns()}"
    hwm = tmp / f"hwm-{time.monotonic_ns()}"
    assert args[1:3] == ["-m", "pipeline.cli"], args
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([args[0], "-c", _MEASURED, *args[3:]], stdout=o, stderr=e,
                                env={**env, "CANONFLOW_TEST_HWM": str(hwm)}, cwd=ROOT,
                                preexec_fn=_limit_data)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{args[3]} did not end in {timeout:.0f} s; stderr:\n"
                                 f"{err.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert hwm.exists(), f"{args[3]} wrote no peak RSS; stderr:\n{err.read_text()[-3000:]}"
    return (proc.returncode, err.read_text(errors="replace"), out.read_bytes(),
            int(hwm.read_text()) * 1024)


def ship_once(settings: Settings, home: Path, tmp: Path) -> tuple[int, str, bytes, int]:
    return run_measured([sys.executable, "-m", "pipeline.cli", "ship", "--once",
                         "--checkpoint", str(tmp / "cp.json"), str(home)],
                        child_env(settings), tmp)


def import_(settings: Settings, home: Path, tmp: Path) -> tuple[int, str, bytes, int]:
    return run_measured([sys.executable, "-m", "pipeline.cli", "import", str(home)],
                        child_env(settings), tmp)


def every_record(settings: Settings, topics: list[str]) -> list[Any]:
    got: list[Any] = []

    def take(rec: Any) -> bool:
        got.append(rec)
        return False

    asyncio.run(follow(settings, topics, take, idle_timeout=3.0))
    return got


def every_topic(settings: Settings) -> list[str]:
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs

    async def names() -> list[str]:
        c = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=None)
        await c.start()
        try:
            return sorted(await c.topics())
        finally:
            await c.stop()

    return asyncio.run(names())


def claude_line(session: str, text: bytes) -> bytes:
    uuid = hashlib.sha256(text).hexdigest()[:12].encode()
    return (b'{"type":"user","sessionId":"' + session.encode() + b'","uuid":"u-' + uuid
            + b'","message":{"role":"user","content":"' + text + b'"}}\n')


def test_links_out_of_the_named_directory_are_read_by_neither_ship_nor_import(
        settings: Settings, worker: WorkerProcess, tmp_path: Path):
    outside = tmp_path / "outside"  # another user's files, a private key
    (outside / ".claude" / "projects" / "-w").mkdir(parents=True)
    secret = outside / "id_ed25519"
    secret.write_bytes(claude_line("k", MARKER) + b"-----" + MARKER + b"-----\n")
    other = outside / ".claude" / "projects" / "-w" / "a1.jsonl"
    other.write_bytes(claude_line("a1", MARKER))
    homes = tmp_path / "homes"
    project = homes / "alice" / ".claude" / "projects" / "-w"
    project.mkdir(parents=True)
    name, lines = session_lines("claude-code-stream-json", "text")
    good = project / name
    good.write_bytes(b"".join(lines))
    (project / "key.jsonl").symlink_to(secret)  # a file outside
    (project.parent / "dir").symlink_to(outside / ".claude" / "projects" / "-w")  # a directory
    (homes / "mallory").mkdir()
    (homes / "mallory" / ".claude").symlink_to(outside / ".claude")  # a whole home
    archive = homes / "alice" / ".claude" / "archive"  # inside the root: followed
    archive.mkdir()
    kept = archive / "kept.jsonl"
    kept.write_bytes(claude_line("kept", b"inside-the-root"))
    (project / "kept.jsonl").symlink_to(Path("..") / ".." / "archive" / "kept.jsonl")

    status, err, _, _ = ship_once(settings, homes, tmp_path)
    assert status == 0, err
    refused = sorted(x for x in err.splitlines() if "outside" in x)
    root, real_outside = os.path.realpath(homes), Path(os.path.realpath(outside))
    assert refused == sorted([
        f"canonflow ship: {project / 'key.jsonl'}: leads to {real_outside / 'id_ed25519'}, "
        f"outside {root}: not read",
        f"canonflow ship: {homes / 'mallory' / '.claude'}: leads to {real_outside / '.claude'}, "
        f"outside {root}: not read"]), err
    assert "not a finished line" not in err  # a file not read has no unfinished line
    raw = every_record(settings, [raw_topic("claude-transcript")])
    assert {r.key for r in raw} == {good.stem.encode(), b"kept"}
    assert b"inside-the-root" in b"".join(r.value for r in raw)

    # the worker translated what was shipped; no topic holds a byte from outside
    wait_until("the worker's events", lambda: len(every_record(settings, [CANONICAL_TOPIC])) > 0)
    everything = every_record(settings, every_topic(settings))
    assert {raw_topic("claude-transcript"), CANONICAL_TOPIC} <= {r.topic for r in everything}
    assert [r.topic for r in everything if MARKER in (r.value or b"") + (r.key or b"")] == []

    status, err, out, _ = import_(settings, homes, tmp_path)
    assert status == 1
    assert MARKER not in out + err.encode()
    assert sorted(x for x in err.splitlines() if "outside" in x) == [
        x.replace("canonflow ship", "canonflow import") for x in refused]


def test_a_fifo_blocks_neither_ship_nor_import_and_sigterm_stops_ship(
        settings: Settings, tmp_path: Path):
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-w"
    project.mkdir(parents=True)
    fifo = project / "0-first.jsonl"  # polled before the sessions
    os.mkfifo(fifo)
    name, lines = session_lines("claude-code-stream-json", "text")
    first, second = project / name, project / "second.jsonl"
    cp, log = tmp_path / "cp.json", tmp_path / "ship.log"
    ship = ShipperProcess(settings, home, cp, log).start()
    try:
        append(first, b"".join(lines))
        wait_until("a session beside the FIFO shipped", lambda: shipped_to(cp, first), log=log)
        append(second, claude_line("second", b"later"))
        wait_until("a session that came later", lambda: shipped_to(cp, second), log=log)
    finally:
        status = ship.stop()  # SIGTERM; a shipper still running after 30 s is killed
    assert status == 0, log.read_text()
    said = [x for x in log.read_text().splitlines() if str(fifo) in x]
    assert said == [f"canonflow ship: {fifo}: a FIFO, not a regular file: not read"]

    status, err, out, _ = import_(settings, home, tmp_path)
    assert status == 1
    assert [x for x in err.splitlines() if str(fifo) in x] == [
        f"canonflow import: {fifo}: a FIFO, not a regular file: not read"]
    assert b'"sessionId":"second"' in out


def test_a_link_to_dev_zero_is_skipped_by_ship_and_import_in_bounded_memory(
        settings: Settings, tmp_path: Path):
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-w"
    project.mkdir(parents=True)
    (project / "0-zero.jsonl").symlink_to("/dev/zero")
    good = project / "good.jsonl"
    good.write_bytes(claude_line("good", b"shipped"))

    status, err, _, rss = ship_once(settings, home, tmp_path)
    assert status == 0, err
    assert [x for x in err.splitlines() if "0-zero.jsonl" in x] == [
        f"canonflow ship: {project / '0-zero.jsonl'}: leads to /dev/zero, outside {home}: "
        "not read"]
    assert rss < RSS_BOUND, rss
    assert [r.key for r in every_record(settings, [raw_topic("claude-transcript")])] == [b"good"]

    status, err, out, rss = import_(settings, home, tmp_path)
    assert status == 1, err
    assert b'"sessionId":"good"' in out
    assert rss < RSS_BOUND, rss


def test_a_200_mb_line_is_one_dead_letter_and_the_lines_after_it_are_shipped(
        settings: Settings, tmp_path: Path):
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-w"
    project.mkdir(parents=True)
    prefix, suffix = claude_line("big", b"@body@").split(b"@body@\"")
    sha = hashlib.sha256(prefix)
    with open(project / "big.jsonl", "wb") as fh:  # written in pieces: the test's memory
        fh.write(claude_line("big", b"before"))
        fh.write(prefix)
        piece = b"x" * (1 << 20)
        for _ in range(BIG_LINE >> 20):
            fh.write(piece)
            sha.update(piece)
        fh.write(b'"' + suffix)
        fh.write(claude_line("big", b"after"))
    sha.update(b'"' + suffix.rstrip(b"\n"))
    size = len(prefix) + BIG_LINE + len(suffix)

    status, err, _, rss = ship_once(settings, home, tmp_path)
    assert status == 0, err[-3000:]
    assert rss < RSS_BOUND, rss  # far below the line's 200 MB
    raw = every_record(settings, [raw_topic("claude-transcript")])
    assert [r.value for r in raw] == [claude_line("big", b"before").rstrip(b"\n"),
                                      claude_line("big", b"after").rstrip(b"\n")]
    letters = [decode_deadletter(r.value) for r in every_record(settings, [DEADLETTER_TOPIC])]
    assert len(letters) == 1
    letter = letters[0]
    assert (letter.errorClass, letter.key, letter.valueBytes, letter.valueSha256) == (
        "LineTooLong", "big", size, sha.hexdigest())
    assert letter.value == (prefix + b"x" * 4096)[:4096]
    assert "longer than agents.raw.claude-transcript takes" in letter.reason

    status, err, out, rss = import_(settings, home, tmp_path)
    assert status == 0, err[-3000:]
    assert rss < RSS_BOUND, rss
    assert [decode_deadletter(x) for x in err.encode().splitlines()
            if b"LineTooLong" in x] == [letter]
    assert b"after" in out
