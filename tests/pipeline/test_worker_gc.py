"""The worker's cyclic garbage collector once it has started (process._tune_gc): what
exists then is frozen, and young objects are collected every GC_YOUNG_THRESHOLD
allocations instead of Python's 700."""

from __future__ import annotations

import subprocess
import sys

_CHILD = """
import gc
from pipeline.worker.process import GC_YOUNG_THRESHOLD, _tune_gc
before = gc.get_freeze_count()
_tune_gc()
print(before, gc.get_freeze_count(), gc.get_threshold()[0], GC_YOUNG_THRESHOLD)
"""


def test_a_started_worker_freezes_what_exists_and_collects_young_objects_less_often():
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         check=True).stdout.split()
    before, frozen, young, wanted = map(int, out)
    assert before == 0 and frozen > 10_000  # the imported modules' objects, at least
    assert young == wanted > 700
