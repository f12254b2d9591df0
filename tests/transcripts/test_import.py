"""`canonflow import` from the command line: what it prints, in what order, and what
it does with input it cannot use."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import topics.runtimes
from pipeline.cli import main
from pipeline.tools.replay import ChatView
from tests.transcripts.helpers import build_db, home_of, insert, pair_dir, schema_of, writer
from topics.canonical import decode_event
from topics.chat import encode_chat
from topics.records import decode_deadletter

ROOT = Path(__file__).resolve().parents[2]


def canonflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=120)


def events(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines()]


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One HOME with two Claude Code sessions, a Codex rollout, a Gemini chat and an
    OpenCode database, from the on-disk pairs."""
    tmp = tmp_path_factory.mktemp("homes")
    home = tmp / "home"
    for runtime, scenario in (("claude-code-stream-json", "tool_shell"),
                              ("claude-code-sdk-stdio", "multi_turn"),
                              ("codex-exec", "tool_shell"), ("gemini-stream-json", "text"),
                              ("opencode-serve", "tool_shell")):
        src = home_of(pair_dir(runtime, scenario), tmp)
        shutil.copytree(src, home, dirs_exist_ok=True)
    return home


def test_import_is_byte_identical_every_run_and_gives_sessions_in_a_stable_order(homes: Path):
    first, second = canonflow("import", str(homes)), canonflow("import", str(homes))
    assert first.returncode == 0 and first.stderr == b"", first.stderr
    assert first.stdout == second.stdout
    got = events(first.stdout)
    order = [(e["provider"], e["sessionId"]) for e in got]
    sessions = list(dict.fromkeys(order))
    assert len(sessions) == 5 and sessions == sorted(sessions)  # one after the other, sorted
    for provider, sid in sessions:
        seqs = [e["seq"] for e in got if (e["provider"], e["sessionId"]) == (provider, sid)]
        assert seqs == list(range(1, len(seqs) + 1))
    assert {p for p, _ in sessions} == {"claude-transcript", "codex-transcript",
                                        "gemini-transcript", "opencode-transcript"}


def test_a_runtime_named_limits_the_import_to_its_sessions(homes: Path):
    got = events(canonflow("import", "--runtime", "opencode", str(homes)).stdout)
    assert {e["provider"] for e in got} == {"opencode-transcript"}
    assert {e["sessionId"] for e in got} == {"ses_dce2f2944ffeq19RwD1JkLHJxF"}


def test_session_sets_the_id_of_one_session_and_prefixes_each_of_several(homes: Path):
    one = events(canonflow("import", "-s", "fleet-7", str(homes / ".local")).stdout)
    assert {e["sessionId"] for e in one} == {"fleet-7"}
    many = events(canonflow("import", "-s", "fleet-7", str(homes / ".claude")).stdout)
    ids = {e["sessionId"] for e in many}
    assert len(ids) == 2 and all(i.startswith("fleet-7/") for i in ids)


def test_view_chat_is_the_chat_projection_of_the_events(homes: Path):
    got = canonflow("import", "--view", "chat", str(homes)).stdout
    view = ChatView()
    want = b"".join(encode_chat(r) + b"\n"
                    for line in canonflow("import", str(homes)).stdout.splitlines()
                    for r in view.feed(decode_event(line)))
    assert got == want and b'"type":"tool_result"' in got


def test_a_half_written_last_line_is_a_dead_letter_and_the_rest_is_imported(tmp_path: Path):
    src = next((pair_dir("claude-code-stream-json", "text") / ".claude").rglob("*.jsonl"))
    whole = src.read_bytes()
    cut = tmp_path / src.name
    cut.write_bytes(whole + whole.splitlines()[-1][:25])  # a line written half
    r = canonflow("import", str(cut))
    assert r.returncode == 0
    [dead] = [decode_deadletter(x) for x in r.stderr.splitlines()]
    assert dead.provider == "claude-transcript" and dead.errorClass == "MalformedRecord"
    assert dead.key == src.stem and dead.offset == len(whole.splitlines()) + 1
    assert events(r.stdout) == events(canonflow("import", str(src)).stdout)


def test_a_file_that_is_no_transcript_is_one_error_line_or_dead_letters_when_named(
        tmp_path: Path):
    notes = tmp_path / "notes.jsonl"
    notes.write_bytes(b'{"hello": "world"}\n\x00\x01 garbage\n')
    r = canonflow("import", str(notes))
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.decode().splitlines() == [
        f"canonflow import: {notes}: not a session file of any runtime (runtimes with an "
        "adapter: claude, codex, gemini, opencode)"]
    named = canonflow("import", "--runtime", "claude", str(notes))
    assert named.returncode == 0
    dead = [decode_deadletter(x) for x in named.stderr.splitlines()]
    assert [(d.offset, d.value) for d in dead] == [(1, b'{"hello": "world"}'),
                                                   (2, b"\x00\x01 garbage")]


def _locked_and_corrupt(tmp_path: Path) -> tuple[Path, Path, sqlite3.Connection]:
    locked = tmp_path / "locked" / ".local/share/opencode"
    locked.mkdir(parents=True)
    w = writer(locked / "opencode.db", "CREATE TABLE event (id TEXT PRIMARY KEY, aggregate_id "
               "TEXT, seq INT, type TEXT, data TEXT);")
    insert(w, "event", {"id": "evt_1", "aggregate_id": "ses_1", "seq": 0,
                        "type": "session.created.1", "data": "{}"})
    w.execute("PRAGMA locking_mode = EXCLUSIVE")
    w.execute("BEGIN IMMEDIATE")
    w.execute("COMMIT")
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    return locked / "opencode.db", corrupt, w


def test_a_locked_or_corrupt_database_is_one_error_line_and_nothing_else_is_lost(
        tmp_path: Path, homes: Path):
    locked, corrupt, w = _locked_and_corrupt(tmp_path)
    try:
        r = canonflow("import", str(homes / ".claude"), str(locked), str(corrupt))
    finally:
        w.close()
    assert r.returncode == 1
    lines = r.stderr.decode().splitlines()
    assert sorted(lines) == [f"canonflow import: {corrupt}: file is not a database (corrupt "
                             "or not SQLite)",
                             f"canonflow import: {locked}: database is locked (another "
                             "process holds a lock on it)"]
    assert events(r.stdout) == events(canonflow("import", str(homes / ".claude")).stdout)


def test_a_database_is_read_with_its_wal(tmp_path: Path):
    """Every row is in the -wal (never checkpointed, as OpenCode leaves it): a reader of
    the main file alone would find no session at all."""
    pair = pair_dir("opencode-serve", "tool_shell")
    home = home_of(pair, tmp_path)
    db = next(home.rglob("opencode.db"))
    schema = schema_of(db)
    db.unlink()
    w = build_db(schema, next(home.rglob("opencode.db.rows.jsonl")), db, keep_open=True)
    try:
        assert Path(str(db) + "-wal").stat().st_size > db.stat().st_size
        fixture = canonflow("import", str(pair)).stdout
        assert canonflow("import", str(db)).stdout == fixture != b""
    finally:
        assert w is not None
        w.close()


def test_a_runtime_without_an_adapter_is_one_line_not_a_traceback(
        tmp_path: Path, homes: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(topics.runtimes, "RUNTIMES", tuple(
        r for r in topics.runtimes.RUNTIMES if r.id != "claude-transcript"))
    r = CliRunner().invoke(main, ["import", "--runtime", "claude", str(homes)])
    assert r.exit_code == 1 and r.exception is None or isinstance(r.exception, SystemExit)
    assert r.output.splitlines() == ["canonflow import: no adapter reads claude transcripts "
                                     "here: provider 'claude-transcript' is not registered "
                                     "(topics/runtimes.py)"]
    r = CliRunner().invoke(main, ["import", str(homes / ".claude")])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "without an adapter here: no adapter reads claude transcripts" in r.output


@pytest.mark.parametrize("runtime,scenario,home", [
    ("claude-code-stream-json", "tool_shell", ".claude"),
    ("codex-exec", "tool_shell", ".codex"),
    ("gemini-stream-json", "tool_shell", ".gemini"),
])
def test_a_session_file_shipped_again_after_a_rewrite_repeats_no_text(
        runtime: str, scenario: str, home: str, tmp_path: Path):
    """What a shipper sends for a file rewritten with its whole content: everything it
    sent before, then the file again. The runtime's own ids keep every text once."""
    src = next(p for p in (pair_dir(runtime, scenario) / home).rglob("*.jsonl")
               if "rows" not in p.name)
    again = tmp_path / src.name
    again.write_bytes(src.read_bytes() * 2)
    deltas = [[e["payload"]["delta"] for e in events(canonflow("import", str(f)).stdout)
               if e["type"] == "content.delta"] for f in (src, again)]
    assert deltas[0] and deltas[1] == deltas[0]


def _read_all(home: Path, limit: int) -> tuple[dict[Any, list[tuple[int, bytes]]], list[str]]:
    from pipeline.tools.importer import read_sessions
    from pipeline.transcripts.discovery import load_kinds, locate

    kinds, missing = load_kinds(None)
    located = locate([str(home)], kinds, missing, explicit=False)
    errors: list[str] = []
    spilled = read_sessions(located.found, errors, limit=limit)
    try:
        return {key: list(spilled.records(key)) for key in sorted(spilled.index)}, errors
    finally:
        spilled.close()


def test_sources_read_a_record_at_a_time_give_the_records_read_whole(homes: Path):
    """Files and databases are read a limit at a time, as the shipper reads them: the
    records, their sessions and their numbers are the same whatever the limit."""
    from pipeline.transcripts.sources import READ_LIMIT

    whole, errors = _read_all(homes, READ_LIMIT)
    assert not errors and len(whole) == 5
    assert {provider for provider, _ in whole} == {
        "claude-transcript", "codex-transcript", "gemini-transcript", "opencode-transcript"}
    assert all(numbers == sorted(set(numbers)) for numbers in
               ([n for n, _ in records] for records in whole.values()))
    assert _read_all(homes, 1) == (whole, [])


class _Count:
    """An output that keeps nothing: what an import writes is not what it holds."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def _many_claude_sessions(home: Path, copies: int) -> Path:
    """A HOME with `copies` copies of a Claude Code transcript, each its own session."""
    source = next((pair_dir("claude-code-sdk-stdio", "multi_turn") / ".claude" / "projects")
                  .rglob("*.jsonl"))
    text = source.read_text()
    project = home / ".claude" / "projects" / "-sandbox-workspace"
    project.mkdir(parents=True)
    for n in range(copies):
        sid = f"00000000-0000-4000-8000-{n:012d}"
        (project / f"{sid}.jsonl").write_text(text.replace(source.stem, sid))
    return home


def test_an_import_holds_one_session_at_a_time_not_the_whole_history(tmp_path: Path):
    """It read every session of every file into memory before translating the first, and
    kept every session's state to the end: a fleet's history, all of it at once (3,000
    Claude sessions, 469 MB, peaked at 561 MB of RSS; now 68 MB). The records wait in a
    temporary file, memory keeps where they are, and a session's state goes when it is
    done. Python's allocations, counted (tracemalloc), for 8 and 64 sessions."""
    import gc
    import tracemalloc

    from pipeline.tools.importer import run_import

    warm = _many_claude_sessions(tmp_path / "warm", 1)  # the adapters' imports and caches
    run_import([str(warm)], _Count(), _Count(), say=lambda s: None)  # type: ignore[arg-type]
    peaks, sizes = [], []
    for copies in (8, 64):
        home = _many_claude_sessions(tmp_path / f"home{copies}", copies)
        out, err = _Count(), _Count()
        # the heap earlier tests left in this process, out of the collector's count: a
        # large old generation is collected rarely, and the cycles a run leaves would
        # then wait longer, as many as it has sessions (failed so once in the full suite)
        gc.collect()
        gc.freeze()
        tracemalloc.start()
        try:
            status = run_import([str(home)], out, err, say=lambda s: None)  # type: ignore[arg-type]
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
            gc.unfreeze()
        assert status == 0 and err.size == 0
        sizes.append(out.size)
    assert sizes[1] > 7.5 * sizes[0]  # eight times the sessions were translated
    # in about the same memory: the whole history would take eight times as much; what
    # grows is where each record waits in the temporary file (a few bytes a record) and
    # the allocator's own slack, which earlier tests in the process widen (measured 1.24x
    # alone, 1.52x once in the full suite)
    assert peaks[1] < 2.5 * peaks[0], peaks


def test_a_full_temporary_directory_stops_the_import_with_one_line(
        homes: Path, monkeypatch: pytest.MonkeyPatch):
    """The records wait in a temporary file: a $TMPDIR without room says so, and the
    import stops before it has written anything (no source is blamed for it)."""
    import errno
    import io
    import tempfile

    from pipeline.tools.importer import run_import

    class Full(io.BytesIO):
        def write(self, data: Any) -> int:
            if self.tell() + len(data) > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(data)

    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **_: Full())
    said: list[str] = []
    out, err = io.BytesIO(), io.BytesIO()
    assert run_import([str(homes)], out, err, say=said.append) == 1
    assert out.getvalue() == err.getvalue() == b""
    [line] = said
    assert "No space left on device" in line and "set TMPDIR" in line
    assert line.endswith("nothing imported")
