"""The shipper's checkpoint: replaced atomically, held by one shipper at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipeline.transcripts import checkpoint
from pipeline.transcripts.checkpoint import Checkpoint, CheckpointError, read_state
from pipeline.transcripts.sources import FileMark, FileState


def test_a_saved_checkpoint_reads_back_and_leaves_no_temporary_file(tmp_path: Path):
    path = str(tmp_path / "cp" / "ship.json")
    with Checkpoint(path) as cp:
        cp.state.files["/h/a.jsonl"] = FileState(pos=42, crc=7, session="a")
        cp.state.batch = 3
        cp.save()
        shipper = cp.state.shipper
    assert sorted(os.listdir(tmp_path / "cp")) == ["ship.json", "ship.json.lock"]
    with Checkpoint(path) as cp:
        assert cp.state.files["/h/a.jsonl"].pos == 42 and cp.state.batch == 3
        assert cp.state.shipper == shipper and len(shipper) == 16


def test_a_second_shipper_on_the_same_checkpoint_is_refused(tmp_path: Path):
    path = str(tmp_path / "ship.json")
    with Checkpoint(path), pytest.raises(CheckpointError, match="another shipper"):
        Checkpoint(path).open()
    Checkpoint(path).open().close()  # free again once the first one closed it


def _mark(pos: int, session: str = "a") -> FileMark:
    return FileMark(1, 2, pos, pos * 7, 10, 3, session)


def test_a_crash_while_writing_the_whole_state_leaves_the_previous_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = str(tmp_path / "ship.json")
    with Checkpoint(path) as cp:
        cp.state.batch = 1
        cp.save()  # the first save writes it whole
        cp.state.batch = 2

        def crash(*_: object) -> None:
            raise OSError("disk gone")

        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(OSError):
            cp.save(whole=True)
    assert json.loads(Path(path).read_text())["batch"] == 1
    monkeypatch.undo()
    with Checkpoint(path) as cp:
        assert cp.state.batch == 1


def test_a_save_appends_what_changed_and_a_line_cut_short_ends_the_journal(tmp_path: Path):
    """A save writes the marks applied since the last one, not every source: a shipper
    with years of session files wrote all of them at every batch. A crash in the middle
    of a line leaves the saves before it, and the saves after a restart read back."""
    path = str(tmp_path / "ship.json")
    with Checkpoint(path) as cp:
        for n in range(2000):  # a long history, read to its end once
            cp.apply_file(f"/h/{n:05d}.jsonl", _mark(100 + n, f"s{n}"))
        cp.save()
        whole = os.path.getsize(path)
        for pos in (200, 300, 400):  # one session grows, batch after batch
            cp.apply_file("/h/00007.jsonl", _mark(pos, "s7"))
            cp.state.batch += 1
            cp.save()
        assert os.path.getsize(path) == whole  # not written again
        line = os.path.getsize(cp.journal_path) / 3
        assert line < 300 < whole / 100  # one source's mark a save, not 2,000 sources
    with open(path + ".journal", "ab") as fh:
        fh.write(b'{"generation":1,"files":[["/h/00007.jsonl",[1,2,9')  # a crash, mid-line
    with Checkpoint(path) as cp:
        assert cp.state.files["/h/00007.jsonl"].pos == 400 and cp.state.batch == 3
        assert cp.state.files["/h/01999.jsonl"].pos == 2099 and len(cp.state.files) == 2000
        cp.apply_file("/h/00008.jsonl", _mark(500, "s8"))
        cp.forget_file("/h/00009.jsonl")
        cp.save()
    with Checkpoint(path) as cp:
        assert cp.state.files["/h/00008.jsonl"].pos == 500
        assert "/h/00009.jsonl" not in cp.state.files and cp.state.batch == 3


def test_the_journal_is_folded_into_the_file_and_a_crash_between_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = str(tmp_path / "ship.json")
    monkeypatch.setattr(checkpoint, "JOURNAL_MIN", 0)  # folded as soon as it is as large
    with Checkpoint(path) as cp:
        cp.apply_file("/h/a.jsonl", _mark(10))
        cp.save()  # whole (the first)
        stale, pos = b"", 10
        while not stale or Path(cp.journal_path).read_bytes():
            stale = Path(cp.journal_path).read_bytes() if os.path.exists(cp.journal_path) \
                else b""
            pos += 10
            cp.apply_file("/h/a.jsonl", _mark(pos))
            cp.save()
            assert pos < 200, "the journal was never folded"
        assert json.loads(Path(path).read_text())["files"]["/h/a.jsonl"]["pos"] == pos
    # a crash after the file was replaced, before its journal was emptied: the journal
    # left is of the generation before, and must not move a position back
    Path(path + ".journal").write_bytes(stale)
    with Checkpoint(path) as cp:
        assert cp.state.files["/h/a.jsonl"].pos == pos
        cp.apply_file("/h/a.jsonl", _mark(pos + 10))
        cp.save()  # appended after the stale lines, which stay skipped
    with Checkpoint(path) as cp:
        assert cp.state.files["/h/a.jsonl"].pos == pos + 10


def test_a_file_that_is_not_a_checkpoint_is_one_clear_error(tmp_path: Path):
    path = tmp_path / "ship.json"
    path.write_text("{not json")
    with pytest.raises(CheckpointError, match="not a shipper checkpoint"):
        Checkpoint(str(path)).open()


def test_a_save_that_fails_in_the_journal_is_followed_by_a_whole_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A failed append may leave part of its line: nothing is appended after it, the
    next save writes the state whole, and reading it back gives that save."""
    path = str(tmp_path / "ship.json")
    with Checkpoint(path) as cp:
        cp.apply_file("/h/a.jsonl", _mark(10))
        cp.save()  # whole (the first)
        cp.apply_file("/h/a.jsonl", _mark(20))
        cp.save()  # a journal line
        cp.apply_file("/h/a.jsonl", _mark(25))
        real_fsync = os.fsync

        def full(fd: int) -> None:
            os.ftruncate(fd, os.fstat(fd).st_size - 10)  # part of the line reached the disk
            raise OSError("no space left on device")

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(OSError):
            cp.save()
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert not Path(cp.journal_path).read_bytes().endswith(b"\n")
        assert read_state(path).files["/h/a.jsonl"].pos == 20  # a crash now: the last save
        cp.apply_file("/h/a.jsonl", _mark(30))
        cp.save()  # whole: the journal emptied, the torn part with it
        assert Path(cp.journal_path).read_bytes() == b""
    with Checkpoint(path) as cp:
        assert cp.state.files["/h/a.jsonl"].pos == 30

