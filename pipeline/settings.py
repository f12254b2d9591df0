"""Worker settings: one frozen struct, read from the environment or the CLI.

Every setting has an environment variable (CANONFLOW_<NAME>) and a default that
runs on one machine with no configuration (embedded broker, memory store, web
server on 127.0.0.1 only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import Struct

from topics.catalog import DEFAULT_PARTITIONS, PROVIDERS


class Settings(Struct, frozen=True, kw_only=True):
    #: kafka://host:port[;host:port] of an existing cluster; empty = start the embedded broker.
    broker: str = ""
    #: What the cluster is: "tansu" gets the embedded broker's settings (one record per
    #: producer batch, a short rebalance timeout: pipeline.worker.process.embedded_settings),
    #: "kafka" none of them, "auto" asks the cluster (Tansu answers with its cluster id).
    broker_kind: str = "auto"
    #: The Kafka consumer group and the prefix of the worker's table changelogs.
    app_id: str = "canonflow"
    #: Partitions of each topic `canonflow topics create` and the worker create.
    partitions: int = DEFAULT_PARTITIONS
    #: Replication factor of the topics canonflow creates.
    replication: int = 1
    #: The providers whose raw topics the worker reads (comma-separated ids).
    providers: tuple[str, ...] = PROVIDERS
    #: Table store: memory:// (default, tests) or rocksdb:// (needs rocksdict; production).
    store: str = "memory://"
    #: Where the worker keeps its tables (rocksdb://), its lock and the ship checkpoint.
    data_dir: str = ".canonflow-data"
    #: Run the chat projection (agents.canonical -> agents.chat).
    chat_enabled: bool = True
    #: Copy each native message into the `raw` field of its canonical events.
    include_raw: bool = False
    #: Sessions without a record for this many seconds are closed (synthetic
    #: turn.completed(interrupted) and session.exited) and their state is removed;
    #: the scan runs every idle_scan_interval seconds.
    idle_timeout: float = 4 * 3600.0
    #: Seconds between two scans for idle sessions (see idle_timeout).
    idle_scan_interval: float = 60.0
    #: The stall watch (pipeline.worker.stall): a session with no event for this many
    #: seconds while it waits on the model (a turn open), a tool (a tool item started)
    #: or an approval (a request opened) gets a synthetic session.state.changed (health
    #: "stalled"), and another (health "recovered") before its next event; 0 turns one
    #: off. The scan runs every stall_scan_interval seconds.
    stall_model: float = 120.0
    #: Seconds a tool may run without an event before its session is stalled (0: off).
    stall_tool: float = 600.0
    #: Seconds an approval may wait without an event before its session is stalled (0: off).
    stall_approval: float = 300.0
    #: Seconds between two scans of the stall watch.
    stall_scan_interval: float = 10.0
    #: Publish each session's summary to agents.sessions (topics.sessions).
    sessions_enabled: bool = True
    #: Seconds a closed session's summary stays on agents.sessions (state "exited")
    #: before a tombstone removes it; 0 removes it when the idle close ends the session.
    #: Meanwhile its table entry is a small mark (close time, partition), tombstoned at
    #: the first idle scan past the retention.
    sessions_retention: float = 0.0
    #: The most records one normalize batch takes.
    batch_max: int = 500
    #: Seconds a normalize batch waits to fill up to batch_max records.
    batch_within: float = 0.01
    #: The longest (seconds) a fetch of the worker's consumer waits for records; unset:
    #: Faust's 1.5 s, and 0.05 on the embedded Tansu. Kafka answers a fetch as soon as a
    #: record arrives; Tansu waits it out, holding each record up to this long.
    fetch_max_wait: float | None = None
    #: A file each normalize batch appends its step timings to, one JSON line (records,
    #: the oldest record's age, seconds to translate, publish, store, count):
    #: `canonflow bench --latency` reads it; empty: none.
    batch_timings: str = ""
    #: Records larger than this go to the dead-letter topic untranslated.
    max_record_bytes: int = 1024 * 1024
    #: The most one item's pending text or output keeps (UTF-8 bytes): past it the
    #: completed item carries its start and end, `outputTruncated`, `outputLength` and
    #: `outputSha256` (topics.canonical.ItemPayload); its deltas still carry every byte.
    item_cap: int = 64 * 1024
    #: The largest message the cluster accepts on agents.deadletter (its
    #: max.message.bytes; Kafka's default is 1048588): longer dead letters keep only the
    #: first bytes of the original, with its size and hash (topics.records.DeadLetter).
    max_message_bytes: int = 1_000_000
    #: Dead letters keep the original record's bytes, secrets included, for the dead-letter
    #: topic's retention (30 days); by default they hold it redacted, with its size and
    #: SHA-256 (pipeline.privacy.redact reads CANONFLOW_DEADLETTER_ORIGINAL; a warning at start).
    deadletter_original: bool = False
    #: Redaction work a record may spend, per byte of it (bytes scanned, matches weighing
    #: more): a record past it has its remaining secret-bearing strings masked whole.
    redact_budget: int = 64
    #: Serve /health and /metrics.
    web_enabled: bool = True
    #: The address the web server listens on (loopback by default).
    web_host: str = "127.0.0.1"
    #: The port of the web server.
    web_port: int = 6066
    #: Host names the web server answers besides loopback names, the bound address and
    #: the address a request came in on (pipeline.ops.web.AllowedHosts): comma-separated
    #: names, .suffixes, IP addresses, networks, or * for any. Others get 421.
    web_allowed_hosts: str = ""
    #: Faust's producer batch size; 1 makes Tansu's ListOffsets exact (embedded broker
    #: only), and then the session changelogs end each delivery with a one-record batch.
    producer_max_batch_size: int | None = None
    #: Seconds the producer waits to fill a batch (throughput against latency).
    producer_linger: float = 0.0
    #: Seconds the output producer waits for a delivery (or for metadata) before it
    #: counts the send as failed; the agent then sends the batch's undelivered output
    #: again, with backoff, until it is delivered (nothing is dropped or acknowledged).
    producer_request_timeout: float = 30.0
    #: Run the fleet-metrics stage (agents.canonical -> agents.metrics, windowed).
    fleet_enabled: bool = True
    #: Seconds between two publications of the changed fleet windows to agents.metrics.
    fleet_publish_interval: float = 10.0
    #: A fleet window closes (final record, entry removed) when its partition's
    #: stream time is this many seconds past the window's end; later events are late.
    fleet_grace: float = 60.0
    #: Seconds between two broker probes (/health), and how long one may take.
    health_probe_interval: float = 5.0
    #: Seconds one broker probe of /health may take.
    health_probe_timeout: float = 5.0
    #: Seconds a source partition may have records waiting with none of them processed
    #: before /health says the worker is stuck; a problem of its source partitions
    #: still there this long after /health first said it makes the worker exit with
    #: status 1 (pipeline.ops.progress).
    stuck_after: float = 60.0
    #: Seconds the group coordinator waits for members to rejoin. Tansu holds every
    #: join for this long, so the embedded broker uses a short one.
    rebalance_timeout: float = 60.0
    #: debug, info, warning, error or critical.
    log_level: str = "warning"
    #: How the worker reaches Kafka (aiokafka): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    security_protocol: str = "PLAINTEXT"
    #: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with a SASL protocol.
    sasl_mechanism: str | None = None
    #: The SASL user name.
    sasl_username: str | None = None
    #: The SASL password.
    sasl_password: str | None = None
    #: The CA bundle that verifies the brokers (SSL, SASL_SSL).
    ssl_cafile: str | None = None
    #: The client certificate (mutual TLS).
    ssl_certfile: str | None = None
    #: The client certificate's private key.
    ssl_keyfile: str | None = None

    @property
    def bootstrap(self) -> str:
        """host:port[,host:port] for aiokafka clients."""
        return ",".join(u.split("://", 1)[-1] for u in self.broker.replace(",", ";").split(";") if u)

    def replace(self, **changes: Any) -> Settings:
        return msgspec.structs.replace(self, **changes)


BROKER_KINDS = ("auto", "tansu", "kafka")
#: The least value of the settings that count something or wait for something: zero or
#: less would be accepted, then fail later with a traceback (or never create a topic).
_LEAST: dict[str, float] = {
    "partitions": 1, "replication": 1, "batch_max": 1, "max_record_bytes": 1, "item_cap": 1,
    "max_message_bytes": 1, "idle_timeout": 0.001, "idle_scan_interval": 0.001,
    "fleet_publish_interval": 0.001, "health_probe_interval": 0.001,
    "health_probe_timeout": 0.001, "producer_request_timeout": 0.001, "stuck_after": 0.001,
    "rebalance_timeout": 0.001, "batch_within": 0, "producer_linger": 0, "fleet_grace": 0,
    "stall_model": 0, "stall_tool": 0, "stall_approval": 0, "stall_scan_interval": 0.001,
    "sessions_retention": 0, "fetch_max_wait": 0}
#: The values a setting of words takes: any other would fail later, with a traceback,
#: once a broker had started (Faust's logging, its table store, aiokafka's clients).
_CHOICES: dict[str, tuple[str, ...]] = {
    "log_level": ("debug", "info", "warning", "error", "critical"),
    "security_protocol": ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
}
#: The table stores (Faust's URL schemes) the worker runs with.
_STORES = ("memory", "rocksdb")
#: The schemes Faust accepts for a Kafka broker.
_SCHEMES = ("kafka", "aiokafka")


def broker_addresses(broker: str) -> list[tuple[str, int]]:
    """(host, port) of every address in `broker` (kafka://host:port[;kafka://host:port]).

    Raises ValueError, naming the address, for one without a host or a valid port (or
    with a scheme Faust does not know): better than a traceback at the first connection.
    """
    out: list[tuple[str, int]] = []
    for address in broker.replace(",", ";").split(";"):
        if not address.strip():
            continue
        scheme, sep, rest = address.strip().rpartition("://")
        if sep and scheme not in _SCHEMES:
            raise ValueError(f"broker address {address!r}: the scheme must be kafka://")
        host, _, port = rest.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
            raise ValueError(f"broker address {address!r} is not kafka://host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError(f"broker address {broker!r} is not kafka://host:port")
    return out


_BOOL = {"1": True, "true": True, "yes": True, "on": True,
         "0": False, "false": False, "no": False, "off": False, "": False}


_FIELD_TYPES: dict[str, Any] = {f.name: f.type for f in msgspec.structs.fields(Settings)}
_KINDS: dict[Any, str] = {int: "an integer", float: "a number"}


def from_env(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from CANONFLOW_* variables, then explicit overrides (None = not given).

    Raises ValueError for a value of the wrong type.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(Settings):
        raw = env.get(f"CANONFLOW_{field.name.upper()}")
        if raw is None:
            continue
        if field.type is bool:
            if raw.lower() not in _BOOL:
                raise ValueError(f"CANONFLOW_{field.name.upper()}={raw!r} is not a boolean")
            values[field.name] = _BOOL[raw.lower()]
        elif field.name == "providers":
            values[field.name] = tuple(p.strip() for p in raw.split(",") if p.strip())
        else:
            values[field.name] = raw
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        settings = msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as e:  # "Expected `int`, got `str` - at `$.partitions`"
        why, _, where = str(e).partition(" - at `$.")
        name = where.rstrip("`")
        if name not in values:
            raise ValueError(str(e)) from None
        kind = _KINDS.get(_FIELD_TYPES.get(name))
        raise ValueError(f"CANONFLOW_{name.upper()}={values[name]!r} is not {kind}" if kind
                         else f"CANONFLOW_{name.upper()}={values[name]!r}: {why}") from None
    for name, least in _LEAST.items():
        value = getattr(settings, name)
        if value is not None and value < least:
            raise ValueError(f"{name} is {getattr(settings, name)}: it must be at least {least} "
                             f"(CANONFLOW_{name.upper()})")
    for name, choices in _CHOICES.items():
        value = getattr(settings, name)
        if (value.lower() if name == "log_level" else value) not in choices:
            raise ValueError(f"CANONFLOW_{name.upper()}={value!r}: use one of "
                             f"{', '.join(choices)}")
    if settings.store.partition("://")[0] not in _STORES or "://" not in settings.store:
        raise ValueError(f"CANONFLOW_STORE={settings.store!r}: use "
                         f"{' or '.join(f'{s}://' for s in _STORES)}")
    if not 0 < settings.web_port < 65536:
        raise ValueError(f"web port {settings.web_port} is not a port (1 to 65535)")
    if settings.broker:
        broker_addresses(settings.broker)
    if settings.broker_kind not in BROKER_KINDS:
        raise ValueError(f"broker kind {settings.broker_kind!r}: use one of "
                         f"{', '.join(BROKER_KINDS)}")
    unknown = set(settings.providers) - set(PROVIDERS)
    if unknown:
        raise ValueError(f"unknown providers {sorted(unknown)}; known: {', '.join(PROVIDERS)}")
    return settings


def item_cap_from_env(env: Mapping[str, str] | None = None) -> int:
    """CANONFLOW_ITEM_CAP, checked as `from_env` checks it, alone: the offline
    translations (replay, import) cut an item where the worker does, and need none of
    the worker's other settings to be valid. Raises ValueError for a bad value."""
    env = os.environ if env is None else env
    raw = env.get("CANONFLOW_ITEM_CAP")
    return from_env({} if raw is None else {"CANONFLOW_ITEM_CAP": raw}).item_cap


def idle_timeout_from_env(env: Mapping[str, str] | None = None) -> float:
    """CANONFLOW_IDLE_TIMEOUT, checked as `from_env` checks it, alone (as
    `item_cap_from_env`): `import` closes a session file quiet for that long as the
    worker closes an idle session. Raises ValueError for a bad value."""
    env = os.environ if env is None else env
    raw = env.get("CANONFLOW_IDLE_TIMEOUT")
    return from_env({} if raw is None else {"CANONFLOW_IDLE_TIMEOUT": raw}).idle_timeout


def include_raw_from_env(env: Mapping[str, str] | None = None) -> bool:
    """CANONFLOW_INCLUDE_RAW, checked as `from_env` checks it, alone (as
    `item_cap_from_env`). Raises ValueError for a bad value."""
    env = os.environ if env is None else env
    raw = env.get("CANONFLOW_INCLUDE_RAW")
    return from_env({} if raw is None else {"CANONFLOW_INCLUDE_RAW": raw}).include_raw


def to_env(settings: Settings) -> dict[str, str]:
    """CANONFLOW_* variables that make `from_env` give back `settings` (for child workers)."""
    env: dict[str, str] = {}
    for field in msgspec.structs.fields(Settings):
        value = getattr(settings, field.name)
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, tuple):
            value = ",".join(value)
        env[f"CANONFLOW_{field.name.upper()}"] = str(value)
    return env


def child_env(settings: Settings) -> dict[str, str]:
    """The environment of a child process that runs with `settings`: this process's,
    without its own CANONFLOW_* variables, and `to_env(settings)`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    env.update(to_env(settings))
    return env
