"""The worker's own HTTP endpoints, on Faust's web server (loopback by default):

- `GET /metrics`: every metric of `pipeline.ops.metrics` in the Prometheus text format.
- `GET /health`: JSON; 200 with `"status": "ok"` when the broker answers the last
  probe, no output is waiting on a failed delivery, table recovery is over and the
  source partitions are sound (pipeline.ops.progress: the worker's topics exist, no read
  position is above its log's end, no records wait unprocessed for longer than
  CANONFLOW_STUCK_AFTER); 503 with `"status": "degraded"` and the reasons otherwise.
  Also: the broker's last error, the assigned partitions with their offsets and lag,
  recovery, the worker's own repairs, and when each agent last finished a batch.

Use /health for readiness (a degraded worker does not process, or not yet), not for
liveness: during a broker outage every worker is degraded and restarting them helps
nothing (Faust's `/` answers as long as the process runs). A worker that cannot repair
what /health says of its source partitions exits by itself (pipeline.worker.watch).

The views are `app.page` views (Faust's public web API), registered by
`install_web`; the gauges that describe Faust's state (assignment, consumer lag,
rebalances, recovery, tables) are read from Faust's public attributes at scrape time.

Every request, to these views and to Faust's own, must name an allowed host
(`AllowedHosts`, CANONFLOW_WEB_ALLOWED_HOSTS), else it gets 421: a web page the user
visits can rebind its DNS name to the worker's address and then read it as
same-origin, but the browser still sends the page's own name as Host. Faust's /table/
and /router/ views are off: they read table values (the items tables spool pending
command output) and the cluster's layout, and canonflow needs neither.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from pipeline.ops.metrics import WorkerMetrics
from pipeline.ops.progress import PartitionView, read_partitions
from pipeline.ops.prometheus import CONTENT_TYPE, Labels
from pipeline.settings import Settings

log = logging.getLogger("canonflow.web")

#: Table sizes on RocksDB are counted at most this often (it counts by iterating keys).
TABLE_SIZE_INTERVAL = 30.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: A DNS name as a Host header carries it (lowercased): dot-separated labels of letters,
#: digits, '-' (not at either end) and '_' (compose and some resolvers use it).
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*")


def _address(text: str) -> IPAddress | None:
    """An IP address (an IPv4-mapped IPv6 one as its IPv4 address), or None."""
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def host_of(header: str | None) -> IPAddress | str | None:
    """The host a Host header names: an IP address, or a lowercased DNS name without
    its trailing dot; None when the value is neither (empty, a bare IPv6 address, a
    port that is no number, stray characters)."""
    if not header:
        return None
    text = header.lower()
    if text.startswith("["):  # [IPv6]:port
        inner, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest[0] == ":" and _port(rest[1:]))):
            return None
        addr = _address(inner) if ":" in inner else None
        return addr
    name, colon, port = text.partition(":")
    if colon and not _port(port):
        return None
    name = name.removesuffix(".")
    addr = _address(name)
    if addr is not None:
        return addr
    return name if _NAME.fullmatch(name) else None


def _port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5


class AllowedHosts:
    """Which Host headers a canonflow web server answers (the worker's, `canonflow ui`).

    Always: loopback names and addresses (localhost, 127.0.0.0/8, ::1), and the address
    the connection came in on written as an IP address, which is what the kubelet's
    probes and Prometheus send when they reach a pod or container by its address. A
    page that rebinds its DNS name cannot make a browser send either: it sends the
    page's own name. Besides, the bound address when it is a specific one, and the
    configured entries: DNS names (`worker-0.canonflow-worker`), suffixes with a
    leading dot (`.svc.cluster.local`: the name and every name under it), IP
    addresses, networks (`10.0.0.0/8`), or `*` for any Host at all.
    """

    def __init__(self, *, names: Iterable[str] = (), suffixes: Iterable[str] = (),
                 networks: Iterable[IPNetwork] = (), any_host: bool = False):
        self.names = frozenset(names) | {"localhost"}
        self.suffixes = tuple(suffixes)
        self.networks = tuple(networks)
        self.any_host = any_host

    @classmethod
    def parse(cls, text: str, *, bound: str | None = None) -> AllowedHosts:
        """The loopback names, `bound` (the address or name the server binds, unless it
        binds every address) and the comma-separated entries of `text`.

        Raises ValueError for an entry that is no name, suffix, address, network or `*`.
        """
        names: list[str] = []
        suffixes: list[str] = []
        networks: list[IPNetwork] = []
        any_host = False
        entries = [e.strip().lower() for e in text.split(",") if e.strip()]
        bound = (bound or "").strip().lower().strip("[]")
        if bound and not getattr(_address(bound), "is_unspecified", False):
            entries.append(bound)  # 0.0.0.0 and :: bind every address: no Host names them
        for entry in entries:
            if entry == "*":
                any_host = True
            elif entry.startswith(".") and _NAME.fullmatch(entry[1:]):
                suffixes.append(entry)
            elif "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ValueError(f"{entry!r} is not a network") from None
            elif (addr := _address(entry)) is not None:
                networks.append(ipaddress.ip_network(addr))
            elif _NAME.fullmatch(entry.removesuffix(".")):
                names.append(entry.removesuffix("."))
            else:
                raise ValueError(f"{entry!r} is not a host name, .suffix, IP address, "
                                 "network or '*'")
        return cls(names=names, suffixes=suffixes, networks=networks, any_host=any_host)

    def allows(self, header: str | None, local: str | None) -> bool:
        """Whether to answer a request whose Host header is `header` (None: it sent
        none) on a connection accepted on the local address `local`."""
        host = host_of(header)
        if host is None:
            return False
        if self.any_host:
            return True
        if isinstance(host, str):
            return host in self.names or any(
                host == s[1:] or host.endswith(s) for s in self.suffixes)
        if host.is_loopback:
            return True
        here = _address(local.split("%", 1)[0]) if local else None
        return host == here or any(host in net for net in self.networks)


def host_guard(allowed: AllowedHosts, server: str) -> Any:
    """aiohttp middleware answering 421 to a request whose Host `allowed` refuses (or
    that sends more than one Host)."""
    from aiohttp import web

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        hosts = request.headers.getall("Host", [])
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        local = sock[0] if isinstance(sock, tuple) and sock else None
        if len(hosts) != 1 or not allowed.allows(hosts[0], local):
            raise web.HTTPMisdirectedRequest(
                text=f"{server} answers loopback names, its own address and the names "
                     "configured for it only (Host refused)\n")
        resp: web.StreamResponse = await handler(request)
        return resp

    return guard


def _is_source(topic: str) -> bool:
    """A topic the agents consume (not a table changelog or Faust's own)."""
    return not topic.endswith("-changelog") and "__assignor" not in topic


class Health:
    """What /health reports, kept up to date by the probe, the agents and Faust's
    rebalance signals."""

    def __init__(self) -> None:
        self.broker_ok: bool | None = None  # None: not probed yet
        self.broker_error: str | None = None
        self.broker_error_at: float | None = None
        self.broker_ok_at: float | None = None
        self.output_failing: set[str] = set()  # agents whose batch waits on a failed send
        self.output_error: str | None = None
        self.output_error_at: float | None = None
        self.refused = 0  # output records the cluster refused for good (dead-lettered)
        self.refused_error: str | None = None
        self.refused_at: float | None = None
        self.assigned_at: float | None = None  # monotonic
        self.recovery_seconds: float | None = None
        self.recovered_at: float | None = None  # unix time
        # the last look at the source partitions (pipeline.worker.watch)
        self.source_reasons: list[str] = []
        self.sources: list[PartitionView] = []
        self.sources_at: float | None = None  # unix time
        self.last_problem: str | None = None  # the last reason the look gave
        self.last_problem_at: float | None = None
        self.repairs = 0  # topics created again, read positions reset
        self.last_repair: str | None = None
        self.last_repair_at: float | None = None

    def sources_found(self, reasons: list[str]) -> None:
        self.source_reasons = reasons
        if reasons:
            self.last_problem, self.last_problem_at = "; ".join(reasons), time.time()

    def repaired(self, what: str) -> None:
        self.repairs += 1
        self.last_repair, self.last_repair_at = what, time.time()

    def probe_ok(self) -> None:
        self.broker_ok, self.broker_ok_at = True, time.time()

    def probe_failed(self, error: BaseException) -> None:
        self.broker_ok = False
        self.broker_error = f"{type(error).__name__}: {error}"[:500]
        self.broker_error_at = time.time()

    def send_failed(self, agent: str, error: BaseException) -> None:
        self.output_failing.add(agent)
        self.output_error = f"{type(error).__name__}: {error}"[:500]
        self.output_error_at = time.time()

    def send_ok(self, agent: str) -> None:
        self.output_failing.discard(agent)

    def send_refused(self, records: int, error: BaseException) -> None:
        self.refused += records
        self.refused_error = f"{type(error).__name__}: {error}"[:500]
        self.refused_at = time.time()

    def report(self, app: Any, metrics: WorkerMetrics) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) of /health."""
        reasons = []
        if self.broker_ok is None:
            reasons.append("broker not probed yet")
        elif not self.broker_ok:
            reasons.append("broker unreachable")
        if self.output_failing:
            reasons.append("output delivery failing (retrying): "
                           + ", ".join(sorted(self.output_failing)))
        rebalancing = recovering(app)
        if rebalancing:
            reasons.append("rebalancing or recovering tables")
        reasons += self.source_reasons
        partitions: dict[str, list[int]] = {}
        for tp in _assignment(app):
            if _is_source(tp.topic):
                partitions.setdefault(tp.topic, []).append(tp.partition)
        now = time.time()
        body = {
            "status": "degraded" if reasons else "ok",
            "reasons": reasons,
            "broker": {"reachable": self.broker_ok, "lastError": self.broker_error,
                       "lastErrorAt": self.broker_error_at, "lastOkAt": self.broker_ok_at},
            "output": {"failing": sorted(self.output_failing), "lastError": self.output_error,
                       "lastErrorAt": self.output_error_at,
                       "refused": self.refused, "lastRefusal": self.refused_error,
                       "lastRefusalAt": self.refused_at},
            "partitions": {t: sorted(ps) for t, ps in sorted(partitions.items())},
            "assignedPartitions": sum(len(ps) for ps in partitions.values()),
            "recovery": {"finished": not rebalancing, "lastSeconds": self.recovery_seconds,
                         "lastAt": self.recovered_at},
            "lastBatchAt": dict(sorted(metrics.last_batch_at.items())),
            "lastBatchAgeSeconds": {a: round(now - t, 3)
                                    for a, t in sorted(metrics.last_batch_at.items())},
            "sources": {
                "checkedAt": self.sources_at,
                "lag": sum(v.lag or 0 for v in self.sources),
                # the partitions with records waiting (or an end not known yet)
                "waiting": [{"topic": v.topic, "partition": v.partition, "end": v.end,
                             "position": v.position, "committed": v.committed,
                             "lag": v.lag} for v in self.sources if v.lag != 0],
                "lastProblem": self.last_problem, "lastProblemAt": self.last_problem_at,
                "repairs": self.repairs, "lastRepair": self.last_repair,
                "lastRepairAt": self.last_repair_at},
        }
        return (503 if reasons else 200), body


def source_partitions(app: Any) -> list[Any]:
    """The assigned partitions the agents consume (not table changelogs)."""
    return sorted(tp for tp in _assignment(app) if _is_source(tp.topic))


def _assignment(app: Any) -> set[Any]:
    try:
        return set(app.consumer.assignment())
    except Exception:  # the consumer is not started yet
        return set()


def recovering(app: Any) -> bool:
    """Whether the app rebalances or recovers its tables (its agents process nothing)."""
    tables = getattr(app, "tables", None)
    recovery = getattr(tables, "recovery", None) if tables is not None else None
    done = recovery is not None and recovery.completed.is_set()
    return bool(app.rebalancing or getattr(app, "in_recovery", False) or not done)


class AppGauges:
    """The gauges read from Faust at scrape time."""

    def __init__(self, app: Any, metrics: WorkerMetrics, health: Health,
                 tables: Mapping[str, Callable[[], int]]):
        self.app, self.metrics, self.health, self.tables = app, metrics, health, tables
        self._sizes: dict[str, int] = {}
        self._sizes_at = 0.0
        self._lag: dict[Labels, float] = {}
        metrics.consumer_lag.collect = lambda: self._lag
        metrics.assigned.collect = self._assigned
        metrics.table_entries.collect = lambda: {(n,): float(v) for n, v in self._sizes.items()}
        metrics.active_sessions.collect = lambda: {
            (n.split(".", 1)[1],): float(v) for n, v in self._sizes.items()
            if n.startswith("sessions.")}
        metrics.open_turns.collect = lambda: {
            (p,): float(len(keys)) for p, keys in metrics.turns_open.items()}
        metrics.recovering.collect = lambda: {(): float(recovering(app))}
        metrics.broker_up.collect = lambda: (
            {} if health.broker_ok is None else {(): float(health.broker_ok)})
        metrics.recovery_seconds.collect = lambda: (
            {} if health.recovery_seconds is None else {(): health.recovery_seconds})
        metrics.recovery_at.collect = lambda: {(): health.recovered_at or 0.0}

    def _assigned(self) -> dict[Labels, float]:
        out: dict[Labels, float] = {}
        for tp in _assignment(self.app):
            if _is_source(tp.topic):
                out[(tp.topic,)] = out.get((tp.topic,), 0) + 1
        return out

    async def refresh(self) -> None:
        """Read what needs awaiting before a scrape: consumer lag, table sizes."""
        app = self.app
        self.metrics.rebalances.values[()] = float(getattr(app, "rebalancing_count", 0))
        now = time.monotonic()
        cheap = self.app.conf.store.scheme == "memory"  # len() of a dict; RocksDB iterates
        if cheap or now - self._sizes_at >= TABLE_SIZE_INTERVAL or not self._sizes:
            self._sizes_at = now
            self._sizes = {name: _size(t) for name, t in self.tables.items()}
        self._lag = await self._consumer_lag()

    async def _consumer_lag(self) -> dict[Labels, float]:
        return {(v.topic, str(v.partition)): float(v.lag)
                for v in await read_partitions(self.app, source_partitions(self.app))
                if v.lag is not None}


def _size(size: Callable[[], int]) -> int:
    try:
        return size()
    except Exception:  # a store that is not open (no partition assigned yet)
        return 0


def install_web(app: Any, settings: Settings, metrics: WorkerMetrics, health: Health,
                tables: Mapping[str, Callable[[], int]],
                probe: Callable[[], Awaitable[None]]) -> None:
    """Register /metrics and /health on the app's web server, the broker probe, and
    the rebalance bookkeeping. `tables` gives each table's local size (it raises when
    the table's store is not open yet); `probe` raises when the broker cannot be
    reached."""
    gauges = AppGauges(app, metrics, health, tables)

    async def on_assigned(sender: Any, *args: Any, **kwargs: Any) -> None:
        health.assigned_at = time.monotonic()

    async def on_complete(sender: Any, *args: Any, **kwargs: Any) -> None:
        if health.assigned_at is not None:
            health.recovery_seconds = time.monotonic() - health.assigned_at
            health.recovered_at = time.time()

    app.on_partitions_assigned.connect(on_assigned)
    app.on_rebalance_complete.connect(on_complete)

    async def broker_probe() -> None:
        while True:
            try:
                await asyncio.wait_for(probe(), timeout=settings.health_probe_timeout)
            except Exception as e:  # timeouts and every Kafka error: unreachable
                if health.broker_ok is not False:
                    log.warning("broker probe failed: %s", e or type(e).__name__)
                health.probe_failed(e if str(e) else TimeoutError("no answer within "
                                                                  f"{settings.health_probe_timeout}s"))
            else:
                if health.broker_ok is False:
                    log.warning("broker reachable again")
                health.probe_ok()
            await asyncio.sleep(settings.health_probe_interval)

    app.task(broker_probe)

    if not settings.web_enabled:
        return
    try:
        allowed = AllowedHosts.parse(settings.web_allowed_hosts, bound=settings.web_host)
    except ValueError as e:
        raise ValueError(f"CANONFLOW_WEB_ALLOWED_HOSTS: {e}") from None
    if "web" in vars(app):  # Faust made its web application already: too late for options
        raise RuntimeError("install_web must run before the app's web server is made")
    # Faust's public setting for the aiohttp application: middlewares run before every
    # view, Faust's own included.
    options = dict(app.conf.web_application_options or {})
    options["middlewares"] = [*options.get("middlewares", ()),
                              host_guard(allowed, "the canonflow worker")]
    app.conf.web_application_options = options
    app.conf.web_tables_enabled = False
    app.conf.web_router_enabled = False

    async def metrics_view(self: Any, request: Any) -> Any:
        await gauges.refresh()
        return self.bytes(metrics.registry.render(), headers={"Content-Type": CONTENT_TYPE})

    async def health_view(self: Any, request: Any) -> Any:
        status, body = health.report(app, metrics)
        return self.json(body, status=status)

    app.page("/metrics", name="canonflow_metrics")(metrics_view)
    app.page("/health", name="canonflow_health")(health_view)
