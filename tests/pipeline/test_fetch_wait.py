"""The worker's consumer waits at most CANONFLOW_FETCH_MAX_WAIT for a fetch (issue 24):
Faust's driver fixes 1.5 s, and a broker that waits a fetch out (the embedded Tansu)
then held every record of a live session up to that long."""

from __future__ import annotations

import asyncio

from pipeline.settings import Settings
from pipeline.worker.app import create_app


def _fetch_wait_ms(settings: Settings) -> int:
    async def build() -> int:
        app = create_app(settings)
        thread = app.consumer._thread
        consumer = thread._create_worker_consumer(app.transport)
        return consumer._fetch_max_wait_ms  # what its fetcher is started with

    return asyncio.run(build())


def test_the_consumer_fetches_with_the_configured_wait():
    base = Settings(broker="kafka://127.0.0.1:9", web_enabled=False)
    assert _fetch_wait_ms(base) == 50
    assert _fetch_wait_ms(base.replace(fetch_max_wait=1.5)) == 1500
