"""`canonflow ui`: the bounded chat store, the HTTP API and SSE stream against the real
embedded broker and worker, and the page itself in a real headless Chromium.

The UI server runs in this process, in a thread with its own event loop, on a free
127.0.0.1 port; it is stopped (and its consumer closed) even when a test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.tools.replay import replay
from pipeline.views.ui import ChatStore, create_ui_app, serve_ui
from tests.pipeline.conftest import timed

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "fixtures" / "captured" / "codex"
SHELL = CAPTURED / "codex-app-server__tool_shell.capture.jsonl"
APPROVAL = CAPTURED / "codex-app-server__approval_accept.capture.jsonl"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WAIT = 120.0  # generous: a ceiling so a broken run ends, never a measure of speed


def chat_records(path: Path, session: str, provider: str = "codex") -> list[bytes]:
    """The chat records `canonflow replay --view chat` gives for a capture (one per line)."""
    out, err = io.BytesIO(), io.BytesIO()
    with open(path, "rb") as fh:
        replay(provider, [(str(path), fh)], out, err, fmt="capture", session=session,
               view="chat")
    return out.getvalue().splitlines()


def artifacts_dir() -> Path:
    d = Path(os.environ.get("CANONFLOW_TEST_ARTIFACTS") or ROOT / "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---- the store, fed directly (no broker needed) -----------------------------------

def test_store_derives_session_state_from_the_chat():
    store = ChatStore()
    states = []
    for value in chat_records(APPROVAL, "s1"):
        store.add(value, 1000)
        states.append((json.loads(value)["type"], store.sessions["s1"].state))
    assert ("approval", "waiting_approval") in states  # opened, not yet resolved
    assert states[-1] == ("done", "done")
    [summary] = store.summaries()
    assert summary["provider"] == "codex" and summary["turns"] == 1
    assert summary["pending_approvals"] == [] and summary["last_activity"] == 1000
    assert summary["preview"] == "Finished with the approval step."


def test_store_drops_redelivered_records_and_ignores_values_that_are_not_chat():
    store = ChatStore()
    records = chat_records(SHELL, "s1")
    for value in records + records[:3]:
        store.add(value)
    for junk in (None, b"not json", b"\xff\xfe", b"[1, 2]", b'"s"', b'{"seq": 1}',
                 b'{"session_id": "x", "seq": "1", "type": "text"}'):
        assert store.add(junk) is False
    assert len(store.sessions["s1"].records) == len(records)
    assert (store.duplicates, store.rejected) == (3, 7)


def test_store_keeps_the_newest_records_and_evicts_the_least_recent_session():
    store = ChatStore(max_sessions=2, max_records=4)
    for sid in ("a", "b", "c"):
        for value in chat_records(SHELL, sid):
            store.add(value)
    assert list(store.sessions) == ["b", "c"] and store.evicted == 1
    c = store.sessions["c"]
    # the capture's chat: 10 records (the user's prompt, the reply, the tool, ...)
    assert [seq for seq, _ in c.records] == [7, 8, 9, 10] and c.dropped == 6
    assert c.state == "done"  # derived state outlives the dropped records
    assert [seq for seq, _ in c.since(8)] == [8, 9, 10]
    # a byte budget evicts too, and one session trims itself to a quarter of it
    small = ChatStore(max_bytes=4000)
    for value in chat_records(SHELL, "big"):
        small.add(value)
    assert small.bytes <= 1000 and small.sessions["big"].dropped > 0


def test_store_starts_a_session_seen_mid_stream_with_a_gap():
    store = ChatStore()
    for value in chat_records(SHELL, "late")[4:]:
        store.add(value)
    s = store.sessions["late"]
    assert (s.dropped, s.last_seq, s.state) == (4, 10, "done")


# ---- the server, against the real broker -----------------------------------------

class UiServer:
    """create_ui_app + serve_ui in a thread on a free 127.0.0.1 port."""

    def __init__(self, make_app: Callable[[], Any]):
        self.make_app = make_app
        self.url = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="canonflow-ui", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            await serve_ui(self.make_app(), "127.0.0.1", 0, self._stop, on_ready=self._on_ready)

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self._error = e
            self._ready.set()

    def _on_ready(self, url: str) -> None:
        self.url = url
        self._ready.set()

    def __enter__(self) -> UiServer:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            self.__exit__()
            raise RuntimeError(f"the UI server did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the UI server did not stop"


@pytest.fixture
def ui_server(settings: Settings, worker: Any) -> Iterator[UiServer]:
    with UiServer(lambda: create_ui_app(settings)) as server:
        yield server


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def wait_for(what: str, probe: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Poll `probe` until it returns something truthy; fail saying what never came."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


class SseReader:
    """A minimal Server-Sent Events client over urllib: (event, id, data) triples."""

    def __init__(self, url: str, last_event_id: int | None = None):
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                           timeout=WAIT)
        assert self.resp.headers["Content-Type"].startswith("text/event-stream")

    def __iter__(self) -> Iterator[tuple[str, int | None, str]]:
        event, event_id, data = "message", None, list[str]()
        for raw in self.resp:
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data:
                    yield event, event_id, "\n".join(data)
                event, event_id, data = "message", None, []
            elif line.startswith(":"):
                continue  # heartbeat
            else:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    event = value
                elif field == "id":
                    event_id = int(value)
                elif field == "data":
                    data.append(value)

    def read_until(self, stop: Callable[[str, dict[str, Any]], bool]) -> list[tuple[str, Any]]:
        out = []
        for event, _, data in self:
            out.append((event, json.loads(data)))
            if stop(event, out[-1][1]):
                return out
        raise AssertionError(f"the stream ended early after {out!r}")

    def close(self) -> None:
        self.resp.close()


def test_sessions_api_and_event_stream_follow_the_chat_topic(settings, ui_server, tmp_path):
    session = "ui-sse"
    shell = timed(SHELL, tmp_path)  # capture times: the worker's ids equal replay's
    expected = [json.loads(v) for v in chat_records(shell, session)]
    base = ui_server.url

    # subscribe before the session exists: the stream says ready with nothing to replay
    live = SseReader(base + f"events?session={session}")
    listing = SseReader(base + "events")
    try:
        assert live.read_until(lambda ev, _: ev == "ready") == [
            ("ready", {"session_id": session, "next_seq": 1})]
        assert listing.read_until(lambda ev, _: ev == "sessions")[0][0] == "sessions"
        asyncio.run(produce(settings, "codex", session, records_from_file(str(shell), "capture")))
        got = live.read_until(lambda ev, r: ev == "record" and r["type"] == "done")
        listing.read_until(lambda ev, s: ev == "session" and s["state"] == "done"
                                       and s["session_id"] == session)
    finally:
        live.close()
        listing.close()
    assert [r for ev, r in got] == expected  # every record once, in order, as published

    sessions = get_json(base + "api/sessions")
    [mine] = [s for s in sessions if s["session_id"] == session]
    assert (mine["provider"], mine["state"], mine["last_seq"], mine["turns"]) == (
        "codex", "done", len(expected), 1)
    assert mine["last_activity"] > 0
    assert mine["preview"] == "The command printed fixture-ok. All done."
    detail = get_json(base + f"api/sessions/{session}")
    assert detail["records"] == expected

    # a late subscriber gets the replay; a reconnecting one only what it missed
    replayed = SseReader(base + f"events?session={session}")
    resumed = SseReader(base + f"events?session={session}", last_event_id=5)
    try:
        full = replayed.read_until(lambda ev, _: ev == "ready")
        rest = resumed.read_until(lambda ev, _: ev == "ready")
    finally:
        replayed.close()
        resumed.close()
    assert [r["seq"] for ev, r in full if ev == "record"] == list(range(1, len(expected) + 1))
    assert [r["seq"] for ev, r in rest if ev == "record"] == list(range(6, len(expected) + 1))

    status = get_json(base + "api/status")
    assert status["consumer"]["connected"] and status["consumer"]["error"] is None
    assert status["limits"]["max_sessions"] > 0


def test_ui_answers_loopback_names_only(settings):
    """A page on another origin that rebinds its DNS name to 127.0.0.1 still sends its
    own Host: the UI refuses it, so it cannot read the chat."""
    with UiServer(lambda: create_ui_app(settings)) as server:
        req = urllib.request.Request(server.url + "api/sessions",
                                     headers={"Host": "attacker.example:8066"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        assert e.value.code == 421
        port = server.url.rsplit(":", 1)[1].strip("/")
        ok = urllib.request.Request(server.url + "api/sessions",
                                    headers={"Host": f"localhost:{port}"})
        with urllib.request.urlopen(ok, timeout=30) as resp:
            assert resp.status == 200


def test_ui_command_serves_until_sigterm_even_with_a_stream_open(settings, tmp_path):
    """The click command as a child process (stopped by its PID): it prints its URL,
    serves, and a SIGTERM ends it cleanly while a browser-like stream is still open."""
    log = tmp_path / "ui.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from pipeline.views.ui import ui; ui(prog_name='canonflow ui')",
             "--broker", settings.broker, "--port", "0"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        line = wait_for("the UI's address in its log", lambda: next(
            (ln for ln in log.read_text().splitlines() if "http://" in ln), None)
            if proc.poll() is None else pytest.fail(f"canonflow ui exited: {log.read_text()}"))
        url = line.split()[2]
        assert url.startswith("http://127.0.0.1:"), line
        assert isinstance(get_json(url + "api/sessions"), list)
        stream = SseReader(url + "events")
        try:
            assert stream.read_until(lambda ev, _: ev == "sessions")[0][0] == "sessions"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(WAIT) == 0, log.read_text()
        finally:
            stream.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the page, in a real headless Chromium ------------------------------------------

def _chromium_or_skip() -> str:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        pytest.skip(f"{CHROMIUM} is absent and apt-get is unavailable to install Debian's "
                    "chromium package")
    pytest.fail(f"{CHROMIUM} is missing: run `apt-get update && apt-get install -y chromium`")


def produce_from_thread(settings: Settings, session: str, records: list[Any]) -> None:
    """produce(), from a thread of its own: Playwright's sync API keeps an event loop
    running in the test's thread."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(produce(settings, "codex", session, records))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]


@contextlib.contextmanager
def chromium_page(url: str, name: str) -> Iterator[Any]:
    """A page of a real headless Chromium (Debian's, driven by Playwright) opened at
    `url`; on failure its screenshot goes to the artefacts as NAME-failure.png."""
    executable = _chromium_or_skip()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is a test dependency: pip install 'playwright>=1.40' "
                    "(the system chromium is used; no `playwright install`)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(WAIT * 1000)
            try:
                page.goto(url)
                # the page's own stream is up (the broker may still be connecting)
                page.wait_for_selector("#conn[data-conn='live'], #conn[data-conn='broker']")
                yield page
            except BaseException:
                page.screenshot(path=str(artifacts_dir() / f"{name}-failure.png"),
                                full_page=True)
                raise
        finally:
            browser.close()


def test_the_page_shows_a_session_as_a_live_chat(settings, ui_server):
    session = "ui-browser"
    shot = artifacts_dir() / "ui-chat.png"
    with chromium_page(ui_server.url, "ui-chat") as page:
        produce_from_thread(settings, session, records_from_file(str(SHELL), "capture"))
        item = page.locator(f"li.session[data-session-id='{session}']")
        item.locator("button").click()
        chat = page.locator("#chat")

        # the assistant's text, streamed in as deltas and joined, one block per message
        page.wait_for_function(
            "() => [...document.querySelectorAll('#chat .msg.assistant .body')]"
            ".map(n => n.textContent).join('|') === "
            "'I will run the fixture command now.|The command printed fixture-ok. All done.'")

        # the Bash call with its command, and its output folded until opened
        tool = chat.locator(".tool")
        tool.wait_for()
        assert tool.locator(".tool-name").inner_text() == "Bash"
        assert "printf 'fixture-ok" in tool.locator(".tool-command").inner_text()
        page.wait_for_function(
            "() => document.querySelector('#chat .tool.finished .output-text')"
            "?.textContent === 'fixture-ok\\n'")
        output = tool.locator("details.tool-output")
        assert output.get_attribute("open") is None
        assert not tool.locator(".output-text").is_visible()
        output.locator("summary").click()
        assert tool.locator(".output-text").is_visible()
        assert tool.locator(".output-text").inner_text().strip() == "fixture-ok"

        # the done state: the final answer, and the session's state in list and header
        final = chat.locator(".final")
        final.wait_for()
        assert "The command printed fixture-ok. All done." in final.inner_text()
        page.wait_for_selector(f"li.session[data-session-id='{session}'][data-state='done']")
        page.wait_for_selector("#session-state[data-state='done']")
        assert page.locator("#session-state").inner_text() == "done"
        assert page.locator("#session-provider").inner_text() == "codex"
        assert "selected" in (item.get_attribute("class") or "")
        page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 0


def test_the_page_highlights_a_pending_approval_until_it_is_resolved(settings, ui_server):
    session = "ui-approval"
    records = records_from_file(str(APPROVAL), "capture")
    cut = next(i for i, r in enumerate(records) if b"requestApproval" in r.value) + 1
    with chromium_page(ui_server.url + f"#session={session}", "ui-approval") as page:
        # only up to the approval request: the runtime is waiting for a decision
        produce_from_thread(settings, session, records[:cut])
        pending = page.locator("#chat .approval.pending")
        pending.wait_for()
        assert "Approval needed" in pending.inner_text()
        assert "touch fixture-approval.txt" in pending.locator(".approval-detail").inner_text()
        page.wait_for_selector("#session-state[data-state='waiting_approval']")
        assert page.locator("#session-state").inner_text() == "waiting for approval"
        page.wait_for_selector(
            f"li.session[data-session-id='{session}'][data-state='waiting_approval']")
        page.screenshot(path=str(artifacts_dir() / "ui-approval-pending.png"), full_page=True)

        # the decision and the rest of the turn
        produce_from_thread(settings, session, records[cut:])
        page.locator("#chat .approval.resolved").wait_for()
        assert page.locator("#chat .approval.pending").count() == 0
        assert "decision: accept" in page.locator("#chat .approval").inner_text()
        assert "Approval allowed" in page.locator("#chat .approval").inner_text()
        # what the user asked heads the chat
        assert "FIXTURE turn 1: please do the scripted fixture task." in \
            page.locator("#chat .msg.user").inner_text()
        page.wait_for_selector("#session-state[data-state='done']")
        assert "Finished with the approval step." in page.locator("#chat .final").inner_text()


def test_the_page_says_when_the_broker_is_unreachable(settings):
    unreachable = settings.replace(broker="kafka://127.0.0.1:1")  # nothing listens on port 1
    with UiServer(lambda: create_ui_app(unreachable)) as server, \
            chromium_page(server.url, "ui-no-broker") as page:
        page.wait_for_selector("#conn[data-conn='broker']")
        assert page.locator("#conn").inner_text() == "broker unreachable"
        assert "KafkaConnectionError" in (page.locator("#conn").get_attribute("title") or "")
        assert page.locator("#no-sessions").is_visible()
