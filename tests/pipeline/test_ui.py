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

from pipeline.cluster.broker import EmbeddedBroker
from pipeline.settings import Settings
from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.tools.replay import replay
from pipeline.views.chat_store import ChatStore
from pipeline.views.ui import create_ui_app, serve_ui
from tests.pipeline.conftest import timed

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "fixtures" / "captured" / "codex"
SHELL = CAPTURED / "codex-app-server__tool_shell.capture.jsonl"
APPROVAL = CAPTURED / "codex-app-server__approval_accept.capture.jsonl"
FILE_WRITE = CAPTURED / "codex-app-server__file_write.capture.jsonl"
FAILED_TURN = ROOT / "tests" / "adapters" / "goldens" / "codex-exec" / "error_turn_failed.in.jsonl"
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


def declined(tmp_path: Path) -> Path:
    """The approval capture with the user's answer turned into a refusal: the client's
    `{"decision": "accept"}` reply becomes `{"decision": "decline"}` (Codex's own word)."""
    out = tmp_path / "codex-app-server__approval_decline.capture.jsonl"
    text = APPROVAL.read_text()
    assert text.count('"result":{"decision":"accept"}') == 1
    out.write_text(text.replace('"result":{"decision":"accept"}', '"result":{"decision":"decline"}'))
    return out


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
    # the store adds the command without its shell wrapper; the rest is as published
    tools = [r for r in expected if r["type"] == "tool_use"]
    assert [r["input"]["command"] for r in tools] == [
        "/bin/bash -lc \"printf 'fixture-ok\\\\n'\""]
    for r in tools:
        r["shown_command"] = "printf 'fixture-ok\\n'"
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
def chromium_page(url: str, name: str, viewport: tuple[int, int] = (1280, 860)
                  ) -> Iterator[Any]:
    """A page of a real headless Chromium (Debian's, driven by Playwright) opened at
    `url`; on failure its screenshot goes to the artefacts as NAME-failure.png."""
    executable = _chromium_or_skip()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is a test dependency: pip install 'playwright>=1.40' "
                    "(the system chromium is used; no `playwright install`)")
    console_errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.set_default_timeout(WAIT * 1000)
            try:
                page.goto(url)
                # the page's own stream is up (the broker may still be connecting)
                page.wait_for_selector("#conn[data-conn='live'], #conn[data-conn='broker'], "
                                       "#conn[data-conn='connecting']")
                yield page
                # no script error, no request the content security policy refused
                assert console_errors == [], console_errors
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
        # as the model wrote it: no `/bin/bash -lc` around it
        assert tool.locator(".tool-command").inner_text() == "$ printf 'fixture-ok\\n'"
        page.wait_for_function(
            "() => document.querySelector('#chat .tool.finished .output-text')"
            "?.textContent === 'fixture-ok\\n'")
        output = tool.locator("details.tool-output")
        assert output.get_attribute("open") is None
        assert not tool.locator(".output-text").is_visible()
        output.locator("summary").click()
        assert tool.locator(".output-text").is_visible()
        assert tool.locator(".output-text").inner_text().strip() == "fixture-ok"

        # the done state: the last message is marked as the final answer, not repeated
        final = chat.locator(".final")
        final.wait_for()
        assert final.locator(".final-title").inner_text().strip() == "Done"
        assert chat.locator(".msg.final-answer .body").inner_text() == \
            "The command printed fixture-ok. All done."
        assert chat.inner_text().count("The command printed fixture-ok. All done.") == 1
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
        assert pending.locator(".approval-detail").inner_text() == "touch fixture-approval.txt"
        # in words, not the runtime's names, and before the tool call it gates
        assert page.locator("#chat .tool.awaiting .tool-status").inner_text() == \
            "waiting for approval"
        what = pending.locator(".approval-what").inner_text()
        assert what == "The agent asks to run a command (Bash)"
        assert "command_execution_approval" not in pending.inner_text()
        assert page.evaluate("""() => {
            const kids = [...document.querySelector('#chat').children];
            return kids.indexOf(document.querySelector('#chat .approval'))
                < kids.indexOf(document.querySelector('#chat .tool'));
        }""")
        assert page.locator("#chat .tool .tool-command").inner_text() == \
            "$ touch fixture-approval.txt"
        [waiting] = [s for s in get_json(ui_server.url + "api/sessions")
                     if s["session_id"] == session]
        assert [a["detail"] for a in waiting["pending_approvals"]] == ["touch fixture-approval.txt"]
        page.wait_for_selector("#session-state[data-state='waiting_approval']")
        assert page.locator("#session-state").inner_text() == "waiting for approval"
        page.wait_for_selector(
            f"li.session[data-session-id='{session}'][data-state='waiting_approval']")
        page.screenshot(path=str(artifacts_dir() / "ui-approval-pending.png"), full_page=True)

        # the decision and the rest of the turn
        produce_from_thread(settings, session, records[cut:])
        page.locator("#chat .approval.resolved.allowed").wait_for()
        assert page.locator("#chat .approval.pending").count() == 0
        assert page.locator("#chat .approval .approval-title").inner_text() == "✓ Allowed" or \
            page.locator("#chat .approval .approval-title").inner_text() == "Allowed"
        assert page.locator("#chat .tool.denied").count() == 0
        # what the user asked heads the chat
        assert "FIXTURE turn 1: please do the scripted fixture task." in \
            page.locator("#chat .msg.user").inner_text()
        page.wait_for_selector("#session-state[data-state='done']")
        assert "Finished with the approval step." in page.locator(
            "#chat .msg.final-answer").inner_text()


def test_the_page_says_when_the_broker_is_unreachable(settings):
    unreachable = settings.replace(broker="kafka://127.0.0.1:1")  # nothing listens on port 1
    with UiServer(lambda: create_ui_app(unreachable)) as server, \
            chromium_page(server.url, "ui-no-broker") as page:
        page.wait_for_selector("#conn[data-conn='broker']")
        assert page.locator("#conn").inner_text() == "disconnected"
        assert "127.0.0.1:1" in (page.locator("#conn").get_attribute("title") or "")
        assert page.locator("#no-sessions").is_visible()


def test_the_header_says_disconnected_within_seconds_of_the_broker_going_away(tmp_path):
    broker = EmbeddedBroker(log_path=str(tmp_path / "tansu.log")).start()
    try:
        settings = Settings(broker=broker.url)
        with UiServer(lambda: create_ui_app(settings)) as server, \
                chromium_page(server.url, "ui-broker-gone") as page:
            page.wait_for_selector("#conn[data-conn='live']")
            broker.stop()
            gone = time.monotonic()
            page.wait_for_selector("#conn[data-conn='broker']", timeout=15_000)
            took = time.monotonic() - gone
            assert page.locator("#conn").inner_text() == "disconnected"
            print(f"the header said disconnected {took:.1f} s after the broker stopped")
    finally:
        broker.stop()


# ---- the page, fed from a store (no broker): what a reviewer reads -----------------

#: An assistant message in Markdown, with HTML that must stay text.
MARKDOWN = ("## Summary\n\nI changed **two** things in `fixture.txt`:\n\n"
            "1. added a line\n2. kept the rest\n\n"
            "```python\nprint('<b>not bold</b>')\n```\n\n"
            "| file | lines |\n| --- | --- |\n| fixture.txt | 1 |\n\n"
            "See [the docs](https://example.com/docs) and <img src=x onerror=alert(1)>"
            "<script>alert(2)</script> [bad](javascript:alert(3)).")


def markdown_record(session: str, seq: int) -> bytes:
    return json.dumps({"type": "text", "session_id": session, "provider": "codex", "seq": seq,
                       "event_id": f"md.{seq}", "source_event_id": "md", "turn_id": "t-md",
                       "content": MARKDOWN, "accumulated": MARKDOWN, "phase": None,
                       "item_id": "itm-md", "parent_tool_use_id": None}).encode()


def store_of(*conversations: tuple[str, list[bytes]]) -> ChatStore:
    store = ChatStore()
    for _, records in conversations:
        for value in records:
            assert store.add(value, 1_764_000_000_000)
    return store


def test_the_page_renders_markdown_diffs_refusals_and_errors_once(tmp_path):
    session = "ui-review"
    # one session: a refused command, a file written, a Markdown reply, a failed turn
    refused = chat_records(declined(tmp_path), session)
    written = [json.loads(v) for v in chat_records(FILE_WRITE, session)]
    failed = [json.loads(v) for v in chat_records(FAILED_TURN, session, "codex-exec")]
    records = list(refused)
    for r in [*written, *failed]:
        r["seq"] = len(records) + 1
        records.append(json.dumps(r).encode())
    records.append(markdown_record(session, len(records) + 1))
    store = store_of((session, records))
    unreachable = Settings(broker="kafka://127.0.0.1:1")
    with UiServer(lambda: create_ui_app(unreachable, consume=False, store=store)) as server, \
            chromium_page(server.url + f"#session={session}", "ui-review",
                          viewport=(1100, 1650)) as page:
        chat = page.locator("#chat")
        page.wait_for_selector("#chat[data-ready='true']")
        page.wait_for_selector("#chat .md h4")

        # the refusal: the approval denied, the command it gated marked as not run
        denied = chat.locator(".approval.denied")
        assert denied.locator(".approval-title").inner_text() in ("✕ Denied", "Denied")
        assert denied.locator(".approval-title").get_attribute("title") == \
            "the runtime's answer: decline"
        bash = chat.locator(".tool.denied")
        assert bash.locator(".tool-status").inner_text() == "not run: denied"
        assert "touch fixture-approval.txt" in bash.locator(".tool-command").inner_text()

        # the file change: its path in the header, a diff instead of the JSON input
        change = chat.locator(".tool.file-change")
        assert change.locator(".tool-path").inner_text() == "/sandbox/workspace/fixture.txt"
        assert change.locator(".diff-add").inner_text().strip() == "+hello fixture"
        assert change.locator(".diff-stat").inner_text() == "+1 −0"
        assert change.locator(".tool-input").count() == 0
        assert "\"changes\"" not in change.inner_text()

        # the failed turn: the error twice in the stream, once on the page, not repeated
        # by the turn's end; the retry notice quiet
        errors = chat.locator(".error:not(.retrying)")
        assert errors.count() == 1 and errors.get_attribute("data-count") == "2"
        assert errors.locator(".error-title").inner_text() == "Provider error"
        assert chat.inner_text().count("stream disconnected before completion") == 2  # + retry
        assert chat.locator(".error.retrying").count() == 1
        assert chat.locator(".final.failed").count() == 1

        # Markdown: structure rendered, HTML left as text, unsafe links as text
        body = chat.locator(".msg.assistant .md").last
        assert body.locator("h4").inner_text() == "Summary"
        assert body.locator("strong").inner_text() == "two"
        assert body.locator("p code").first.inner_text() == "fixture.txt"
        assert body.locator("ol li").all_inner_texts() == ["added a line", "kept the rest"]
        assert body.locator("pre code").inner_text() == "print('<b>not bold</b>')"
        assert body.locator("table td").all_inner_texts() == ["fixture.txt", "1"]
        link = body.locator("a")
        assert link.count() == 1 and link.get_attribute("href") == "https://example.com/docs"
        assert link.get_attribute("rel") == "noopener noreferrer nofollow"
        assert "<img src=x onerror=alert(1)><script>alert(2)</script>" in body.inner_text()
        assert "[bad](javascript:alert(3))" in body.inner_text()
        assert page.locator("#chat img, #chat script, #chat b").count() == 0
        page.screenshot(path=str(artifacts_dir() / "ui-review.png"), full_page=True)


def test_the_page_works_on_a_phone(tmp_path):
    session = "ui-phone"
    store = store_of((session, chat_records(declined(tmp_path), session)))
    unreachable = Settings(broker="kafka://127.0.0.1:1")
    with UiServer(lambda: create_ui_app(unreachable, consume=False, store=store)) as server, \
            chromium_page(server.url, "ui-phone", viewport=(390, 844)) as page:
        item = page.locator(f"li.session[data-session-id='{session}']")
        item.wait_for()
        assert page.locator("#chat").is_hidden()  # the list fills the screen
        page.screenshot(path=str(artifacts_dir() / "ui-phone-list.png"))
        item.locator("button").click()
        page.wait_for_selector("#chat .final")
        assert page.locator(".sidebar").is_hidden() and page.locator("#back").is_visible()
        # nothing wider than the screen: no sideways scrolling
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
        assert page.locator("#chat").bounding_box()["width"] <= 390
        page.screenshot(path=str(artifacts_dir() / "ui-phone.png"), full_page=True)
        page.locator("#back").click()
        item.wait_for()
        assert page.locator(".sidebar").is_visible()


def test_the_favicon_is_served_and_the_page_names_it():
    with UiServer(lambda: create_ui_app(Settings(broker="kafka://127.0.0.1:1"),
                                        consume=False)) as server:
        for path in ("favicon.ico", "static/favicon.svg"):
            with urllib.request.urlopen(server.url + path, timeout=30) as resp:
                assert resp.headers["Content-Type"].startswith("image/svg+xml")
                assert resp.read().startswith(b"<svg")
        with urllib.request.urlopen(server.url, timeout=30) as resp:
            page = resp.read().decode()
        assert '<link rel="icon" href="/static/favicon.svg"' in page
        assert "default-src 'self'; script-src 'self'" in page  # the policy is kept
