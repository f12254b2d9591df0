"""`canonflow demo`: the main job on one machine, start to finish, then exit.

Starts the embedded broker, creates the catalog, runs a worker (child process),
produces the bundled sample sessions (pipeline/samples/<provider>__<name>.jsonl,
capture format) into their raw topics, and prints the canonical events as they
arrive, until every event the samples translate to has arrived.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from pipeline.kafka_io import follow, produce, records_from_file
from pipeline.render import render
from pipeline.replay import Replayer, iter_lines
from pipeline.settings import Settings
from pipeline.worker import WorkerProcess, broker_for, ensure_topics
from topics.catalog import CANONICAL_TOPIC, PROVIDERS

SAMPLES = Path(__file__).resolve().parent / "samples"


def samples() -> list[tuple[str, str, Path]]:
    """(provider, session id, path) of every bundled sample whose provider is known."""
    out = []
    for path in sorted(SAMPLES.glob("*.jsonl")):
        provider, _, name = path.stem.partition("__")
        if provider in PROVIDERS:
            out.append((provider, f"demo-{provider}-{name}", path))
    return out


def expected_count(provider: str, session: str, path: Path) -> int:
    """How many canonical events the sample gives (the same adapters, offline)."""
    rep = Replayer(provider)
    n = 0
    with open(path, "rb") as fh:
        for offset, raw in iter_lines(fh):
            n += len(rep.feed(session, offset, raw, "capture")[0])
    return n


def run_demo(settings: Settings, *, timeout: float = 90.0, out=sys.stdout) -> int:  # noqa: ANN001
    """Run the demo; returns 0 when every expected event arrived in time."""
    chosen = [s for s in samples() if s[0] in settings.providers]
    want = sum(expected_count(*s) for s in chosen)
    log = os.path.join(tempfile.gettempdir(), f"canonflow-demo-worker-{os.getpid()}.log")
    with broker_for(settings) as live:
        ensure_topics(live)
        worker = WorkerProcess(live.replace(web_enabled=False), log_path=log).start()
        try:
            print(f"canonflow demo: worker pid {worker.pid} (log {log}); producing "
                  f"{len(chosen)} sample session(s), expecting {want} canonical events",
                  file=out, flush=True)
            for provider, session, path in chosen:
                asyncio.run(produce(live, provider, session,
                                    records_from_file(str(path), "capture")))
            seen = 0

            def show(rec) -> bool:  # noqa: ANN001
                nonlocal seen
                seen += 1
                print(render(json.loads(rec.value)), file=out, flush=True)
                return seen >= want

            asyncio.run(follow(live, [CANONICAL_TOPIC], show,
                               deadline=time.monotonic() + timeout,
                               give_up=lambda: not worker.alive()))
        finally:
            worker.stop()
    ok = seen >= want
    print(f"canonflow demo: {seen}/{want} canonical events "
          f"{'received' if ok else 'received before the timeout'}", file=out, flush=True)
    return 0 if ok else 1
