"""The plain Faust passthroughs of `canonflow bench`: agents forwarding each record as
it comes, the way a first Faust normaliser would be written.

* `python -m pipeline.tools.bench_faust SRC DST`: SRC's records to DST unchanged (the
  throughput ceiling, bench_ceilings.py).
* `python -m pipeline.tools.bench_faust --stamp`: one agent per raw topic, as the worker
  has, each record to agents.canonical as the smallest event the latency bench reads
  (`{"createdAt": ...}` from the record's `t` header), in the record's partition: what a
  Faust app that translates nothing takes from a raw record to agents.canonical on the
  same broker and machine (the latency floor, bench_latency.py).

Run with CANONFLOW_* settings in the environment."""

from __future__ import annotations

import sys
from typing import Any

import faust

from pipeline.settings import Settings, from_env


def _plain_app(settings: Settings) -> faust.App:
    """A Faust app with Faust's defaults, but for the broker, partitions and timeouts."""
    return faust.App(settings.app_id, broker=settings.broker, autodiscover=False,
                     web_enabled=False, datadir=settings.data_dir,
                     consumer_auto_offset_reset="earliest",
                     topic_partitions=settings.partitions,
                     broker_rebalance_timeout=settings.rebalance_timeout,
                     broker_session_timeout=max(10.0, settings.rebalance_timeout))


def create_passthrough_app(settings: Settings, src: str, dst: str) -> faust.App:
    app = _plain_app(settings)
    source = app.topic(src, key_serializer="raw", value_serializer="raw")
    sink = app.topic(dst, key_serializer="raw", value_serializer="raw")

    async def forward(stream: faust.StreamT) -> None:
        async for event in stream.events():
            await sink.send(key=event.key, value=event.value, partition=event.message.partition)

    app.agent(source, name="passthrough")(forward)
    return app


def create_stamp_app(settings: Settings) -> faust.App:
    from pipeline.worker.faust_internals import tune_consumer
    from topics.catalog import CANONICAL_TOPIC, raw_topic

    app = _plain_app(settings)
    tune_consumer(app, settings.fetch_max_wait)  # as the worker fetches (Faust: 1.5 s)
    sink = app.topic(CANONICAL_TOPIC, key_serializer="raw", value_serializer="raw")

    async def forward(stream: faust.StreamT) -> None:
        async for event in stream.events():
            await sink.send(key=event.key, value=stamp(event.headers, event.message.timestamp),
                            partition=event.message.partition)

    for provider in settings.providers:
        source = app.topic(raw_topic(provider), key_serializer="raw", value_serializer="raw")
        app.agent(source, name=f"stamp.{provider}")(forward)
    return app


def stamp(headers: Any, timestamp: float) -> bytes:
    """The stamp passthrough's event: {"createdAt": the record's `t` header (epoch ms), or
    its Kafka timestamp (s) without one}, as the worker stamps createdAt."""
    from adapters.core.ids import iso_ms
    from topics.records import HEADER_TIME

    pairs = headers.items() if hasattr(headers, "items") else headers or ()
    t = next((v for k, v in pairs if k == HEADER_TIME), None)
    return b'{"createdAt":"%s"}' % iso_ms(int(t) if t else int(timestamp * 1000)).encode()


if __name__ == "__main__":
    app = (create_stamp_app(from_env()) if sys.argv[1:] == ["--stamp"]
           else create_passthrough_app(from_env(), sys.argv[1], sys.argv[2]))
    try:
        faust.Worker(app, loglevel="warning", quiet=True, redirect_stdouts=False
                     ).execute_from_commandline()
    except SystemExit:
        pass
