"""The Faust application, built by a factory from settings (nothing happens on import).

One normalize agent per raw topic (`agents.raw.<provider>`), each with its own
session table (`sessions.<provider>`, changelog-backed, co-partitioned with the raw
topic). An agent stays thin: read the session's state, run `Normalizer.process`,
publish the canonical events to `agents.canonical` on the record's own partition
(the topics are co-partitioned, so a session keeps one partition end to end),
dead letters to `agents.deadletter`, wait until they are delivered, then store
the new state. Bad input never reaches the supervisor: it is dead-lettered.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from pipeline.normalize import ChatProjector, Normalizer
from pipeline.settings import Settings
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, raw_topic
from topics.records import DeadLetter, encode_deadletter

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
        broker_rebalance_timeout=settings.rebalance_timeout,
        broker_session_timeout=max(10.0, settings.rebalance_timeout),
        **extra,
    )
    canonical = app.topic(CANONICAL_TOPIC, key_serializer="raw", value_serializer="raw",
                          partitions=settings.partitions)
    deadletter = app.topic(DEADLETTER_TOPIC, key_serializer="raw", value_serializer="raw",
                           partitions=settings.partitions)
    for provider in settings.providers:
        _add_normalizer(app, settings, provider, canonical, deadletter)
    if settings.chat_enabled:
        _add_chat(app, settings, canonical, deadletter)
    return app


def _add_normalizer(app: faust.App, settings: Settings, provider: str,
                    canonical: faust.TopicT, deadletter: faust.TopicT) -> None:
    source = app.topic(raw_topic(provider), key_serializer="raw", value_serializer="raw",
                       partitions=settings.partitions)
    table = app.Table(f"sessions.{provider}", partitions=settings.partitions,
                      key_type=bytes, value_type=bytes, default=None)
    normalizer = Normalizer(provider, include_raw=settings.include_raw,
                            max_record_bytes=settings.max_record_bytes)

    async def normalize(stream: faust.StreamT) -> None:
        async for event in stream.events():
            msg = event.message
            key: bytes | None = event.key
            try:
                stored = table.get(key) if key is not None else None
                out = normalizer.process(
                    stored, key, event.value, partition=msg.partition, offset=msg.offset,
                    timestamp_ms=int(msg.timestamp * 1000) if msg.timestamp else None,
                    headers=event.headers)
            except Exception as e:  # a bug must not stop the worker: keep the record
                log.exception("normalize %s failed on %s[%s]@%s", provider, msg.topic,
                              msg.partition, msg.offset)
                out_dead = encode_deadletter(DeadLetter(
                    topic=msg.topic, partition=msg.partition, offset=msg.offset,
                    provider=provider, key=key.decode("utf-8", "replace") if key else None,
                    errorClass=f"InternalError.{type(e).__name__}", reason=str(e),
                    value=event.value or b""))
                fut = await deadletter.send(key=key, value=out_dead, partition=msg.partition)
                await fut
                continue
            pending = [await canonical.send(key=key, value=v, partition=msg.partition)
                       for v in out.records]
            pending += [await deadletter.send(key=key, value=v, partition=msg.partition)
                        for v in out.deadletters]
            if pending:
                # state must never be ahead of what was published (see pipeline.normalize)
                await asyncio.gather(*pending)
            if out.state is not None and key is not None:
                table[key] = out.state

    app.agent(source, name=f"normalize.{provider}")(normalize)


def _add_chat(app: faust.App, settings: Settings, canonical: faust.TopicT,
              deadletter: faust.TopicT) -> None:
    """The chat projection: agents.canonical -> agents.chat, same partition, same order."""
    chat = app.topic(CHAT_TOPIC, key_serializer="raw", value_serializer="raw",
                     partitions=settings.partitions)
    table = app.Table("chat", partitions=settings.partitions, key_type=bytes,
                      value_type=bytes, default=None)
    projector = ChatProjector()

    async def project(stream: faust.StreamT) -> None:
        async for event in stream.events():
            msg, key = event.message, event.key
            out = projector.process(table.get(key) if key is not None else None, key,
                                    event.value, partition=msg.partition, offset=msg.offset)
            pending = [await chat.send(key=key, value=v, partition=msg.partition)
                       for v in out.records]
            pending += [await deadletter.send(key=key, value=v, partition=msg.partition)
                        for v in out.deadletters]
            if pending:
                await asyncio.gather(*pending)
            if out.state is not None and key is not None:
                table[key] = out.state

    app.agent(canonical, name="chat")(project)
