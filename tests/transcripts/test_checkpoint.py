"""The shipper's checkpoint: replaced atomically, held by one shipper at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipeline.transcripts.checkpoint import Checkpoint, CheckpointError
from pipeline.transcripts.sources import FileState


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


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    path = str(tmp_path / "ship.json")
    with Checkpoint(path) as cp:
        cp.state.batch = 1
        cp.save()
        cp.state.batch = 2

        def crash(*_: object) -> None:
            raise OSError("disk gone")

        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(OSError):
            cp.save()
    assert json.loads(Path(path).read_text())["batch"] == 1


def test_a_file_that_is_not_a_checkpoint_is_one_clear_error(tmp_path: Path):
    path = tmp_path / "ship.json"
    path.write_text("{not json")
    with pytest.raises(CheckpointError, match="not a shipper checkpoint"):
        Checkpoint(str(path)).open()
