"""`canonflow otel-export`: canonical events from agents.canonical or a JSONL file,
through the pure `SpanBuilder`, to the OTLP exporter in batches. A bad event is logged
and skipped, never the end of the export. aiokafka is imported only to read the topic."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import click
import msgspec

from pipeline.views.otel.builder import SpanBuilder
from pipeline.views.otel.model import NoEventTime
from pipeline.views.otel.wire import DEFAULT_ENDPOINT, Exporter, resource_attributes, traces_url

log = logging.getLogger("canonflow.otel")


class Stats(msgspec.Struct, kw_only=True):
    events: int = 0
    bad_events: int = 0
    spans: int = 0


#: One value to export: an encoded canonical event and the timestamp (ms) of the record
#: that carried it (None from a file), or None: a tick, nothing new, a chance to flush.
Value = tuple[bytes, int | None] | None


async def export_events(values: AsyncIterator[Value], exporter: Exporter,
                        builder: SpanBuilder, *, batch_size: int = 512,
                        flush_interval: float = 1.0, close_at_end: bool = False,
                        session: str | None = None) -> Stats:
    """Feed encoded canonical events through `builder` and export the spans in batches
    of up to `batch_size`, at least every `flush_interval` seconds. A value that is not
    a valid event is logged, counted and skipped. With `close_at_end`, spans still open
    when `values` ends are finished and exported too (for a file, which cannot continue).

    Raises NoEventTime at the first event without a time of its own or of its record.
    """
    import time

    decoder = msgspec.json.Decoder()
    stats, pending = Stats(), []
    last_flush = time.monotonic()
    async for item in values:
        if item is not None:
            value, record_ms = item
            stats.events += 1
            try:
                event = decoder.decode(value)
                if session is None or (isinstance(event, dict)
                                       and event.get("sessionId") == session):
                    pending += builder.feed(event, record_ms)
            except NoEventTime:
                raise
            except Exception as e:  # noqa: BLE001 - a bad event must never stop the export
                stats.bad_events += 1
                log.warning("otel-export: skipped a bad event (%s): %.200r", e, value)
        if len(pending) >= batch_size or (
                pending and time.monotonic() - last_flush >= flush_interval):
            stats.spans += len(pending)
            await exporter.export(pending)
            pending, last_flush = [], time.monotonic()
    if close_at_end:
        pending += builder.close()
    for i in range(0, len(pending), batch_size):
        await exporter.export(pending[i:i + batch_size])
    stats.spans += len(pending)
    return stats


async def file_values(path: str) -> AsyncIterator[Value]:
    """The non-blank lines of a JSONL file ("-" = stdin), without record times."""
    import sys

    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        for line in stream:
            if line.strip():
                yield line, None
    finally:
        if path != "-":
            stream.close()


async def topic_values(settings: Any, *, from_beginning: bool, idle_timeout: float | None,
                       stop: Any) -> AsyncIterator[Value]:
    """Values of agents.canonical (per-partition order) with their record timestamps,
    a None after each empty poll;
    ends when `stop` (an asyncio.Event) is set or nothing came for `idle_timeout` s."""
    import time

    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs
    from topics.catalog import CANONICAL_TOPIC

    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, **kafka_client_kwargs(settings),
                                group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest" if from_beginning else "latest")
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()
        raise
    last = time.monotonic()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for tp in sorted(batch, key=lambda tp: tp.partition):
                for rec in batch[tp]:
                    last = time.monotonic()
                    if rec.value is not None:
                        yield rec.value, rec.timestamp
            yield None
            if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                return
    finally:
        await consumer.stop()


def _url(value: str | None) -> str | None:
    """--endpoint checked when the command line is parsed (a usage error, no retries),
    by the rule the exporter uses (traces_url)."""
    if value:
        try:
            traces_url(value, env={})
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--endpoint") from None
    return value


@click.command("otel-export")
@click.option("--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
              help="kafka://host:port to read agents.canonical from (env CANONFLOW_BROKER).")
@click.option("--from-file", "from_file", type=click.Path(dir_okay=False, allow_dash=True),
              default=None, help="Read canonical events (JSON lines, e.g. `canonflow replay` "
                                 "output; - = stdin) instead of the topic.")
@click.option("--endpoint", default=None, callback=lambda ctx, param, value: _url(value),
              help="OTLP/HTTP base URL; spans go to <endpoint>/v1/traces (env "
                   "OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is; "
                   f"default {DEFAULT_ENDPOINT}). Headers, certificates, timeout and "
                   "compression come from the standard OTEL_EXPORTER_OTLP_* variables.")
@click.option("--session", "-s", default=None, help="Only this session.")
@click.option("--from-beginning/--from-now", default=True, show_default=True,
              help="Topic only: start at the oldest retained event or at new ones.")
@click.option("--idle-timeout", type=float, default=None,
              help="Topic only: exit after this many seconds without an event.")
@click.option("--capture-content", is_flag=True, envvar="CANONFLOW_OTEL_CAPTURE_CONTENT",
              help="Record tool arguments and results (gen_ai.tool.call.arguments/.result; "
                   "may hold secrets; env CANONFLOW_OTEL_CAPTURE_CONTENT).")
@click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True,
              help="Spans per OTLP request.")
def otel_export(broker: str | None, from_file: str | None, endpoint: str | None,
                session: str | None, from_beginning: bool, idle_timeout: float | None,
                capture_content: bool, batch_size: int) -> None:
    """Export canonical events as OpenTelemetry spans (GenAI conventions) over OTLP/HTTP.

    One `invoke_agent` span per turn, one `execute_tool` child span per tool call;
    deterministic ids, so exporting the same events twice gives the same spans. Reads
    agents.canonical until Ctrl-C / SIGTERM (or --idle-timeout), or a file to its end.
    Exit status 1 when some spans could not be delivered. A failed request is retried
    (429/502/503/504, connection errors) with backoff within OTEL_EXPORTER_OTLP_TIMEOUT
    (seconds, default 10), then its spans are dropped.
    """
    import asyncio
    import signal

    if from_file is None:
        from pipeline.settings import from_env

        try:
            settings = from_env(broker=broker)
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        if not settings.broker:
            raise click.UsageError("otel-export needs --broker (or CANONFLOW_BROKER), "
                                   "or --from-file")
    try:
        url = traces_url(endpoint)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    builder = SpanBuilder(capture_content=capture_content)

    async def main() -> tuple[Stats, Exporter]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if from_file is None:  # a file ends by itself; Ctrl-C stops it the usual way
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
        async with Exporter(url, resource=resource_attributes()) as exporter:
            if from_file is not None:
                values = file_values(from_file)
            else:
                values = topic_values(settings, from_beginning=from_beginning,
                                      idle_timeout=idle_timeout, stop=stop)
            stats = await export_events(values, exporter, builder, batch_size=batch_size,
                                        close_at_end=from_file is not None, session=session)
        return stats, exporter

    logging.basicConfig(level=logging.WARNING, format="canonflow: %(message)s")
    try:
        stats, exporter = asyncio.run(main())
    except NoEventTime as e:
        raise click.ClickException(
            f"{e}: spans would be dated 1970. Export from the topic (record timestamps are "
            "used) or replay a capture whose lines carry times (`t`)") from None
    except OSError as e:
        raise click.ClickException(f"cannot read {e.filename or from_file}: {e.strerror}"
                                   ) from None
    except Exception as e:
        from aiokafka.errors import KafkaError

        if isinstance(e, KafkaError):
            raise click.ClickException(f"broker {settings.broker}: {e}") from None
        raise
    click.echo(f"canonflow: otel-export: {stats.events} event(s), {stats.bad_events} bad; "
               f"{exporter.exported} span(s) exported to {url}, {exporter.dropped} dropped",
               err=True)
    if exporter.dropped:
        raise SystemExit(1)
