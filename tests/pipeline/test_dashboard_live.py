"""deploy/grafana/canonflow.json against the real thing: Debian's Prometheus scrapes a
real worker (the embedded broker, its web server's /metrics, every second) while
captured conversations of several runtimes flow through it, and every query of the
dashboard is evaluated by that Prometheus. Grafana cannot run on these machines, so
tests/deploy/promdash.py draws the answers in Grafana's layout, and headless Chromium
keeps the page as artifacts/dashboard.png (docs/dashboard.png is one such run).

Prometheus listens on 127.0.0.1 only and is stopped by its PID, even when a test fails.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.broker import free_port, stop_process
from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord, produce, records_from_file
from pipeline.worker.process import WorkerProcess
from tests.deploy import promdash
from tests.deploy.files import DASHBOARD, DEPLOY, load_yaml
from tests.pipeline.test_metrics import health, wait_for
from tests.pipeline.test_ui import CHROMIUM_ARGS, _chromium_or_skip, artifacts_dir
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC

pytestmark = pytest.mark.broker

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
SCRAPE_SECONDS = 1.0
FLOW_SECONDS = 25.0  # how long conversations keep arriving: the charts' shape, no limit
WAIT = 90.0  # ceilings for a broken run, never a measure of speed
#: (provider, capture): tool calls (Bash, Edit, Write) and approvals in most of them
FEED = [
    ("codex", "codex/codex-app-server__approval_accept"),
    ("claude", "claude/claude-code-sdk-stdio__tool_shell_allow"),
    ("opencode", "opencode/opencode-serve__approval_once"),
    ("acp", "acp/acp-claude-code__tool_shell_allow"),
    ("codex-exec", "codex-exec/codex-exec__tool_shell"),
    ("gemini", "gemini/gemini-stream-json__tool_shell"),
    ("claude", "claude/claude-code-stream-json__file_write"),
    ("codex", "codex/codex-app-server__file_write"),
    ("acp", "acp/acp-gemini__tool_shell_allow"),
    ("gemini", "gemini/gemini-stream-json__file_write"),
    ("claude", "claude/claude-code-stream-json__tool_shell"),
    ("acp", "acp/acp-claude-code__file_write"),
]
#: Bad input now and then, as a real fleet sends it: a line that is not JSON (a dead
#: letter) and a native type no adapter knows (a runtime.warning)
BAD = [RawRecord(b"{not json", "agent", None),
       RawRecord(b'{"type":"thread.hologram","id":"h1"}', "agent", None)]
#: Panels that must show data after the flow, the issue's core views
CORE = ("Native messages in", "Canonical events out", "Records delivered, by topic",
        "End-to-end lag (event time to delivery)", "Active sessions", "Table entries",
        "Broker reachable", "Turns", "Tool calls (top 10)", "Approvals", "Sessions by state",
        "Worker memory (resident)")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The conftest's settings with the worker's web server on (127.0.0.1, a free port)
    and the fleet stage publishing every second."""
    return settings.replace(web_enabled=True, web_host="127.0.0.1", web_port=free_port(),
                            health_probe_interval=0.5, fleet_publish_interval=1.0)


class Prometheus:
    """/usr/bin/prometheus as a child process scraping one target, on 127.0.0.1."""

    def __init__(self, binary: str, target: str, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        config = workdir / "prometheus.yml"
        shutil.copy(ALERTS, workdir / "alerts.yml")  # the shipped alert rules, as deployed
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_SECONDS:g}s\n"
            f"  scrape_timeout: {SCRAPE_SECONDS:g}s\n"
            f"  evaluation_interval: {SCRAPE_SECONDS:g}s\n"
            "rule_files: [alerts.yml]\n"
            "scrape_configs:\n"
            "  - job_name: canonflow\n"
            "    metrics_path: /metrics\n"
            "    static_configs:\n"
            f"      - targets: [\"{target}\"]\n")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.started = time.time()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        if not self.alive():
            raise AssertionError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=5) as resp:
                return resp.status == 200
        except OSError:
            return False

    def rules(self) -> list[dict[str, Any]]:
        """The rules Prometheus loaded, each with its group's name, health and last error."""
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=30) as resp:
            groups = json.loads(resp.read())["data"]["groups"]
        return [{**rule, "group": g["name"]} for g in groups for rule in g["rules"]]

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=30) as resp:
            return json.loads(resp.read())["data"]["result"]

    def stop(self) -> None:
        stop_process(self.proc, 20.0)


@pytest.fixture
def prometheus(settings: Settings, tmp_path: Path) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(binary).exists():
        pytest.skip("the prometheus binary is missing: install Debian's package with "
                    "`apt-get install -y --no-install-recommends prometheus` (.ci/run does)")
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    prom = Prometheus(binary, f"127.0.0.1:{settings.web_port}", workdir)
    try:
        wait_for(prom.ready, "Prometheus ready", timeout=WAIT)
        yield prom
    finally:
        prom.stop()


def feed(settings: Settings, worker: WorkerProcess, seconds: float) -> set[str]:
    """Conversations from FEED, each under a session key of its own, one after the
    other for `seconds`; returns the providers fed."""
    records = {path: records_from_file(str(CAPTURED / f"{path}.capture.jsonl"), "capture")
               for _, path in FEED}
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end or n < len(FEED):  # every capture at least once
        provider, path = FEED[n % len(FEED)]
        asyncio.run(produce(settings, provider, f"dash-{n}", records[path]))
        if n % 5 == 4:
            asyncio.run(produce(settings, "codex-exec", f"dash-bad-{n}", BAD))
        n += 1
        assert worker.alive(), f"the worker died; see {worker.log_path}"
        time.sleep(0.3)  # spreads the flow over the window; asserts nothing
    return {p for p, _ in FEED}


def evaluate(prom: Prometheus, since: float) -> promdash.Evaluation:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return promdash.evaluate(dashboard, prom.url, window=time.time() - since,
                             scrape_interval=SCRAPE_SECONDS)


def screenshot(page_html: str, height: int, path: Path) -> dict[str, Any]:
    """The page in a real headless Chromium, the whole of it in `path`; returns what the
    browser laid out: the page's width and, per panel id, its lines, bars and stats."""
    executable = _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": height})
            page.set_default_timeout(WAIT * 1000)
            page.set_content(page_html)
            laid_out = page.evaluate("""() => ({
                width: document.documentElement.scrollWidth,
                panels: Object.fromEntries([...document.querySelectorAll('.panel')].map(p => [
                    p.dataset.panelId, {lines: p.querySelectorAll('polyline').length,
                                        bars: p.querySelectorAll('.bar').length,
                                        stats: p.querySelectorAll('.stat').length,
                                        error: p.querySelectorAll('.nodata.error').length}]))
            })""")
            page.screenshot(path=str(path), full_page=True)
        finally:
            browser.close()
    return laid_out


def test_every_dashboard_query_runs_in_prometheus_and_the_core_panels_show_data(
        settings, prometheus, worker):
    wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", timeout=WAIT,
             worker=worker)
    wait_for(lambda: [s for s in prometheus.query('up{job="canonflow"}')
                      if s["value"][1] == "1"], "Prometheus scraping the worker", timeout=WAIT)
    since = time.time() - 5
    providers = feed(settings, worker, FLOW_SECONDS)

    def settled() -> promdash.Evaluation | None:
        ev = evaluate(prometheus, since)
        fed = {s.labels.get("provider") for r in ev.for_panel("Native messages in")
               for s in r.series if s.finite()}
        ready = providers <= fed and all(r.has_data for t in CORE for r in ev.for_panel(t))
        return ev if ready else None

    try:
        ev = wait_for(settled, "data in every core panel", timeout=WAIT, worker=worker, every=2)
    except AssertionError:
        ev = evaluate(prometheus, since)
        empty = sorted({r.panel for t in CORE for r in ev.for_panel(t) if not r.has_data})
        raise AssertionError(f"core panels without data: {empty}") from None

    # (a) every target and the template variable: valid PromQL, run by Prometheus
    dashboard = ev.dashboard
    targets = sum(len(p.get("targets", [])) for p in promdash.panels(dashboard))
    variables = sum(v.get("type") == "query" for v in dashboard["templating"]["list"])
    assert len(ev.results) == targets + variables
    failed = [(r.panel, r.ref_id, r.promql, r.error) for r in ev.results
              if r.status != "success"]
    assert not failed, failed
    assert providers <= set(ev.variables["provider"])

    # (b) the core panels, with what must be in them
    def names(title: str) -> set[str]:
        return {s.name for r in ev.for_panel(title) for s in r.series if s.finite()}

    assert providers <= names("Canonical events out")
    assert {CANONICAL_TOPIC, CHAT_TOPIC} <= names("Records delivered, by topic")
    assert {"p50", "p95", "p99"} <= names("End-to-end lag (event time to delivery)")
    assert providers <= names("Active sessions")
    assert {"started", "completed"} <= names("Turns")
    assert {"Bash", "Edit"} <= names("Tool calls (top 10)")
    assert {"requested", "resolved"} <= names("Approvals")
    assert "idle" in names("Sessions by state")  # every fed conversation ends its turn

    # (c) the shipped alert rules: loaded, and evaluated on the worker's metrics
    rules = {r["name"]: r for r in prometheus.rules() if r["group"] == "canonflow"}
    stalled = rules["CanonflowSessionsStalled"]
    assert stalled["state"] == "inactive"  # no session waited past its threshold
    shipped = {r["alert"] for g in load_yaml(ALERTS)["groups"] for r in g["rules"]}
    assert set(rules) == shipped
    for rule in rules.values():
        assert rule["health"] == "ok" and not rule.get("lastError"), rule
        assert rule["state"] != "firing", rule  # a healthy worker, a little bad input
    [broker_up] = [s for r in ev.for_panel("Broker reachable") for s in r.series]
    assert broker_up.points[-1][1] == 1
    [rss] = [s for r in ev.for_panel("Worker memory (resident)") for s in r.series]
    assert 10 * 2**20 < rss.points[-1][1] < 2 * 2**30  # a worker's resident bytes

    # a query Prometheus cannot parse is reported as such (the check above can fail)
    broken = {"panels": [{"id": 1, "type": "stat", "title": "broken", "gridPos": {},
                          "targets": [{"refId": "A", "expr": "sum(rate(x[$__rate_interval])"}]}]}
    [answer] = promdash.evaluate(broken, prometheus.url, scrape_interval=SCRAPE_SECONDS).results
    assert answer.status == "error" and "parse error" in answer.error, answer

    html = promdash.render_html(
        ev, note=f"drawn by tests/deploy/promdash.py from Prometheus {ev.url} · not Grafana")
    out = artifacts_dir()
    (out / "dashboard.html").write_text(html, encoding="utf-8")
    shot = out / "dashboard.png"
    laid_out = screenshot(html, promdash.page_height(dashboard), shot)
    assert laid_out["width"] <= 1600, laid_out  # nothing wider than the window
    drawn = laid_out["panels"]
    graphs = {str(p["id"]): p for p in promdash.panels(dashboard) if p["type"] != "row"}
    assert set(drawn) == set(graphs)
    assert not [graphs[i]["title"] for i, d in drawn.items() if d["error"]]
    for i, panel in graphs.items():
        if panel["title"] in CORE:
            seen = {"timeseries": "lines", "bargauge": "bars", "stat": "stats"}[panel["type"]]
            assert drawn[i][seen], (panel["title"], drawn[i])
    assert shot.stat().st_size > 0
