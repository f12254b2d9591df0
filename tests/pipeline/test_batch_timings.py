"""CANONFLOW_BATCH_TIMINGS (issue 24): where a live record's time goes in the worker.
Each normalize batch, once acknowledged, appends one JSON line with its records, its
oldest record's age when it began, and each step's seconds; `canonflow bench --latency`
reads them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import read_topic
from topics.catalog import CANONICAL_TOPIC

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
STEPS = ("translate", "publish", "store", "count")


def test_every_batch_appends_its_steps_once_delivered(settings, tmp_path):
    timings = tmp_path / "batches.jsonl"
    path = CAPTURED / "codex-exec" / "codex-exec__reasoning.capture.jsonl"
    records = records_from_file(str(path), "capture")
    worker = WorkerProcess(settings.replace(batch_timings=str(timings)),
                           log_path=str(tmp_path / "worker.log")).start()
    try:
        asyncio.run(produce(settings, "codex-exec", "sess-timed", records))
        events = read_topic(settings, CANONICAL_TOPIC, 1, key=b"sess-timed", worker=worker)
        assert events
        lines: list[dict] = []
        for _ in range(100):  # the line follows the batch's acknowledgement
            lines = [json.loads(x) for x in timings.read_text().splitlines()] \
                if timings.exists() else []
            if sum(b["records"] for b in lines) >= len(records):
                break
            asyncio.run(asyncio.sleep(0.1))
    finally:
        worker.stop()
    assert sum(b["records"] for b in lines) == len(records)
    for b in lines:
        assert b["agent"] == "normalize.codex-exec"
        assert all(b[s] >= 0 for s in STEPS) and b["publish"] > 0  # a delivery took time
        assert 0 <= b["oldest_age"] < 60 and b["at"] > 1.7e9
