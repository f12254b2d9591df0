"""`canonflow ui` as a fleet owner's window: the fleet counts, the search, a session's
model, tokens, cost and timings, the first paint and the store's bounds.

The figures are checked against what `canonflow replay` makes of the same captures
(another path to the same canonical events), never against numbers typed here.
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pipeline.settings import Settings
from pipeline.tools.kafka_io import records_from_file
from pipeline.tools.replay import replay
from pipeline.views.chat_store import MAX_DAYS, MAX_TOOLS, MAX_TURNS, ChatStore
from pipeline.views.ui import create_ui_app
from pipeline.worker.process import WorkerProcess
from tests.pipeline.test_ui import (
    APPROVAL,
    CAPTURED,
    CHROMIUM_ARGS,
    FAILED_TURN,
    SHELL,
    WAIT,
    UiServer,
    _chromium_or_skip,
    chat_records,
    chromium_page,
    get_json,
    wait_for,
)
from topics.canonical import decode_event

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_SHELL = CAPTURED.parent / "claude" / "claude-code-stream-json__tool_shell.capture.jsonl"
#: Where the screenshots go (as tests/pipeline/test_ui.py's: docs/ui/ holds the copies
#: the docs show, refreshed by hand from a run's artifacts)
DOCS_UI = Path(os.environ.get("CANONFLOW_TEST_ARTIFACTS") or ROOT / "artifacts") / "ui"


def today(path: Path, tmp_path: Path) -> Path:
    """A copy of a capture dated now (its lines 10 ms apart), so its turns complete
    today and the worker and replay give the same createdAt."""
    out = tmp_path / f"today-{path.name}"
    lines = [json.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    start = int(time.time() * 1000)
    out.write_text("".join(json.dumps({**x, "t": start + 10 * i}) + "\n"
                           for i, x in enumerate(lines)))
    return out


def canonical(path: Path, provider: str, session: str) -> list[dict[str, Any]]:
    """The canonical events `canonflow replay` gives for a capture."""
    out, err = io.BytesIO(), io.BytesIO()
    with open(path, "rb") as fh:
        replay(provider, [(str(path), fh)], out, err, fmt="capture", session=session)
    return [json.loads(x) for x in out.getvalue().splitlines()]


def turn_figures(events: list[dict[str, Any]]) -> tuple[int, float]:
    """(tokens, dollars) of the completed turns among `events`."""
    done = [e["payload"] for e in events if e["type"] == "turn.completed"]
    return (sum(p.get("tokens", {}).get("total", 0) for p in done),
            sum(p.get("cost", {}).get("usd", 0.0) for p in done))


def ms(created_at: str) -> int:
    from datetime import datetime
    return int(datetime.fromisoformat(created_at).timestamp() * 1000)


def tool_durations(events: list[dict[str, Any]]) -> list[int]:
    started = {e["itemId"]: ms(e["createdAt"]) for e in events if e["type"] == "item.started"
               and e["payload"].get("itemType") == "command_execution"}
    return [ms(e["createdAt"]) - started[e["itemId"]] for e in events
            if e["type"] == "item.completed" and e["itemId"] in started]


def duration_text(ms_: int) -> str:
    """As the page writes a duration (app.js `duration`)."""
    return f"{ms_} ms" if ms_ < 1000 else f"{ms_ / 1000:.1f} s"


# ---- the store's bounds (fed directly) ---------------------------------------------

def test_the_store_keeps_at_most_its_sessions_turns_tools_and_days():
    events = [decode_event(json.dumps(e).encode())
              for e in canonical(SHELL, "codex", "s")]
    kinds = [e.__struct_config__.tag for e in events]
    turn_started = events[kinds.index("turn.started")]
    turn_done = events[kinds.index("turn.completed")]
    tool_start = next(e for e, k in zip(events, kinds, strict=True) if k == "item.started"
                      and e.payload.itemType == "command_execution")
    tool_done = next(e for e, k in zip(events, kinds, strict=True) if k == "item.completed"
                     and e.itemId == tool_start.itemId)
    store = ChatStore(max_sessions=3)
    seq = 0

    def feed(event: Any, sid: str, **change: Any) -> None:
        nonlocal seq
        seq += 1
        store.add_event(msgspec.structs.replace(event, sessionId=sid, seq=seq, **change))

    for n in range(MAX_TURNS + 50):
        feed(turn_started, "long", turnId=f"t{n}")
        feed(turn_done, "long", turnId=f"t{n}",
             createdAt=f"2026-01-{1 + n % 20:02d}T00:00:00Z")
    for n in range(MAX_TOOLS + 50):
        feed(tool_start, "long", itemId=f"i{n}", providerRefs=msgspec.UNSET)
        feed(tool_done, "long", itemId=f"i{n}", providerRefs=msgspec.UNSET)
    for sid in ("a", "b", "c", "d"):
        for value in chat_records(SHELL, sid):
            store.add(value)
    assert list(store.sessions) == ["b", "c", "d"] and store.evicted == 2
    # a session's timings are bounded too, the newest kept
    store = ChatStore()
    seq = 0
    for n in range(MAX_TURNS + 50):
        feed(turn_started, "long", turnId=f"t{n}")
        feed(turn_done, "long", turnId=f"t{n}",
             createdAt=f"2026-01-{1 + n % 20:02d}T00:00:00Z")
    for n in range(MAX_TOOLS + 50):
        feed(tool_start, "long", itemId=f"i{n}", providerRefs=msgspec.UNSET)
        feed(tool_done, "long", itemId=f"i{n}", providerRefs=msgspec.UNSET)
    s = store.sessions["long"]
    assert len(s.turn_times) == MAX_TURNS and next(iter(s.turn_times)) == "t50"
    assert len(s.tool_times) == MAX_TOOLS and next(iter(s.tool_times)) == "i50"
    assert len(store.days) == MAX_DAYS
    # a redelivered event (seq already taken) counts nothing twice
    before = dict(store.days[max(store.days)])
    store.add_event(msgspec.structs.replace(turn_done, sessionId="long", seq=seq,
                                            createdAt=f"{max(store.days)}T00:00:00Z"))
    assert store.days[max(store.days)] == before


# ---- against a real worker on the embedded broker -------------------------------------

@pytest.fixture
def stall_worker(settings: Settings, tmp_path: Path) -> Any:
    """A worker that says a session waiting on an approval for 1.5 s is stalled."""
    quick = settings.replace(stall_approval=1.5, stall_model=0.0, stall_tool=0.0,
                             stall_scan_interval=0.3)
    w = WorkerProcess(quick, log_path=str(tmp_path / "worker.log")).start()
    try:
        yield w
    finally:
        w.stop()


def fleet_inputs(tmp_path: Path) -> dict[str, tuple[str, Path, int | None]]:
    """session -> (provider, capture dated today, records to send: None for all)."""
    approval = today(APPROVAL, tmp_path)
    cut = next(i for i, r in enumerate(records_from_file(str(approval), "capture"))
               if b"requestApproval" in r.value) + 1
    return {"fleet-shell": ("codex", today(SHELL, tmp_path), None),
            "fleet-claude": ("claude", today(CLAUDE_SHELL, tmp_path), None),
            "fleet-approval": ("codex", approval, cut),
            "fleet-failed": ("codex-exec", today(FAILED_TURN, tmp_path), None)}


def send(settings: Settings, inputs: dict[str, tuple[str, Path, int | None]]) -> int:
    """Produce every input; returns the tokens of the turns they complete (by replay)."""
    tokens = 0
    for session, (provider, path, cut) in inputs.items():
        records = records_from_file(str(path), "capture")[:cut]
        produce_one(settings, provider, session, records)
        if cut is None:
            tokens += turn_figures(canonical(path, provider, session))[0]
    return tokens


def produce_one(settings: Settings, provider: str, session: str, records: list[Any]) -> None:
    import asyncio
    import threading

    from pipeline.tools.kafka_io import produce

    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(produce(settings, provider, session, records))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def test_the_fleet_view_counts_a_real_workers_sessions_and_finds_them(
        settings, stall_worker, tmp_path):
    inputs = fleet_inputs(tmp_path)
    dollars = sum(turn_figures(canonical(p, prov, s))[1] for s, (prov, p, cut) in inputs.items()
                  if cut is None)
    shell_events = canonical(inputs["fleet-shell"][1], "codex", "fleet-shell")
    [shell_turn] = [e["payload"] for e in shell_events if e["type"] == "turn.completed"]
    [shell_tool] = tool_durations(shell_events)
    with UiServer(lambda: create_ui_app(settings)) as server:
        tokens = send(settings, inputs)
        fleet = wait_for("the four sessions counted, one stalled", lambda: (
            lambda f: f if f["sessions"] == 4 and f["stalled"] and f["failed"]
            and f["today"]["turns"] >= 3 else None)(get_json(server.url + "api/fleet")))
        assert fleet["waiting_on_person"] == ["fleet-approval"]
        assert fleet["stalled"] == ["fleet-approval"]
        assert fleet["failed"] == ["fleet-failed"]
        assert fleet["by_runtime"] == {"codex": 2, "claude": 1, "codex-exec": 1}
        assert fleet["by_state"] == {"done": 2, "stalled": 1, "failed": 1}
        assert fleet["today"]["total"] == tokens
        assert fleet["today"]["cost_usd"] == pytest.approx(dollars)
        models = {s["session_id"]: s["model"] for s in get_json(server.url + "api/sessions")}
        assert models["fleet-shell"] == shell_turn["cost"]["model"]
        # the search reads the records, in any case: the two shells printed fixture-ok,
        # only the approval's command touches fixture-approval.txt
        found = get_json(server.url + "api/sessions?q=FIXTURE-OK")
        assert sorted(s["session_id"] for s in found) == ["fleet-claude", "fleet-shell"]
        found = get_json(server.url + "api/sessions?q=fixture-approval")
        assert [s["session_id"] for s in found] == ["fleet-approval"]
        assert [s["session_id"] for s in get_json(server.url + "api/sessions?runtime=claude")
                ] == ["fleet-claude"]
        assert [s["session_id"] for s in get_json(server.url + "api/sessions?state=waiting")
                ] == ["fleet-approval"]
        timings = get_json(server.url + "api/sessions/fleet-shell/timings")
        [turn] = timings["turns"]
        assert turn["duration_ms"] == shell_turn["durationMs"]
        assert turn["tokens"] == shell_turn["tokens"]
        assert turn["cost_usd"] == shell_turn["cost"]["usd"]
        assert [t["duration_ms"] for t in timings["tools"].values()] == [shell_tool]

        with chromium_page(server.url, "ui-fleet", viewport=(1280, 900)) as page:
            counter = "#fleet-{} b"
            page.wait_for_function("() => document.querySelector('#fleet-sessions')"
                                   ".dataset.count === '4'")
            for name, want in (("sessions", 4), ("waiting", 1), ("stalled", 1), ("failed", 1)):
                assert page.locator(counter.format(name)).inner_text() == str(want), name
            assert page.locator("#fleet-today").get_attribute("data-tokens") == str(tokens)
            assert float(page.locator("#fleet-today").get_attribute("data-cost-usd")) == \
                pytest.approx(dollars)
            page.locator(".fleet-rows summary").click()
            rows = page.locator("#fleet-table tr")
            assert rows.count() == len({(p, models[s]) for s, (p, _, _) in inputs.items()})
            DOCS_UI.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(DOCS_UI / "fleet.png"))

            # the search: text in the records, then a state from a counter
            page.fill("#search", "fixture-approval")
            page.wait_for_function("() => document.querySelectorAll('li.session').length === 1")
            assert page.locator("li.session").get_attribute("data-session-id") == \
                "fleet-approval"
            assert page.locator("#session-count").inner_text() == "1 of 4"
            page.fill("#search", "")
            page.wait_for_function("() => document.querySelectorAll('li.session').length === 4")
            page.locator("#fleet-stalled").click()
            page.wait_for_function("() => document.querySelectorAll('li.session').length === 1")
            assert page.locator("li.session").get_attribute("data-session-id") == \
                "fleet-approval"
            assert page.locator("li.session .state").inner_text() == "stalled"
            page.locator("#fleet-stalled").click()
            page.select_option("#filter-runtime", "claude")
            page.wait_for_function("() => document.querySelectorAll('li.session').length === 1")
            page.select_option("#filter-runtime", "")

            # one session: its model, tokens and cost, each tool call's and turn's time
            page.locator("li.session[data-session-id='fleet-shell'] button").click()
            page.wait_for_selector("#chat .tool .tool-time")
            assert page.locator("#chat .tool .tool-time").get_attribute("data-ms") == \
                str(shell_tool)
            assert page.locator("#chat .tool .tool-time").inner_text() == \
                duration_text(shell_tool)
            usage = page.locator("#chat .final .turn-usage")
            usage.wait_for()
            assert usage.get_attribute("data-ms") == str(shell_turn["durationMs"])
            text = usage.inner_text()
            assert duration_text(shell_turn["durationMs"]) in text
            assert f"{shell_turn['tokens']['total']:,} tokens" in text
            assert f"${shell_turn['cost']['usd']:.4f}" in text
            assert shell_turn["cost"]["model"] in page.locator("#session-usage").inner_text()
            page.screenshot(path=str(DOCS_UI / "session.png"))


def test_the_fleet_view_fits_a_phone(settings, worker, tmp_path):
    inputs = fleet_inputs(tmp_path)
    del inputs["fleet-failed"]
    with UiServer(lambda: create_ui_app(settings)) as server, \
            chromium_page(server.url, "ui-fleet-phone", viewport=(390, 844)) as page:
        send(settings, inputs)
        page.wait_for_function("() => document.querySelector('#fleet-sessions')"
                               ".dataset.count === '3'")
        page.wait_for_function("() => document.querySelector('#fleet-waiting')"
                               ".dataset.count === '1'")
        assert page.locator("#fleet").is_visible() and page.locator("#search").is_visible()
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
        assert page.locator("#fleet").bounding_box()["width"] <= 390
        page.fill("#search", "fixture-ok")
        page.wait_for_function("() => document.querySelectorAll('li.session').length === 2")
        DOCS_UI.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_UI / "phone.png"))
        page.locator("li.session[data-session-id='fleet-shell'] button").click()
        page.wait_for_selector("#chat .tool .tool-time")
        page.wait_for_selector("#chat .final .turn-usage")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390


# ---- the first paint -------------------------------------------------------------------

def test_the_first_paint_says_connecting_until_the_server_answers():
    """Until the list stream's first message the page says "connecting", not
    "disconnected", and not "No sessions yet"; then the real state."""
    from playwright.sync_api import sync_playwright

    store = ChatStore()
    unreachable = Settings(broker="kafka://127.0.0.1:1")
    with UiServer(lambda: create_ui_app(unreachable, consume=False, store=store)) as server, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium_or_skip(), headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(WAIT * 1000)
            held: list[Any] = []
            page.route("**/events", lambda route: held.append(route))
            page.goto(server.url)
            page.wait_for_function("() => document.readyState === 'complete'")
            wait_for("the page's list stream to be asked for", lambda: held)
            page.wait_for_timeout(300)  # let the page paint its first state
            assert page.locator("#conn").get_attribute("data-conn") == "connecting"
            assert page.locator("#conn").inner_text() == "connecting…"
            assert page.locator("#no-sessions").is_hidden()
            assert page.locator("#loading").is_visible()
            held[0].continue_()
            page.wait_for_selector("#conn[data-conn='broker']")
            assert page.locator("#no-sessions").is_visible()
            assert page.locator("#loading").is_hidden()
        finally:
            browser.close()
