"""Real-broker fixtures: a broker (Apache Kafka or the embedded Tansu,
tests.pipeline.brokers) and canonflow workers as child processes. Everything started
here is stopped by its own PID, even when a test fails."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.tools.kafka_io import follow
from pipeline.worker.process import WorkerProcess, ensure_topics
from tests.pipeline.brokers import TEST_REBALANCE_TIMEOUT, Broker, fresh_broker, on_broker

_app_ids = itertools.count()


@pytest.fixture
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A broker with no topic on it (tests.pipeline.brokers): on Tansu, one of the
    test's own (it starts in milliseconds; a broker shared by the whole run made every
    new consumer group read all that earlier tests produced, 100,000 sessions of
    test_bounded_state among them, before its own records); on Kafka, this process's,
    no record of an earlier test on it. A test whose topics have other than 4 partitions
    says so with `@pytest.mark.partitions(n)`; one that needs its offsets to start at 0,
    with `@pytest.mark.new_topics`."""
    marker = request.node.get_closest_marker("partitions")
    with fresh_broker(tmp_path, partitions=marker.args[0] if marker else 4,
                      reuse=request.node.get_closest_marker("new_topics") is None) as b:
        yield b


@pytest.fixture
def settings(broker: Broker, tmp_path: Path) -> Settings:
    """Settings for one test: its own consumer group (app id) and data dir, 4 partitions."""
    s = Settings(app_id=f"canonflow-test-{next(_app_ids)}", partitions=4, web_enabled=False,
                 data_dir=str(tmp_path / "data"), rebalance_timeout=TEST_REBALANCE_TIMEOUT)
    s = on_broker(s, broker)
    ensure_topics(s)
    return s


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    w = WorkerProcess(settings, log_path=str(tmp_path / "worker.log")).start()
    try:
        yield w
    finally:
        w.stop()


def read_topic(settings: Settings, topic: str, want: int, *, key: bytes | None = None,
               timeout: float = 60.0, worker: WorkerProcess | None = None) -> list[Any]:
    """The first `want` records of `topic` (with `key`, if given); fewer on timeout or
    when `worker` has died (its log then says why)."""
    got: list[Any] = []

    def take(rec: Any) -> bool:
        if key is None or rec.key == key:
            got.append(rec)
        return len(got) >= want

    give_up = (lambda: not worker.alive()) if worker is not None else None
    asyncio.run(follow(settings, [topic], take, deadline=time.monotonic() + timeout,
                       give_up=give_up))
    if worker is not None and not worker.alive() and len(got) < want:
        raise AssertionError(f"the worker died; see {worker.log_path}")
    return got


def decoded(records: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in records]


def timed(path: Path, tmp_path: Path) -> Path:
    """A copy of a capture whose lines carry capture times (`t`), so the worker (which
    reads them from the `t` header) and replay see the same times and give the same
    events, eventIds and createdAt included."""
    out = tmp_path / path.name
    lines = [json.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    out.write_text("".join(json.dumps({**x, "t": 1_764_000_000_000 + 10 * i}) + "\n"
                           for i, x in enumerate(lines)))
    return out
