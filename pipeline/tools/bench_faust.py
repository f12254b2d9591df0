"""The plain Faust passthrough of `canonflow bench` (3): one agent forwarding each
record as it comes, the way a first Faust normaliser would be written. Run as
`python -m pipeline.tools.bench_faust SRC DST` with CANONFLOW_* settings in the environment."""

from __future__ import annotations

import sys

import faust

from pipeline.settings import Settings, from_env


def create_passthrough_app(settings: Settings, src: str, dst: str) -> faust.App:
    app = faust.App(settings.app_id, broker=settings.broker, autodiscover=False,
                    web_enabled=False, consumer_auto_offset_reset="earliest",
                    topic_partitions=settings.partitions,
                    broker_rebalance_timeout=settings.rebalance_timeout,
                    broker_session_timeout=max(10.0, settings.rebalance_timeout))
    source = app.topic(src, key_serializer="raw", value_serializer="raw")
    sink = app.topic(dst, key_serializer="raw", value_serializer="raw")

    async def forward(stream: faust.StreamT) -> None:
        async for event in stream.events():
            await sink.send(key=event.key, value=event.value, partition=event.message.partition)

    app.agent(source, name="passthrough")(forward)
    return app


if __name__ == "__main__":
    app = create_passthrough_app(from_env(), sys.argv[1], sys.argv[2])
    try:
        faust.Worker(app, loglevel="warning", quiet=True, redirect_stdouts=False
                     ).execute_from_commandline()
    except SystemExit:
        pass
