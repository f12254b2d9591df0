"""Codex app-server and ACP records without an `origin`, through `canonflow replay` and a
real worker: each message's side is read from the message, as the captures say it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import msgspec

from pipeline.tools.kafka_io import produce, records_from_file
from tests.pipeline.conftest import decoded, read_topic, timed
from tests.pipeline.test_integration import _offline
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
CLI = [sys.executable, "-m", "pipeline.cli"]


def _without(path: Path, out: Path, *keys: str) -> Path:
    """A copy of a capture whose lines lack `keys`, each message's bytes unchanged."""
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [msgspec.json.decode(x, type=dict[str, msgspec.Raw])
             for x in path.read_bytes().splitlines() if x.strip()]
    out.write_bytes(b"".join(msgspec.json.encode({k: v for k, v in x.items() if k not in keys})
                             + b"\n" for x in lines))
    return out


def _replay(provider: str, fmt: str, files: list[Path]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "replay", "--provider", provider, "--format", fmt,
                           "--include-raw", *map(str, files)], capture_output=True, timeout=120)


def test_replay_of_captures_without_origins_gives_the_same_events(tmp_path: Path):
    for provider in ("codex", "acp"):
        paths = sorted((CAPTURED / provider).glob("*.capture.jsonl"))
        stripped = [_without(p, tmp_path / provider / p.name, "origin") for p in paths]
        told, read = _replay(provider, "capture", paths), _replay(provider, "capture", stripped)
        assert told.returncode == read.returncode == 0, read.stderr.decode()
        assert read.stderr == b""  # no dead letter
        assert read.stdout == told.stdout and told.stdout.count(b"\n") > 100


def test_a_native_file_replays_as_its_capture(tmp_path: Path):
    """A native line has no origin: replay reads its side as the worker reads a record
    without the header (`canonflow produce --format native` sends none)."""
    path = CAPTURED / "codex" / "codex-app-server__approval_accept.capture.jsonl"
    untimed = _without(path, tmp_path / "capture" / "s.jsonl", "t")
    native = tmp_path / "native" / "s.jsonl"
    native.parent.mkdir()
    native.write_bytes(b"".join(bytes(msgspec.json.decode(x, type=dict[str, msgspec.Raw])["msg"])
                                + b"\n" for x in untimed.read_bytes().splitlines()))
    told, read = _replay("codex", "capture", [untimed]), _replay("codex", "native", [native])
    assert read.stderr == b"" and read.stdout == told.stdout
    assert read.stdout.count(b'"type":"request.opened"') == 1


def test_the_worker_reads_who_sent_each_record_without_its_origin_header(settings, worker,
                                                                       tmp_path):
    path = timed(CAPTURED / "codex" / "codex-app-server__approval_accept.capture.jsonl",
                 tmp_path)
    expected = _offline("codex", "sess-origin", path)
    stripped = _without(path, tmp_path / "stripped" / path.name, "origin")
    records = records_from_file(str(stripped), "capture")
    assert all(not r.headers() or r.headers()[0][0] != "origin" for r in records)
    asyncio.run(produce(settings, "codex", "sess-origin", records))
    got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected), key=b"sess-origin",
                             worker=worker))
    assert got == expected
    assert [e["type"] for e in got].count("request.opened") == 1
    # nothing was dead-lettered: a marker record's letter is the first one there
    asyncio.run(produce(settings, "codex", "sess-origin-mark",
                        records_from_file(str(_bad(tmp_path)), "capture")))
    [letter] = decoded(read_topic(settings, DEADLETTER_TOPIC, 1, worker=worker))
    assert letter["key"] == "sess-origin-mark" and letter["errorClass"] == "UnknownOrigin"
    assert "came without an origin" in letter["reason"]


def _bad(tmp_path: Path) -> Path:
    """A capture of one response without origin that answers nothing in flight."""
    out = tmp_path / "bad.capture.jsonl"
    out.write_text(json.dumps({"t": 1_764_000_000_000, "msg": {"id": 3, "result": {}}}) + "\n")
    return out
