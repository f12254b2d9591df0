"""What the readers may open: regular files inside their root, opened without
following a link out of it, whatever changes between the check and the open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.transcripts import roots
from pipeline.transcripts.roots import Refused, open_regular
from pipeline.transcripts.sources import Database, SourceError
from tests.transcripts.helpers import insert, writer
from tests.transcripts.test_sources import OPENCODE, SCHEMA, _event


def test_a_file_and_a_link_inside_the_root_are_opened(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "s.jsonl").write_bytes(b"inside\n")
    (tmp_path / "link.jsonl").symlink_to(Path("a") / "s.jsonl")
    for path in (tmp_path / "a" / "s.jsonl", tmp_path / "link.jsonl"):
        fh, real = open_regular(str(path), str(tmp_path))
        with fh:
            assert (fh.read(), real) == (b"inside\n", str(tmp_path / "a" / "s.jsonl"))


def test_a_directory_swapped_for_a_link_after_the_check_is_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "s.jsonl").write_bytes(b"secret\n")
    root.mkdir()
    (root / "sub").symlink_to(outside)
    # the check passed while `sub` was a directory; the open comes after the swap
    monkeypatch.setattr(roots, "confine", lambda path, root: path)
    with pytest.raises(Refused, match="became a link while opened"):
        open_regular(str(root / "sub" / "s.jsonl"), str(root))


def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    os.mkfifo(tmp_path / "s.jsonl")  # no writer: a blocking open would never return
    with pytest.raises(Refused, match="a FIFO, not a regular file"):
        open_regular(str(tmp_path / "s.jsonl"), str(tmp_path))


def _database(path: Path) -> None:
    w = writer(path, SCHEMA)
    insert(w, "event", _event(1))
    w.close()


def test_a_database_that_leads_out_of_its_root_is_not_read(tmp_path: Path):
    root, outside = tmp_path / "home", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    _database(outside / "opencode.db")
    (root / "opencode.db").symlink_to(outside / "opencode.db")
    with pytest.raises(SourceError, match="outside"):
        Database(str(root / "opencode.db"), OPENCODE, root=str(root)).read()


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_database_whose_wal_or_shm_is_a_link_is_not_read(tmp_path: Path, suffix: str):
    (tmp_path / "other").write_bytes(b"")
    _database(tmp_path / "opencode.db")
    (tmp_path / f"opencode.db{suffix}").symlink_to(tmp_path / "other")
    with pytest.raises(SourceError, match=f"opencode.db{suffix}: a link"):
        Database(str(tmp_path / "opencode.db"), OPENCODE, root=str(tmp_path)).read()
