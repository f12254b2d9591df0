"""The Faust application, built by a factory from settings (nothing happens on import).

One normalize agent per raw topic (`agents.raw.<provider>`), each with its own
session table (`sessions.<provider>`, changelog-backed, co-partitioned with the raw
topic). Agents stay thin: for a batch of records, read each session's state, run the
`Normalizer` (translation, then the chat projection of the events it made), publish
the canonical events and chat records on the record's own partition (the topics are
co-partitioned, so a session keeps one partition end to end) and dead letters to
`agents.deadletter`, wait until they are delivered, then store the new states and
count the delivered events into the fleet-metrics stage (`pipeline.worker.fleet`).
Bad input never reaches the supervisor: it is dead-lettered.

Each batch leaves through a `Checkpoint` (pipeline.worker.checkpoint), the one commit
path of everything the worker publishes or stores: publish, then store, then
acknowledge. A delivery that fails (the broker went away, a timeout) is
sent again with backoff until it succeeds (pipeline.worker.output): the batch's records
are not acknowledged and its states not stored meanwhile, and /health says degraded.
Every agent counts what it did per batch into `pipeline.ops.metrics` (served with
/health by `pipeline.ops.web`). Idle sessions are closed by a timer of each agent
(pipeline.worker.idle), and sessions that wait too long on the model, a tool or an
approval are said to be stalled by another (pipeline.worker.stall); both hand their
outputs to a checkpoint, and share the agent's `ProcessingContext`
(pipeline.worker.context). The source watch
(pipeline.worker.watch) checks the worker's topics and read positions for /health, and
repairs what a broker that lost its storage left behind.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

import faust

from pipeline.ops.metrics import WorkerMetrics
from pipeline.ops.web import Health, install_web
from pipeline.settings import Settings
from pipeline.worker.checkpoint import Checkpoint, PendingChangelog, commit_fleet
from pipeline.worker.context import ProcessingContext, Sessions, Tables
from pipeline.worker.exceptions import Abandoned
from pipeline.worker.faust_consumer import TableManager, tune_consumer
from pipeline.worker.faust_internals import (
    add_table,
    forget_unacknowledged,
    hold_unacknowledged,
    local_size,
    release_acks,
    set_current_event,
    take_batches,
)
from pipeline.worker.fleet import FleetStage, add_fleet
from pipeline.worker.idle import add_idle_expiry
from pipeline.worker.normalize import Normalizer, internal_error
from pipeline.worker.output import STOP_POLL_SECONDS, OutputProducer
from pipeline.worker.stall import add_stall_watch
from pipeline.worker.watch import add_source_watch
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, raw_topic

log = logging.getLogger("canonflow")


def broker_credentials(settings: Settings) -> Any:
    """Faust credentials for TLS / SASL, or None for plaintext."""
    from faust.auth import SASLCredentials, SSLCredentials

    ssl_context = None
    if settings.security_protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        ssl_context = create_ssl_context(cafile=settings.ssl_cafile,
                                         certfile=settings.ssl_certfile,
                                         keyfile=settings.ssl_keyfile)
    if settings.sasl_mechanism:
        return SASLCredentials(username=settings.sasl_username, password=settings.sasl_password,
                               mechanism=settings.sasl_mechanism, ssl_context=ssl_context)
    if ssl_context is not None:
        return SSLCredentials(ssl_context)
    return None


def create_app(settings: Settings) -> faust.App:
    """A Faust app with one normalize agent per configured provider."""
    if not settings.broker:
        raise ValueError("settings.broker is empty: start the embedded broker first")
    extra: dict[str, Any] = {}
    if settings.producer_max_batch_size:
        extra["producer_max_batch_size"] = settings.producer_max_batch_size
    credentials = broker_credentials(settings)
    if credentials is not None:
        extra["broker_credentials"] = credentials
    app = faust.App(
        settings.app_id,
        broker=settings.broker,
        store=settings.store,
        datadir=settings.data_dir,
        autodiscover=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        web_enabled=settings.web_enabled,
        web_host=settings.web_host,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        web_in_thread=False,
        producer_acks=-1,
        TableManager=TableManager,
        producer_linger=settings.producer_linger,
        broker_rebalance_timeout=settings.rebalance_timeout,
        broker_session_timeout=max(10.0, settings.rebalance_timeout),
        **extra,
    )
    tune_consumer(app, settings.fetch_max_wait)
    for topic in (CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC):
        app.topic(topic, key_serializer="raw", value_serializer="raw",
                  partitions=settings.partitions)
    metrics, health = WorkerMetrics(), Health()
    sink = OutputProducer(settings, metrics, health, stopping=lambda: app.should_stop)
    app.on_before_shutdown.connect(sink.stop)
    tables: dict[str, Any] = {}  # name -> Faust table, for /metrics' table sizes
    fleet = None
    if settings.fleet_enabled:
        fleet = add_fleet(app, settings, metrics)
        tables["fleet.windows"], tables["fleet.sessions"] = fleet.windows, fleet.sessions
        _add_fleet_publication(app, settings, fleet, sink)
    for provider in settings.providers:
        tables[f"sessions.{provider}"] = _add_normalizer(app, settings, provider, sink, metrics,
                                                         fleet)
    install_web(app, settings, metrics, health,
                {name: partial(local_size, t) for name, t in tables.items()}, sink.probe)
    add_source_watch(app, settings, health, sink)
    return app


def _add_fleet_publication(app: faust.App, settings: Settings, stage: FleetStage,
                           sink: OutputProducer) -> None:
    """The timer that publishes the fleet stage's windows to agents.metrics every
    settings.fleet_publish_interval seconds (checkpoint.commit_fleet)."""

    async def publish_windows() -> None:
        if not app.should_stop:
            await commit_fleet(stage, sink, app)

    app.timer(settings.fleet_publish_interval, name="fleet.publish")(publish_windows)


def _add_normalizer(app: faust.App, settings: Settings, provider: str,
                    sink: OutputProducer, metrics: WorkerMetrics,
                    fleet: FleetStage | None) -> Any:
    source = app.topic(raw_topic(provider), key_serializer="raw", value_serializer="raw",
                       partitions=settings.partitions)
    table = add_table(app, settings, f"sessions.{provider}")
    # the open items' pending text and output, chunk by chunk (normalize.BatchSpool)
    items = add_table(app, settings, f"items.{provider}")
    step = Normalizer(provider, include_raw=settings.include_raw,
                      max_record_bytes=settings.max_record_bytes,
                      max_message_bytes=settings.max_message_bytes,
                      chat=settings.chat_enabled, item_cap=settings.item_cap,
                      summaries=settings.sessions_enabled)
    name = f"normalize.{provider}"
    tables = Tables(table, items, step.redactor)
    counted = (fleet.windows, fleet.sessions) if fleet is not None else ()
    sessions = Sessions(PendingChangelog(tables, sink, name, partial(release_acks, app),
                                         counted))
    ctx = ProcessingContext(app, settings, name, provider, tables, step, sessions, sink,
                            metrics, fleet)
    _add_batched_agent(ctx, source)
    add_idle_expiry(ctx)
    add_stall_watch(ctx)
    return table


def _add_batched_agent(ctx: ProcessingContext, source: faust.TopicT) -> None:
    """The normalize agent of one raw topic: `step` over batches of records, each batch
    through a new `checkpoint()` (publish -> store -> acknowledge: see
    pipeline.worker.checkpoint), under the lock it shares with the idle and stall scans.

    Each record is processed in order, reading its session's state from the batch's own
    checkpoint (a session's state is read once and written once per batch, however many
    of its records the batch holds). A batch that is not acknowledged when the agent
    stops or crashes is held back from Faust (faust_internals.hold_unacknowledged).

    A batch given up as the worker stops (its delivery was being sent again:
    output.Abandoned) is not acknowledged either: the agent then waits for Faust to
    cancel it, taking its records off what Faust's shutdown waits for.

    A delivered batch's states go with the next batch's delivery (pipeline.worker.checkpoint),
    or on their own once the agent has had nothing to deliver for a moment, or as it
    stops."""
    app, settings, name, step, sessions = ctx.app, ctx.settings, ctx.name, ctx.step, \
        ctx.sessions
    topic = source.get_topic_name()
    pending = sessions.pending

    async def run(stream: faust.StreamT) -> None:
        batches = take_batches(stream, settings.batch_max, settings.batch_within)
        delivered = True
        try:
            async for events in batches:
                delivered = False
                async with sessions.lock:
                    batch = Checkpoint(ctx)
                    _translate(events, batch)
                    try:
                        await batch.commit()
                    except Abandoned:
                        pass
                if not batch.acknowledged:
                    await _given_up()  # never returns: Faust cancels the agent
                delivered = True
                pending.schedule(sessions.lock, partial(forget_unacknowledged, app, topic))
        except BaseException as e:
            if not delivered:
                hold_unacknowledged(batches)
            if isinstance(e, asyncio.CancelledError):
                await pending.settle(sessions.lock)
            raise

    async def _given_up() -> None:
        """Wait for the end: Faust cancels the agent once its shutdown is over. The
        records handed out meanwhile (the batch, the ones fetched after it) are taken
        off Faust's waiting list as they come."""
        while True:
            forget_unacknowledged(app, topic)
            await asyncio.sleep(STOP_POLL_SECONDS)

    def _translate(events: Any, batch: Checkpoint) -> None:
        spool = batch.spool
        for event in events:
            msg, key, value = event.message, event.key, event.value
            ts = msg.timestamp
            partition = msg.partition
            spool.at(partition, event)
            try:
                if key is not None:
                    # the RocksDB store reads this record's partition: the session's
                    # entry, and its items' spooled chunks (read by any record of it)
                    set_current_event(event)
                stored = batch.stored(key) if key is not None else None
                out = step.process(stored, key, value, partition=partition,
                                   offset=msg.offset, timestamp_ms=int(ts * 1000) if ts else None,
                                   headers=event.headers, spool=spool)
            except Exception as e:  # a bug must not stop the worker: keep the record
                log.exception("%s failed on %s[%s]@%s", name, msg.topic, partition,
                              msg.offset)
                out = internal_error(step, e, key, value, partition=partition,
                                     offset=msg.offset)
            batch.add(out, key, value, partition, msg.offset, ts, event)

    app.agent(source, name=name)(run)
