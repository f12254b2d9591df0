"""Thousands of session files: a shipper's poll stats each file once and opens, or
lists, only what changed (`canonflow ship` on a fleet machine's long history)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pipeline.settings import Settings
from pipeline.transcripts.checkpoint import Checkpoint
from pipeline.transcripts.discovery import load_kinds
from pipeline.transcripts.ship import Shipper

PAST = 1_600_000_000 * 1_000_000_000  # an mtime long past: nothing looks freshly written


def make_home(root: Path, files: int, per_dir: int = 50) -> list[Path]:
    paths = []
    for n in range(files):
        d = root / ".claude" / "projects" / f"-work-{n // per_dir:04d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{n:08d}-0000-4000-8000-000000000000.jsonl"
        p.write_bytes(b'{"type":"queue-operation","operation":"enqueue","sessionId":"x"}\n')
        paths.append(p)
    for p in [*paths, *{p.parent for p in paths}, root / ".claude" / "projects",
              root / ".claude", root]:
        os.utime(p, ns=(PAST, PAST))
    return paths


def poll(shipper: Shipper) -> tuple[float, int, int, int]:
    """One poll, its records taken as delivered: (seconds, records, files opened,
    directories listed)."""
    opened, listed = shipper.stats.opened, shipper.stats.listed
    t0 = time.perf_counter()
    batch = shipper.poll()
    seconds = time.perf_counter() - t0
    shipper._commit(batch.files, batch.dbs, set(range(len(batch.values))))
    return (seconds, len(batch.values), shipper.stats.opened - opened,
            shipper.stats.listed - listed)


@pytest.mark.serial
def test_a_poll_of_thousands_of_unchanged_files_opens_and_lists_nothing(tmp_path: Path):
    kinds, missing = load_kinds("claude")
    report = []
    for files in (1000, 5000):
        home = tmp_path / f"home{files}"
        paths = make_home(home, files)
        with Checkpoint(str(tmp_path / f"cp{files}.json")) as cp:
            shipper = Shipper(Settings(), [str(home)], cp, kinds, missing, say=print)
            first = poll(shipper)
            while shipper.poll().values:  # the batch limit may leave some for later
                pass
            assert first[1] > 0
            idle = min(poll(shipper) for _ in range(3))
            assert idle[1:] == (0, 0, 0)  # unchanged: nothing read, opened or listed
            with open(paths[7], "ab") as fh:  # one session grows
                fh.write(b'{"type":"user","sessionId":"x"}\n')
            grown = poll(shipper)
            assert grown[1:] == (1, 1, 0)
            new = paths[7].with_name("ffffffff-0000-4000-8000-000000000000.jsonl")
            new.write_bytes(b'{"type":"user","sessionId":"y"}\n')  # a session appears
            appeared = poll(shipper)
            assert appeared[1] == 1 and appeared[3] == 1  # its directory alone is listed
            report.append((files, first[0], idle[0]))
    (f1, _, idle1), (f5, first5, idle5) = report
    print(f"\nship poll: {f1} files unchanged {idle1 * 1000:.1f} ms, {f5} files unchanged "
          f"{idle5 * 1000:.1f} ms ({idle5 / f5 * 1e6:.1f} us per file), first read of {f5} "
          f"files {first5 * 1000:.0f} ms")
    assert idle5 < 2.0  # one stat per file and per directory: milliseconds, not seconds
