"""The readers: session files followed as they grow, are rewritten or truncated; SQLite
databases read through their WAL while a writer writes, never locking it."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import msgspec
import pytest

from pipeline.transcripts.discovery import Kind
from pipeline.transcripts.sources import (
    Database,
    DbState,
    FileSource,
    FileState,
    SourceError,
    TooLong,
)
from tests.transcripts.helpers import insert, writer

CLAUDE = Kind("claude", "claude-transcript", homes=(".claude",), files=("projects/*/*.jsonl",))
GEMINI = Kind("gemini", "gemini-transcript", homes=(".gemini",),
              files=("tmp/*/chats/session-*.jsonl",))
OPENCODE = Kind("opencode", "opencode-transcript", homes=(".local/share/opencode",),
                databases=("opencode.db",), tables=(("event", "aggregate_id", "seq"),))
SCHEMA = "CREATE TABLE event (id TEXT PRIMARY KEY, aggregate_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL);\n"


def values(reading) -> list[bytes]:  # noqa: ANN001
    return [v for _, v, _ in reading.records if v is not None]


def take(src, **kw) -> list[bytes]:  # noqa: ANN001
    """Read and commit everything the source gives now."""
    reading = src.read(**kw)
    for _, _, mark in reading.records:
        src.commit(mark)
    return values(reading)


def line(n: int, sid: str = "s1") -> bytes:
    return b'{"type":"user","sessionId":"%s","n":%d}' % (sid.encode(), n)


# ---- files ----------------------------------------------------------------------


def test_a_line_longer_than_its_topic_takes_is_one_too_long_and_reading_goes_on_after_it(
        tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    long = b'{"type":"user","sessionId":"s1","text":"' + b"y" * 500 + b'"}'
    path.write_bytes(line(1) + b"\n" + long + b"\r\n" + line(2) + b"\n" + long[:300])
    src = FileSource(str(path), CLAUDE)
    src.max_line = 100
    got = take(src)
    assert got[0::2] == [line(1), line(2)]
    assert got[1] == TooLong(head=long, size=len(long), sha256=hashlib.sha256(long).hexdigest(),
                             raw_size=len(long) + 2, crc=zlib.crc32(long + b"\r\n"),
                             file_crc=zlib.crc32(line(1) + b"\n" + long + b"\r\n"),
                             finished=True)
    assert len(got) == 3  # the long last line waits for its newline
    with open(path, "ab") as fh:
        fh.write(b"\n" + line(3) + b"\n")
    again = FileSource(str(path), CLAUDE, src.state)  # restarted from the saved state
    again.max_line = 100
    reading = again.read()
    assert reading.rewritten == ""  # the checksum runs through the long lines
    assert [v.size if isinstance(v, TooLong) else v for _, v, _ in reading.records
            if v is not None] == [300, line(3)]


def test_a_growing_file_gives_each_complete_line_once_and_waits_for_a_half_line(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line(1) + b"\n" + line(2) + b"\n" + line(3)[:10])
    src = FileSource(str(path), CLAUDE)
    assert take(src) == [line(1), line(2)]
    assert take(src) == []  # the half line waits for its newline
    with open(path, "ab") as fh:
        fh.write(line(3)[10:] + b"\n\n" + line(4) + b"\r\n")
    assert take(src) == [line(3), line(4)]
    assert take(src) == [] and src.state.pos == path.stat().st_size
    assert {s for s, _, _ in src.read().records} == {"s1"}  # the claude file's stem


def test_an_unfinished_last_line_is_read_only_by_a_final_read(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line(1) + b"\n" + b'{"type":"assis')
    assert values(FileSource(str(path), CLAUDE).read()) == [line(1)]
    assert values(FileSource(str(path), CLAUDE).read(final=True)) == [line(1), b'{"type":"assis']


def test_a_reader_restarted_from_its_checkpointed_state_reads_on_exactly(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"".join(line(n) + b"\n" for n in range(1, 6)))
    src = FileSource(str(path), CLAUDE)
    reading = src.read()
    for _, _, mark in reading.records[:2]:  # only the first two were delivered
        src.commit(mark)
    saved = msgspec.json.decode(msgspec.json.encode(src.state), type=FileState)
    again = FileSource(str(path), CLAUDE, saved)
    assert take(again) == [line(3), line(4), line(5)]


def test_a_file_read_in_pieces_stops_at_a_line_and_goes_on(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b"".join(line(n) + b"\n" for n in range(1, 101)))
    src = FileSource(str(path), CLAUDE)
    got, reads = [], 0
    while True:
        reading = src.read(limit=300)
        reads += 1
        for _, _, mark in reading.records:
            src.commit(mark)
        got += values(reading)
        if not reading.more:
            break
    assert got == [line(n) for n in range(1, 101)] and reads > 5


def test_a_truncated_file_is_read_again_from_its_start(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line(1) + b"\n" + line(2) + b"\n")
    src = FileSource(str(path), CLAUDE)
    take(src)
    path.write_bytes(line(7) + b"\n")  # shorter: truncated, then written
    reading = src.read()
    assert "truncated" in reading.rewritten and values(reading) == [line(7)]


def test_a_file_rewritten_in_place_with_other_bytes_is_read_again(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line(1) + b"\n" + line(2) + b"\n")
    src = FileSource(str(path), CLAUDE)
    take(src)
    with open(path, "r+b") as fh:  # same inode, same size, other bytes, then more
        fh.write(line(8) + b"\n" + line(9) + b"\n" + line(3) + b"\n")
    reading = src.read()
    assert "rewritten" in reading.rewritten
    assert values(reading) == [line(8), line(9), line(3)]


def test_a_file_replaced_by_a_copy_that_starts_with_what_was_read_reads_on(tmp_path: Path):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line(1) + b"\n" + line(2) + b"\n")
    src = FileSource(str(path), CLAUDE)
    take(src)
    tmp = tmp_path / "s1.jsonl.tmp"
    tmp.write_bytes(path.read_bytes() + line(3) + b"\n")
    os.replace(tmp, path)  # another inode, the same first bytes
    reading = src.read()
    assert reading.rewritten == "" and values(reading) == [line(3)]


def test_an_unchanged_file_is_not_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "s1.jsonl"
    path.write_bytes(line(1) + b"\n")
    old = 1_000_000_000 * 1_600_000_000  # an mtime long past: not racy
    os.utime(path, ns=(old, old))
    src = FileSource(str(path), CLAUDE)
    take(src)
    assert not src.changed()
    with open(path, "ab") as fh:
        fh.write(line(2) + b"\n")
    assert src.changed()


def test_gemini_waits_for_its_header_to_name_the_session(tmp_path: Path):
    path = tmp_path / "session-2026-12-01T10-00-abcdef01.jsonl"
    header = b'{"sessionId":"abcdef01-0000-4000-8000-000000000001","projectHash":"x","startTime":"t"}'
    path.write_bytes(header[:20])
    src = FileSource(str(path), GEMINI)
    assert take(src) == [] and src.state.session is None
    path.write_bytes(header + b"\n" + b'{"$set":{"lastUpdated":"t"}}\n')
    reading = src.read()
    assert {s for s, v, _ in reading.records} == {"abcdef01-0000-4000-8000-000000000001"}
    assert values(reading) == [header, b'{"$set":{"lastUpdated":"t"}}']


# ---- databases ------------------------------------------------------------------


def _db(tmp_path: Path) -> tuple[Path, sqlite3.Connection]:
    db = tmp_path / "opencode.db"
    return db, writer(db, SCHEMA)


def _event(n: int, session: str = "ses_a") -> dict:
    return {"id": f"evt_{session}_{n:04d}", "aggregate_id": session, "seq": n,
            "data": f'{{"n": {n}}}'}


def _rows(records: list[bytes]) -> list[tuple[str, int]]:
    out = []
    for v in records:
        rec = msgspec.json.decode(v)
        out.append((rec["row"]["aggregate_id"], rec["row"]["seq"]))
    return out


def test_a_database_written_through_its_wal_is_read_while_written_never_blocking_it(
        tmp_path: Path):
    db, w = _db(tmp_path)
    w.execute("PRAGMA busy_timeout = 0")  # the writer fails at once if a reader locks it
    src = Database(str(db), OPENCODE)
    got: list[bytes] = []
    done = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(300):
                w.execute("BEGIN IMMEDIATE")
                insert(w, "event", _event(n, "ses_a"))
                if n % 3 == 0:
                    insert(w, "event", _event(n // 3, "ses_b"))
                w.execute("COMMIT")
        except BaseException as e:  # noqa: BLE001 - the test reports it
            failures.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    polls = 0
    while not done.is_set() or polls == 0:
        got += take(src)
        polls += 1
    thread.join()
    got += take(src)
    assert failures == []
    rows = _rows(got)
    assert sorted(rows) == sorted(set(rows))  # nothing twice
    assert [n for s, n in rows if s == "ses_a"] == list(range(300))  # nothing skipped, in order
    assert [n for s, n in rows if s == "ses_b"] == list(range(100))
    assert polls > 1 and os.path.getsize(db) < os.path.getsize(str(db) + "-wal")
    w.close()


def test_a_database_at_rest_is_read_without_a_file_written_beside_it(tmp_path: Path):
    db, w = _db(tmp_path)
    for n in range(5):
        insert(w, "event", _event(n))
    w.execute("PRAGMA journal_mode = DELETE")  # folds the WAL in, as a last close does
    w.execute("PRAGMA journal_mode = WAL")
    w.close()
    before = sorted(os.listdir(tmp_path))
    assert not (tmp_path / "opencode.db-wal").exists()
    src = Database(str(db), OPENCODE)
    assert _rows(take(src)) == [("ses_a", n) for n in range(5)]
    src.close()
    assert sorted(os.listdir(tmp_path)) == before


def test_rows_deleted_or_renumbered_are_not_sent_again_and_new_rows_are_found(tmp_path: Path):
    db, w = _db(tmp_path)
    for n in range(10):
        insert(w, "event", _event(n))
    src = Database(str(db), OPENCODE)
    assert len(take(src)) == 10
    w.execute("DELETE FROM event WHERE seq < 5")
    w.execute("VACUUM")  # renumbers the rowids of a table without an INTEGER PRIMARY KEY
    for n in range(10, 13):
        insert(w, "event", _event(n))
    assert _rows(take(src)) == [("ses_a", n) for n in range(10, 13)]
    w.close()


def test_a_replaced_database_is_read_again_from_its_first_row(tmp_path: Path):
    db, w = _db(tmp_path)
    insert(w, "event", _event(0))
    src = Database(str(db), OPENCODE)
    take(src)
    w.close()
    held = open(db, "rb")  # noqa: SIM115 - keeps the old inode from being reused at once
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db, w = _db(tmp_path)
    held.close()
    insert(w, "event", _event(0, "ses_z"))
    reading = src.read()
    assert "another inode" in reading.rewritten
    for _, _, mark in reading.records:
        src.commit(mark)
    assert _rows(values(reading)) == [("ses_z", 0)]
    assert list(src.state.tables["event"].sessions) == ["ses_z"]
    w.close()


def test_a_locked_database_is_one_error_then_read_in_full(tmp_path: Path):
    db, w = _db(tmp_path)
    insert(w, "event", _event(0))
    w.execute("PRAGMA locking_mode = EXCLUSIVE")  # the writer keeps its lock: readers wait
    w.execute("BEGIN IMMEDIATE")
    insert(w, "event", _event(1))
    w.execute("COMMIT")
    src = Database(str(db), OPENCODE)
    with pytest.raises(SourceError, match="locked"):
        src.read()
    w.execute("PRAGMA locking_mode = NORMAL")
    w.execute("SELECT count(*) FROM event").fetchone()  # releases the lock
    assert _rows(take(src)) == [("ses_a", 0), ("ses_a", 1)]
    w.close()


def test_a_corrupt_database_or_one_without_the_table_is_one_error(tmp_path: Path):
    bad = tmp_path / "opencode.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    with pytest.raises(SourceError, match="corrupt|not a database"):
        Database(str(bad), OPENCODE).read()
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(SourceError, match="no such table: event"):
        Database(str(other), OPENCODE).read()


def test_a_checkpointed_database_state_survives_encoding(tmp_path: Path):
    db, w = _db(tmp_path)
    for n in range(3):
        insert(w, "event", _event(n))
    src = Database(str(db), OPENCODE)
    take(src)
    insert(w, "event", _event(3))
    saved = msgspec.json.decode(msgspec.json.encode(src.state), type=DbState)
    assert _rows(take(Database(str(db), OPENCODE, saved))) == [("ses_a", 3)]
    w.close()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to drop CAP_DAC_OVERRIDE (setpriv)")
def test_a_reader_that_cannot_write_the_shm_still_reads_the_wal_of_a_live_writer(
        tmp_path: Path):
    """Another user's database: its -shm (and directory) are not writable for the
    reader. SQLite builds the WAL index in the reader's memory; rows the writer commits
    meanwhile are read, and nothing is written beside the database."""
    db, w = _db(tmp_path)
    insert(w, "event", _event(0))
    for p in tmp_path.iterdir():
        p.chmod(0o444)
    tmp_path.chmod(0o555)
    code = ("import sys, time, msgspec\n"
            "from pipeline.transcripts.sources import Database\n"
            "from tests.transcripts.test_sources import OPENCODE\n"
            "src = Database(sys.argv[1], OPENCODE)\n"
            "def seqs():\n"
            "    r = src.read()\n"
            "    [src.commit(m) for _, _, m in r.records]\n"
            "    return [msgspec.json.decode(v)['row']['seq'] for _, v, _ in r.records if v]\n"
            "print(seqs(), flush=True)\n"
            "sys.stdin.readline()\n"
            "print(seqs(), flush=True)\n")
    # root without CAP_DAC_OVERRIDE: file modes apply to it as to any user
    proc = subprocess.Popen(
        ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c",
         code, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "[0]"
        insert(w, "event", _event(1))
        insert(w, "event", _event(2))
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "[1, 2]", proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()
        tmp_path.chmod(0o755)
        w.close()
