"""`canonflow ui`: a fleet view and a live chat view of the sessions, in the browser.

A small aiohttp app, separate from the worker: it follows `agents.chat`,
`agents.canonical` and `agents.sessions` from the beginning (plain aiokafka, no
consumer group, so it never moves the workers' offsets), keeps a bounded in-memory view
of the sessions (pipeline.views.chat_store), and serves one static page
(pipeline/views/ui_static/, no build step, nothing from a CDN): the fleet (sessions by
state, runtime and model; waiting on a person, stalled, failed; tokens and cost today),
a searchable session list, and any session as a readable chat with its model, tokens,
cost and the time of each turn and tool call, updated by Server-Sent Events.

HTTP surface (loopback only by default; the chat holds code and command output). Every
request must name an allowed host (pipeline.ops.web.AllowedHosts: loopback names, the
address it came in on, the bound address, --allowed-hosts), else it gets 421, wherever
the UI listens: a page that rebinds its DNS name to the UI's address sends its own name.

- `GET /` the page; `GET /static/...` its script, style and icon (`/favicon.ico` too).
- `GET /api/sessions` the session list, most recent first (JSON array); `?q=` text
  in a session's id, runtime, model, preview or records, `&runtime=`, `&model=`,
  `&state=` filter it.
- `GET /api/sessions/{id}` one session's summary, stored records and `timings`.
- `GET /api/sessions/{id}/timings` its turns (model, start, end, duration, tokens,
  cost) and tool calls (start, end, duration), as agents.canonical dated them.
- `GET /api/fleet` the fleet: counts by state, runtime and model, the sessions waiting
  on a person, stalled or failed, and today's tokens and cost (UTC day).
- `GET /api/status` the consumer's state, whether the broker answers (`probe`: a TCP
  connection to a bootstrap address every PROBE_SECONDS, so the page says
  "disconnected" within seconds of the broker going away, while the consumer itself
  only retries quietly), and the store's limits.
- `GET /events?session=ID` SSE: the session's stored records (`event: record`,
  `id:` = the record's seq), then `event: ready`, then records as they arrive. A
  reconnecting browser sends `Last-Event-ID` and gets only what it missed.
- `GET /events` SSE: `event: sessions` (the whole list), then `event: session`
  (one changed summary) and `event: removed` (an evicted session).

Memory is bounded (pipeline.views.chat_store): at most `max_records` records per session
(oldest dropped first; the page says how many were dropped), a session also trims itself
to a quarter of the byte budget, it keeps at most MAX_TURNS turn and MAX_TOOLS tool-call
timings, and beyond `max_sessions` sessions or `max_bytes` in
all, the least recently active session is evicted. SSE subscribers hold no queue, only a
cursor (the next seq to send) into that store, so a slow browser cannot grow memory;
records dropped before it read them are reported as a gap.

aiohttp and aiokafka are imported inside the functions that need them, so
importing this module (as the CLI does) stays cheap and starts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.ops.web import AllowedHosts, host_guard
from pipeline.views.chat_store import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_RECORDS,
    DEFAULT_MAX_SESSIONS,
    MAX_TOOLS,
    MAX_TURNS,
    ChatStore,
    Watcher,
)
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, SESSIONS_TOPIC

if TYPE_CHECKING:
    from aiohttp import web

    from pipeline.settings import Settings

STATIC_DIR = Path(__file__).with_name("ui_static")
DEFAULT_PORT = 8066
HEARTBEAT_SECONDS = 15.0
#: How often the UI checks that the broker accepts connections, and how long it waits.
PROBE_SECONDS = 2.0
PROBE_TIMEOUT = 1.5


class ConsumerStatus:
    """What /api/status says about the chat consumer."""

    __slots__ = ("connected", "error", "records", "gaps")

    def __init__(self) -> None:
        self.connected = False
        self.error: str | None = None  # why the last attempt failed
        self.records = 0
        self.gaps = 0  # gaps in a session's seq the consumer library reported

    def as_dict(self) -> dict[str, Any]:
        return {"connected": self.connected, "error": self.error, "records": self.records,
                "gaps": self.gaps}


async def consume_chat(settings: Settings, store: ChatStore, status: ConsumerStatus, *,
                       from_beginning: bool = True) -> None:
    """Feed `agents.chat` and `agents.canonical` into the store until cancelled;
    reconnects with backoff when the broker is unreachable (the error shows in
    /api/status). Never raises except CancelledError."""
    from pipeline.cluster.admin import kafka_client_kwargs
    from pipeline.cluster.consumer import Consumer
    from topics.consumer import Gap, Unknown

    delay = 0.5
    while True:
        consumer = Consumer(CHAT_TOPIC, CANONICAL_TOPIC, from_beginning=from_beginning,
                            poll_ms=500, **kafka_client_kwargs(settings))
        try:
            await consumer.start()
            status.connected, status.error, delay = True, None, 0.5
            async for item, rec in consumer.records():  # copies dropped, gaps counted
                if isinstance(item, Gap):
                    status.gaps += 1
                    continue
                status.records += 1
                if rec.topic == CHAT_TOPIC:
                    store.add(rec.value, rec.timestamp)
                elif not isinstance(item, Unknown):
                    store.add_event(item)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any broker trouble: report, back off, retry
            status.connected, status.error = False, f"{type(e).__name__}: {e}"
        finally:
            status.connected = False
            try:
                await consumer.stop()
            except Exception:  # noqa: BLE001, S110 - the consumer may never have started
                pass
        await asyncio.sleep(delay)
        delay = min(delay * 2, 10.0)


async def consume_summaries(settings: Settings, store: ChatStore) -> None:
    """Feed `agents.sessions` (compacted: each session's latest summary) into the store
    until cancelled, always from its beginning; retries with backoff like
    consume_chat. Never raises except CancelledError."""
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs

    delay = 0.5
    while True:
        consumer = AIOKafkaConsumer(SESSIONS_TOPIC, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest",
                                    **kafka_client_kwargs(settings))
        try:
            await consumer.start()
            delay = 0.5
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for rec in records:
                        store.add_summary(rec.value, rec.key)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001, S110 - consume_chat reports broker trouble
            pass
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
        await asyncio.sleep(delay)
        delay = min(delay * 2, 10.0)


class BrokerProbe:
    """Whether a bootstrap address of the broker accepted a TCP connection lately."""

    __slots__ = ("reachable", "error", "checked_at")

    def __init__(self) -> None:
        self.reachable: bool | None = None  # None: not checked yet
        self.error: str | None = None
        self.checked_at = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"reachable": self.reachable, "error": self.error,
                "checked_at": self.checked_at}


async def probe_broker(bootstrap: str, probe: BrokerProbe, *, interval: float = PROBE_SECONDS,
                       timeout: float = PROBE_TIMEOUT) -> None:
    """Try a TCP connection to the bootstrap addresses (host:port,...) every `interval`
    seconds until cancelled, and record the outcome in `probe`. A connection is enough:
    the question is only whether the broker is there, and the consumer (which does the
    real work) retries by itself without saying so. It sends nothing (no TLS handshake,
    no Kafka request), so all a broker sees is a connection opened and closed."""
    addresses = [a.rpartition(":") for a in bootstrap.split(",") if a]
    while True:
        error = "no bootstrap address"
        for host, _, port in addresses:
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(host.strip("[]"), int(port)), timeout)
            except (OSError, TimeoutError, ValueError) as e:
                error = f"{host}:{port}: {type(e).__name__}: {e}".rstrip(": ")
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            error = ""
            break
        probe.reachable, probe.error = not error, error or None
        probe.checked_at = time.time()
        await asyncio.sleep(interval)


def _sse(event: str, data: str, event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


class _Handlers:
    """The HTTP handlers over one store (kept together so no module-level app keys)."""

    def __init__(self, store: ChatStore, status: ConsumerStatus, settings: Settings,
                 probe: BrokerProbe):
        self.store, self.status, self.settings, self.probe = store, status, settings, probe

    async def index(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.FileResponse(STATIC_DIR / "index.html",
                                headers={"Cache-Control": "no-cache"})

    async def favicon(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.FileResponse(STATIC_DIR / "favicon.svg",
                                headers={"Content-Type": "image/svg+xml",
                                         "Cache-Control": "max-age=86400"})

    async def sessions(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        q = request.query
        if not any(q.get(k) for k in ("q", "runtime", "model", "state")):
            return web.json_response(self.store.summaries())
        return web.json_response(self.store.search(
            text=q.get("q", ""), runtime=q.get("runtime", ""), model=q.get("model", ""),
            state=q.get("state", "")))

    async def session(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        s = self.store.sessions.get(request.match_info["session_id"])
        if s is None:
            raise web.HTTPNotFound(text="no such session (or evicted)")
        return web.json_response({"session": s.summary(), "timings": s.timings(),
                                  "records": [json.loads(t) for _, t in s.records]})

    async def timings(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        s = self.store.sessions.get(request.match_info["session_id"])
        if s is None:
            raise web.HTTPNotFound(text="no such session (or evicted)")
        return web.json_response({"session": s.summary(), **s.timings()})

    async def fleet(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.json_response(self.store.fleet())

    async def status_(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        st = self.store
        return web.json_response({
            "broker": self.settings.broker, "topic": CHAT_TOPIC,
            "consumer": self.status.as_dict(), "probe": self.probe.as_dict(),
            "store": {"sessions": len(st.sessions), "bytes": st.bytes, "accepted": st.accepted,
                      "duplicates": st.duplicates, "rejected": st.rejected,
                      "evicted": st.evicted},
            "limits": {"max_sessions": st.max_sessions, "max_records": st.max_records,
                       "max_bytes": st.max_bytes, "max_turns": MAX_TURNS,
                       "max_tools": MAX_TOOLS}})

    async def events(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        sid = request.query.get("session")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        w = self.store.watch(sid)
        try:
            if sid is None:
                await self._stream_list(resp, w)
            else:
                try:
                    cursor = int(request.headers.get("Last-Event-ID", "0")) + 1
                except ValueError:
                    cursor = 1
                await self._stream_session(resp, w, sid, max(cursor, 1))
        except ConnectionError:
            pass  # the browser went away
        finally:
            self.store.unwatch(w)
        return resp

    async def _wait(self, resp: web.StreamResponse, w: Watcher) -> bool:
        """Wait for a change, sending heartbeats; False when the server shuts down."""
        while not self.store.closing:
            try:
                await asyncio.wait_for(w.wake.wait(), HEARTBEAT_SECONDS)
            except TimeoutError:
                await resp.write(b": ping\n\n")  # raises once the browser has gone
                continue
            w.wake.clear()
            return not self.store.closing
        return False

    async def _stream_session(self, resp: web.StreamResponse, w: Watcher, sid: str,
                              cursor: int) -> None:
        ready = False
        while True:
            s = self.store.sessions.get(sid)
            items = s.since(cursor) if s is not None else []
            if items and items[0][0] > cursor:
                gap = {"from": cursor, "to": items[0][0] - 1}
                await resp.write(_sse("gap", json.dumps(gap)))
            chunk = b"".join(_sse("record", text, seq) for seq, text in items)
            if items:
                cursor = items[-1][0] + 1
            if not ready:
                chunk += _sse("ready", json.dumps({"session_id": sid, "next_seq": cursor}))
                ready = True
            if chunk:
                await resp.write(chunk)
            if not await self._wait(resp, w):
                return

    async def _stream_list(self, resp: web.StreamResponse, w: Watcher) -> None:
        await resp.write(_sse("sessions", json.dumps(self.store.summaries())))
        while await self._wait(resp, w):
            changed, w.dirty = w.dirty, set()
            parts = []
            for sid in sorted(changed):
                s = self.store.sessions.get(sid)
                parts.append(_sse("session", json.dumps(s.summary())) if s is not None
                             else _sse("removed", json.dumps({"session_id": sid})))
            await resp.write(b"".join(parts))


def create_ui_app(settings: Settings, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                  max_records: int = DEFAULT_MAX_RECORDS, max_bytes: int = DEFAULT_MAX_BYTES,
                  from_beginning: bool = True, consume: bool = True,
                  allowed_hosts: AllowedHosts | None = None,
                  store: ChatStore | None = None) -> web.Application:
    """The UI's aiohttp application. Nothing runs until the app is started: then the
    chat consumer starts (unless `consume` is False, e.g. to feed `store` directly),
    and it stops with the app. It answers the hosts `allowed_hosts` allows (default:
    loopback names and the address a request came in on), others get 421.

    Raises ValueError for non-positive limits.
    """
    from aiohttp import web

    store = store if store is not None else ChatStore(
        max_sessions=max_sessions, max_records=max_records, max_bytes=max_bytes)
    status, probe = ConsumerStatus(), BrokerProbe()
    h = _Handlers(store, status, settings, probe)
    guard = host_guard(allowed_hosts or AllowedHosts.parse(""), "canonflow ui")
    app = web.Application(middlewares=[guard])
    app.router.add_get("/", h.index)
    app.router.add_get("/favicon.ico", h.favicon)
    app.router.add_get("/api/sessions", h.sessions)
    app.router.add_get("/api/sessions/{session_id}", h.session)
    app.router.add_get("/api/sessions/{session_id}/timings", h.timings)
    app.router.add_get("/api/fleet", h.fleet)
    app.router.add_get("/api/status", h.status_)
    app.router.add_get("/events", h.events)
    app.router.add_static("/static/", STATIC_DIR)

    async def consumer_ctx(app: web.Application) -> Any:
        tasks = [asyncio.create_task(probe_broker(settings.bootstrap, probe))]
        if consume:
            tasks.append(asyncio.create_task(consume_chat(settings, store, status,
                                                          from_beginning=from_beginning)))
            tasks.append(asyncio.create_task(consume_summaries(settings, store)))
        yield
        for task in tasks:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def on_shutdown(app: web.Application) -> None:
        store.close()

    app.cleanup_ctx.append(consumer_ctx)
    app.on_shutdown.append(on_shutdown)
    return app


async def serve_ui(app: web.Application, host: str, port: int, stop: asyncio.Event,
                   on_ready: Callable[[str], None] | None = None) -> None:
    """Serve `app` on host:port (0 = a free port) until `stop` is set; `on_ready` gets
    the URL once it listens. Raises OSError when the address is taken."""
    from aiohttp import web

    runner = web.AppRunner(app, shutdown_timeout=5.0, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        if on_ready is not None:
            on_ready(f"http://{shown}:{bound_port}/")
        await stop.wait()
    finally:
        await runner.cleanup()


def ui_app_for(settings: Settings, host: str, allowed_hosts: str, **options: Any
               ) -> web.Application:
    """The application `canonflow ui --host HOST --allowed-hosts ...` serves: beyond
    loopback too, it answers only loopback names, HOST, the address a request came in
    on and `allowed_hosts` (comma-separated, as pipeline.ops.web.AllowedHosts.parse reads).

    Raises ValueError for a bad entry or limit.
    """
    return create_ui_app(settings, allowed_hosts=AllowedHosts.parse(allowed_hosts, bound=host),
                         **options)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("ui")
@click.option("--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
              help="kafka://host:port of the cluster to read agents.chat from "
                   "(env CANONFLOW_BROKER).")
@click.option("--host", envvar="CANONFLOW_UI_HOST", default="127.0.0.1", show_default=True,
              help="Address to listen on (env CANONFLOW_UI_HOST). Keep it loopback: the chat "
                   "shows code and command output, and the page has no login.")
@click.option("--port", envvar="CANONFLOW_UI_PORT", type=int, default=DEFAULT_PORT,
              show_default=True, help="Port (env CANONFLOW_UI_PORT; 0 = any free port).")
@click.option("--allowed-hosts", envvar="CANONFLOW_UI_ALLOWED_HOSTS", default="",
              help="Host names the UI answers besides loopback names, --host and the "
                   "address a request came in on: comma-separated names, .suffixes, IP "
                   "addresses, networks, or * for any (env CANONFLOW_UI_ALLOWED_HOSTS). "
                   "Others get 421, so no page can read the chat by rebinding its name.")
@click.option("--max-sessions", envvar="CANONFLOW_UI_MAX_SESSIONS", type=int,
              default=DEFAULT_MAX_SESSIONS, show_default=True,
              help="Sessions kept in memory; the least recently active is evicted.")
@click.option("--max-records", envvar="CANONFLOW_UI_MAX_RECORDS", type=int,
              default=DEFAULT_MAX_RECORDS, show_default=True,
              help="Records kept per session; the oldest are dropped.")
@click.option("--max-mb", envvar="CANONFLOW_UI_MAX_MB", type=int,
              default=DEFAULT_MAX_BYTES // (1024 * 1024), show_default=True,
              help="Memory budget of the store, in MiB (one session gets at most a quarter).")
@click.option("--from-beginning/--from-now", default=True, show_default=True,
              help="Read agents.chat from its start, or only new records.")
def ui(broker: str | None, host: str, port: int, allowed_hosts: str, max_sessions: int,
       max_records: int, max_mb: int, from_beginning: bool) -> None:
    """Serve the fleet and a live chat view of its sessions (http://127.0.0.1:8066/).

    Counts the sessions by state, runtime and model, with today's tokens and cost;
    lists and searches them; shows any of them as a readable chat with its model,
    tokens, cost and timings, updated live. Runs until Ctrl-C / SIGTERM.
    """
    import signal

    from pipeline.settings import from_env

    try:
        settings = from_env(broker=broker)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if not settings.broker:
        raise click.UsageError("ui needs --broker (or CANONFLOW_BROKER)")
    try:
        app = ui_app_for(settings, host, allowed_hosts, max_sessions=max_sessions,
                         max_records=max_records, max_bytes=max_mb * 1024 * 1024,
                         from_beginning=from_beginning)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if not _is_loopback(host):
        click.echo(f"canonflow ui: WARNING: listening on {host}, beyond this machine, "
                   "with no login", err=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve_ui(app, host, port, stop, on_ready=lambda url: click.echo(
            f"canonflow ui: {url} (agents.chat on {settings.broker}; Ctrl-C stops)", err=True))

    try:
        asyncio.run(main())
    except OSError as e:
        raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


__all__ = ["consume_chat", "consume_summaries", "create_ui_app", "serve_ui", "ui",
           "ui_app_for", "STATIC_DIR", "DEFAULT_PORT"]
