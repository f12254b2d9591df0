"""Create and verify the topic catalog on a cluster (`canonflow topics create|check`)."""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from pipeline.settings import Settings
from topics.catalog import CATALOG, TopicSpec, changelog_topics


class Drift(Struct, frozen=True):
    """One difference between the catalog and the cluster."""

    topic: str
    what: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.topic}: {self.what} is {self.actual}, expected {self.expected}"


def kafka_client_kwargs(settings: Settings) -> dict[str, Any]:
    """Connection settings shared by every aiokafka client (TLS and SASL pass through)."""
    kw: dict[str, Any] = {"bootstrap_servers": settings.bootstrap,
                          "security_protocol": settings.security_protocol}
    if settings.security_protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        kw["ssl_context"] = create_ssl_context(cafile=settings.ssl_cafile,
                                               certfile=settings.ssl_certfile,
                                               keyfile=settings.ssl_keyfile)
    if settings.sasl_mechanism:
        kw.update(sasl_mechanism=settings.sasl_mechanism,
                  sasl_plain_username=settings.sasl_username,
                  sasl_plain_password=settings.sasl_password)
    return kw


class LoginRefused(Exception):  # noqa: N818 - the cluster's answer, as aiokafka names its own
    """The cluster refused the SASL login of the settings (user, password, mechanism):
    waiting or retrying will not change that."""


async def check_login(settings: Settings) -> None:
    """Log in to the first bootstrap server that answers, with the settings' SASL login,
    and close the connection. Nothing to do without SASL.

    aiokafka's clients log a refused login and then fail as if no broker answered; this
    tells the two apart, so that a refused login ends a command at once instead of being
    waited for like a broker that is down. Raises LoginRefused when a server refuses the
    login; a server that does not answer is left to the client that comes next (which
    says so)."""
    if not settings.sasl_mechanism:
        return
    from aiokafka.conn import collect_hosts, create_conn
    from aiokafka.errors import (
        AuthenticationFailedError,
        IllegalSaslStateError,
        KafkaError,
        SaslAuthenticationFailed,
        UnsupportedSaslMechanismError,
    )

    kw = kafka_client_kwargs(settings)
    del kw["bootstrap_servers"]
    for host, port, _ in collect_hosts(settings.bootstrap):
        try:
            conn = await create_conn(host, port, request_timeout_ms=10_000, **kw)
        except (SaslAuthenticationFailed, AuthenticationFailedError,
                UnsupportedSaslMechanismError, IllegalSaslStateError) as e:
            reason = " ".join(str(e).split())
            if e.args and not isinstance(e.args[0], str):  # the connection, as its text
                reason = f"{type(e).__name__}: {getattr(e, 'description', '')}"
            raise LoginRefused(
                f"the broker at {host}:{port} refused the login of user "
                f"{settings.sasl_username!r} ({settings.sasl_mechanism} over "
                f"{settings.security_protocol}): {reason}") from None
        except (KafkaError, OSError, TimeoutError):
            continue  # no answer here: the next server, else the client that follows
        conn.close()
        return


def wanted(settings: Settings) -> list[TopicSpec]:
    """The catalog topics this deployment uses (raw topics of configured providers only)
    and its workers' table changelogs."""
    return [t for t in CATALOG if t.provider is None or t.provider in settings.providers] \
        + changelog_topics(settings.app_id, settings.providers)


def partitions_of(spec: TopicSpec, settings: Settings) -> int:
    """Every catalog topic has the deployment's partition count (co-partitioning)."""
    return settings.partitions


def unreachable(error: BaseException) -> bool:
    """Does `error` say that no broker answered (yet), rather than that one refused?"""
    from aiokafka.errors import KafkaError, KafkaTimeoutError

    if isinstance(error, KafkaError):
        return bool(error.retriable) or isinstance(error, KafkaTimeoutError)
    return isinstance(error, OSError | TimeoutError)


async def is_tansu(settings: Settings) -> bool:
    """Is the cluster a Tansu broker? Kafka's metadata answer carries the cluster id, and
    Tansu's is the one it was started with: `canonflow broker` (and every embedded broker)
    says EMBEDDED_CLUSTER_ID, a Tansu started by hand says its default, TANSU_CLUSTER_ID
    (another one: CANONFLOW_BROKER_KIND=tansu). Raises aiokafka's errors."""
    from aiokafka.admin import AIOKafkaAdminClient

    from pipeline.cluster.broker import EMBEDDED_CLUSTER_ID, TANSU_CLUSTER_ID

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    return cluster.get("cluster_id") in (EMBEDDED_CLUSTER_ID, TANSU_CLUSTER_ID)


#: The longest create_topics waits for the topics it created to have their leaders.
READY_SECONDS = 60.0


async def create_topics(settings: Settings) -> list[str]:
    """Create the missing catalog topics; returns the names created, once every one of
    their partitions has a leader (at most READY_SECONDS).

    Kafka answers CreateTopics as soon as its controller has recorded the topics; its
    brokers learn of them, and open their partitions, a moment later (seconds on a busy
    machine). Until then a metadata request lists them without leaders or not at all:
    `topics check` called them missing, and producers were refused (NOT_LEADER)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        new = [NewTopic(t.name, partitions_of(t, settings), settings.replication,
                        topic_configs=t.config())
               for t in wanted(settings) if t.name not in existing]
        if new:
            await admin.create_topics(new)
            await _led(admin, {t.name for t in new}, READY_SECONDS)
        return [t.name for t in new]
    finally:
        await admin.close()


async def _led(admin: Any, names: set[str], timeout: float) -> None:
    """Wait until the cluster's metadata has every partition of `names` with a leader,
    or `timeout` seconds have passed (producers retry what is left)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        ready = {t["topic"] for t in await admin.describe_topics(sorted(names))
                 if t["error_code"] == 0 and t["partitions"]
                 and all(p["leader"] >= 0 for p in t["partitions"])}
        if names <= ready or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.1)


async def check_topics(settings: Settings) -> list[Drift]:
    """Compare the cluster with the catalog: missing topics, partitions, configuration."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
    drift: list[Drift] = []
    try:
        await admin.start()
        specs = wanted(settings)
        existing = set(await admin.list_topics())
        present = [t for t in specs if t.name in existing]
        drift += [Drift(t.name, "topic", "present", "missing") for t in specs
                  if t.name not in existing]
        if not present:
            return drift
        for md in await admin.describe_topics([t.name for t in present]):
            spec = next(t for t in present if t.name == md["topic"])
            n, want = len(md["partitions"]), partitions_of(spec, settings)
            if n != want:
                drift.append(Drift(spec.name, "partitions", str(want), str(n)))
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t.name) for t in present])
        for resp in responses:
            for res in resp.resources:
                name, entries = res[3], res[4]
                actual = {e[0]: e[1] for e in entries}
                spec = next(t for t in present if t.name == name)
                for key, value in spec.config().items():
                    if actual.get(key) != value:
                        drift.append(Drift(name, key, value, str(actual.get(key))))
        return drift
    finally:
        await admin.close()
