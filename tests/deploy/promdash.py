"""promdash: a Grafana dashboard's queries evaluated by a real Prometheus, drawn as a
static HTML page. A test tool, not product code: Grafana cannot run on the development
machines, Prometheus can.

`evaluate()` sends every panel target of a dashboard JSON (and every template variable
query) to Prometheus's HTTP API the way Grafana's Prometheus data source would:
timeseries panels through /api/v1/query_range over a time window, stat and bargauge
panels through /api/v1/query, `label_values(metric, label)` variables through
/api/v1/label/<label>/values. Template variables are replaced by their "All" value
(`.*`) and `$__rate_interval` by Grafana's rule, max(4 x scrape interval, step +
scrape interval). Each answer is kept (status, error, series) so that tests can assert
on it.

`render_html()` draws the answers as one self-contained page in the look of Grafana's
dark theme: the 24-column grid of the panels' gridPos, rows as headers, timeseries as
inline SVG line charts (axes, legend, stacking), stats as big numbers, bar gauges as
horizontal bars. No JavaScript, no external CSS or fonts: it opens without a network.

    python -m tests.deploy.promdash http://127.0.0.1:9090 -o dashboard.html
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Evaluation", "QueryResult", "Series", "evaluate", "page_height", "panels",
           "rate_interval", "render_html", "substitute"]

#: Grafana's layout: a grid unit is 30 px high, with 8 px between units.
CELL_HEIGHT, MARGIN = 30, 8
PAD, TOPBAR = 16, 88
#: Grafana's classic palette, in the order it gives series their colours.
PALETTE = ("#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9",
           "#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17", "#890F02", "#0A437C",
           "#6D1F62", "#584477")
GREEN, RED = "#73BF69", "#F2495C"
_NICE_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600)


# ---- evaluating ------------------------------------------------------------------

@dataclass
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix seconds, value); NaN where Prometheus says so
    name: str = ""  # the legend, from the target's legendFormat

    def finite(self) -> list[tuple[float, float]]:
        return [(t, v) for t, v in self.points if math.isfinite(v)]


@dataclass
class QueryResult:
    """One target (or template variable) and what Prometheus answered."""

    panel_id: int | None
    panel: str  # the panel's title, or "variable <name>"
    ref_id: str
    kind: str  # "range", "instant" or "labels"
    expr: str  # as written in the dashboard
    promql: str  # as sent
    status: str = "error"  # Prometheus's status: "success" or "error"
    error: str = ""
    series: list[Series] = field(default_factory=list)

    @property
    def n_series(self) -> int:
        return len(self.series)

    @property
    def has_data(self) -> bool:
        """At least one series with a finite value."""
        return any(s.finite() for s in self.series)


@dataclass
class Evaluation:
    dashboard: dict[str, Any]
    url: str
    start: float
    end: float
    step: float
    rate_interval: float
    results: list[QueryResult]
    variables: dict[str, list[str]]

    def for_panel(self, title: str) -> list[QueryResult]:
        found = [r for r in self.results if r.panel == title]
        if not found:
            raise KeyError(f"no panel titled {title!r}")
        return found


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included, in the dashboard's order."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def rate_interval(step: float, scrape_interval: float) -> float:
    """Grafana's $__rate_interval: max(4 x scrape interval, step + scrape interval)."""
    return max(4 * scrape_interval, step + scrape_interval)


def _duration(seconds: float) -> str:
    return f"{int(math.ceil(seconds))}s"


def substitute(expr: str, variables: dict[str, str], *, step: float, rate: float,
               window: float) -> str:
    """`expr` with Grafana's variables replaced: the dashboard's own ($name, ${name},
    [[name]]) by `variables`, and the built-ins $__rate_interval, $__interval and
    $__range (longest names first, so $__rate_interval is not read as $__r...)."""
    builtins = {"__rate_interval": _duration(rate), "__interval": _duration(step),
                "__range": _duration(window)}
    values = {**variables, **builtins}
    for name in sorted(values, key=len, reverse=True):
        value = values[name]
        expr = expr.replace("${" + name + "}", value).replace("[[" + name + "]]", value)
        expr = re.sub(r"\$" + re.escape(name) + r"(?![A-Za-z0-9_])", lambda _, v=value: v, expr)
    return expr


def _get(url: str, timeout: float) -> dict[str, Any]:
    """Prometheus's JSON answer; a transport failure becomes an error answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:  # 400/422/503 carry Prometheus's JSON error
        body = e.read()
        try:
            return json.loads(body)
        except ValueError:
            return {"status": "error", "error": f"HTTP {e.code}: {body[:200]!r}"}
    except (OSError, ValueError) as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}"}


def _series(data: dict[str, Any]) -> list[Series]:
    kind, result = data.get("resultType"), data.get("result")
    if kind == "matrix":
        return [Series(r["metric"], [(float(t), float(v)) for t, v in r["values"]])
                for r in result]
    if kind == "vector":
        return [Series(r["metric"], [(float(r["value"][0]), float(r["value"][1]))])
                for r in result]
    if kind == "scalar":
        return [Series({}, [(float(result[0]), float(result[1]))])]
    return []


def legend(fmt: str | None, labels: dict[str, str], promql: str) -> str:
    """A series' name the way Grafana writes it from legendFormat."""
    if fmt:
        return re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}",
                      lambda m: labels.get(m.group(1), ""), fmt).strip()
    shown = {k: v for k, v in labels.items() if k != "__name__"}
    if not shown:
        return labels.get("__name__", promql)
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(shown.items()))
    return f"{labels.get('__name__', '')}{{{inner}}}"


def _nice_step(seconds: float) -> float:
    return float(next((s for s in _NICE_STEPS if s >= seconds), math.ceil(seconds)))


def evaluate(dashboard: dict[str, Any], url: str, *, window: float = 300.0,
             end: float | None = None, scrape_interval: float = 15.0,
             max_points: int = 300, timeout: float = 30.0) -> Evaluation:
    """Every target and template variable of `dashboard` through the Prometheus at `url`,
    over the `window` seconds before `end` (default: now). Never raises for a query
    Prometheus refuses: its status and error are in the result."""
    url = url.rstrip("/")
    end = time.time() if end is None else end
    start = end - window
    step = _nice_step(max(scrape_interval, window / max_points))
    rate = rate_interval(step, scrape_interval)
    all_values = {}
    for var in dashboard.get("templating", {}).get("list", []):
        all_values[var["name"]] = var.get("allValue") or ".*"

    results: list[QueryResult] = []
    variables: dict[str, list[str]] = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        r = _variable(var["name"], query, url, start, end, timeout)
        variables[var["name"]] = [s.labels["value"] for s in r.series]
        results.append(r)

    for panel in panels(dashboard):
        if panel.get("type") == "row":
            continue
        kind = "range" if panel.get("type") == "timeseries" else "instant"
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            promql = substitute(expr, all_values, step=step, rate=rate, window=window)
            r = QueryResult(panel.get("id"), panel.get("title", ""), target.get("refId", ""),
                            kind, expr, promql)
            if kind == "range":
                params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                          "step": f"{step:g}"}
                answer = _get(f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}",
                              timeout)
            else:
                params = {"query": promql, "time": f"{end:.3f}"}
                answer = _get(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout)
            r.status, r.error = answer.get("status", "error"), answer.get("error", "")
            if r.status == "success":
                r.series = _series(answer.get("data", {}))
                for s in r.series:
                    s.name = legend(target.get("legendFormat"), s.labels, promql)
            results.append(r)
    return Evaluation(dashboard, url, start, end, step, rate, results, variables)


def _variable(name: str, query: str, url: str, start: float, end: float,
              timeout: float) -> QueryResult:
    """label_values(metric, label) as Grafana asks it: the label's values among the
    series the selector matches (parsed by Prometheus). Other queries: instant."""
    r = QueryResult(None, f"variable {name}", name, "labels", query, query)
    m = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*",
                     query)
    if m:
        selector, label = m.groups()
        params: list[tuple[str, str]] = [("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
        if selector:
            params.append(("match[]", selector))
            r.promql = selector
        answer = _get(f"{url}/api/v1/label/{label}/values?{urllib.parse.urlencode(params)}",
                      timeout)
        r.status, r.error = answer.get("status", "error"), answer.get("error", "")
        if r.status == "success":
            r.series = [Series({"value": v}, [(end, 1.0)], v) for v in answer["data"]]
        return r
    r.kind = "instant"
    answer = _get(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout)
    r.status, r.error = answer.get("status", "error"), answer.get("error", "")
    if r.status == "success":
        r.series = _series(answer.get("data", {}))
        for s in r.series:
            s.labels = {"value": legend(None, s.labels, query), **s.labels}
    return r


# ---- formatting values as Grafana's units do --------------------------------------

def _num(v: float, digits: int = 3) -> str:
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else ("NaN" if math.isnan(v) else ("∞" if v > 0 else "-∞"))
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _short(v: float) -> str:
    for size, suffix in ((1e12, " Tri"), (1e9, " Bil"), (1e6, " Mil"), (1e3, " K")):
        if abs(v) >= size:
            return _num(v / size) + suffix
    return _num(v)


def _seconds(v: float) -> str:
    a = abs(v)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return _num(v * 1e6) + " µs"
    if a < 1:
        return _num(v * 1e3) + " ms"
    if a < 60:
        return _num(v) + " s"
    if a < 3600:
        return _num(v / 60) + " min"
    if a < 86400:
        return _num(v / 3600) + " hour"
    return _num(v / 86400) + " day"


def fmt(v: float, unit: str | None) -> str:
    """`v` in a Grafana unit (those the dashboard uses; others as plain numbers)."""
    if not math.isfinite(v):
        return _num(v)
    if unit == "bool_yes_no":
        return "Yes" if v else "No"
    if unit == "s":
        return _seconds(v)
    if unit == "ops":
        return _short(v) + " ops/s"
    if unit == "currencyUSD":
        return ("-$" if v < 0 else "$") + _short(abs(v))
    if unit == "percentunit":
        return _num(v * 100) + "%"
    return _short(v)


def _threshold_color(panel: dict[str, Any], v: float) -> str:
    """The colour of the last threshold `v` reaches (Grafana's default: green, red at 80)."""
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    steps = defaults.get("thresholds", {}).get("steps") or [
        {"color": "green", "value": None}, {"color": "red", "value": 80}]
    named = {"green": GREEN, "red": RED, "yellow": "#FADE2A", "orange": "#FF9830",
             "blue": "#5794F2", "purple": "#B877D9", "text": "#CCCCDC"}
    color = steps[0]["color"]
    for s in steps[1:]:
        if s.get("value") is not None and math.isfinite(v) and v >= s["value"]:
            color = s["color"]
    return named.get(color, color)


# ---- drawing ------------------------------------------------------------------------

def _text_width(text: str, size: float = 12) -> float:
    return len(text) * size * 0.56  # a sans-serif average; only for the legend layout


def _grid(width: int) -> float:
    """The width of one of the 24 columns."""
    return (width - 2 * PAD - 23 * MARGIN) / 24


def page_height(dashboard: dict[str, Any]) -> int:
    """The height of the rendered page in px (for the browser window)."""
    bottom = max((p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard.get("panels", [])),
                 default=0)
    return TOPBAR + PAD + bottom * (CELL_HEIGHT + MARGIN) + PAD + 24


def _box(panel: dict[str, Any], width: int) -> tuple[float, float, float, float]:
    g, col = panel["gridPos"], _grid(width)
    x = PAD + g["x"] * (col + MARGIN)
    y = TOPBAR + PAD + g["y"] * (CELL_HEIGHT + MARGIN)
    w = g["w"] * col + (g["w"] - 1) * MARGIN
    h = g["h"] * CELL_HEIGHT + (g["h"] - 1) * MARGIN
    return x, y, w, h


def _nice(span: float, count: int) -> float:
    raw = span / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _stacked(series: list[Series], mode: str) -> list[list[tuple[float, float, float]]]:
    """Per series, (t, bottom, top): stacked on the series before it in `normal` mode."""
    base: dict[float, float] = {}
    out = []
    for s in series:
        pts = []
        for t, v in s.finite():
            bottom = base.get(t, 0.0) if mode == "normal" else 0.0
            pts.append((t, bottom, bottom + v))
            if mode == "normal":
                base[t] = bottom + v
        out.append(pts)
    return out


def _segments(pts: list[tuple[float, float, float]], gap: float
              ) -> Iterator[list[tuple[float, float, float]]]:
    """Runs of points without a gap longer than `gap` (Grafana leaves holes there)."""
    run: list[tuple[float, float, float]] = []
    for p in pts:
        if run and p[0] - run[-1][0] > gap:
            yield run
            run = []
        run.append(p)
    if run:
        yield run


def _timeseries(panel: dict[str, Any], results: list[QueryResult], ev: Evaluation,
                w: float, h: float) -> str:
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    unit = defaults.get("unit")
    custom = defaults.get("custom", {})
    mode = custom.get("stacking", {}).get("mode", "none")
    fill = custom.get("fillOpacity", 10) / 100
    width = custom.get("lineWidth", 1)
    series = [s for r in results for s in r.series if s.finite()]
    colors = {id(s): PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}

    # the legend below the chart, wrapped like Grafana's list legend, at most 3 lines
    lines, used = 1, 0.0
    for s in series:
        item = 28 + _text_width(s.name)
        if used and used + item > w - 16:
            lines, used = lines + 1, 0.0
        used += item
    legend_h = 0 if not series else min(lines, 3) * 18 + 6
    chart_h = h - legend_h
    if not series:
        return _no_data(results, w, h)

    stacks = _stacked(series, mode)
    tops = [p[2] for pts in stacks for p in pts] + [p[1] for pts in stacks for p in pts]
    lo, hi = min(min(tops), 0.0), max(tops)
    if hi <= lo:
        hi = lo + 1
    tick = _nice(hi - lo, max(2, int(chart_h / 45)))
    hi = math.ceil(hi / tick - 1e-9) * tick
    lo = math.floor(lo / tick + 1e-9) * tick
    labels = [fmt(lo + i * tick, unit) for i in range(round((hi - lo) / tick) + 1)]
    left = 10 + max(_text_width(t, 11) for t in labels)
    right, top, bottom = 12, 6, 22
    pw, ph = w - left - right, chart_h - top - bottom

    def x(t: float) -> float:
        return left + (t - ev.start) / (ev.end - ev.start) * pw

    def y(v: float) -> float:
        return top + ph - (v - lo) / (hi - lo) * ph

    out = [f'<svg class="chart" width="{w:.0f}" height="{chart_h:.0f}" '
           f'viewBox="0 0 {w:.0f} {chart_h:.0f}" xmlns="http://www.w3.org/2000/svg">']
    for i, text in enumerate(labels):
        yy = y(lo + i * tick)
        out.append(f'<line x1="{left:.1f}" x2="{left + pw:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   'class="grid"/>')
        out.append(f'<text x="{left - 6:.1f}" y="{yy + 4:.1f}" text-anchor="end" '
                   f'class="tick">{html.escape(text)}</text>')
    span = ev.end - ev.start
    t_step = next((s for s in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600,
                               7200, 21600, 43200, 86400) if pw / (span / s) >= 90), 86400)
    t = math.ceil(ev.start / t_step) * t_step
    clock = "%H:%M:%S" if t_step < 60 else "%H:%M"
    while t <= ev.end:
        xx = x(t)
        out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{top}" y2="{top + ph:.1f}" '
                   'class="grid"/>')
        stamp = datetime.fromtimestamp(t, UTC).strftime(clock)
        out.append(f'<text x="{xx:.1f}" y="{top + ph + 16:.1f}" text-anchor="middle" '
                   f'class="tick">{stamp}</text>')
        t += t_step
    gap = 1.5 * ev.step + 1e-6
    for s, pts in zip(series, stacks, strict=True):
        c = colors[id(s)]
        for run in _segments(pts, gap):
            line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, _, v in run)
            floor = " ".join(f"{x(t):.1f},{y(b):.1f}" for t, b, _ in reversed(run))
            if fill > 0:
                out.append(f'<polygon points="{line} {floor}" fill="{c}" '
                           f'fill-opacity="{fill:.2f}" stroke="none"/>')
            if len(run) == 1:
                out.append(f'<circle cx="{x(run[0][0]):.1f}" cy="{y(run[0][2]):.1f}" r="2" '
                           f'fill="{c}"/>')
            else:
                out.append(f'<polyline points="{line}" fill="none" stroke="{c}" '
                           f'stroke-width="{width}" stroke-linejoin="round"/>')
    out.append("</svg>")
    items = "".join(f'<span class="item"><i style="background:{colors[id(s)]}"></i>'
                    f"{html.escape(s.name)}</span>" for s in series)
    out.append(f'<div class="legend" style="height:{legend_h}px">{items}</div>')
    return "".join(out)


def _instant_values(results: list[QueryResult]) -> list[tuple[str, float]]:
    out = []
    for r in results:
        for s in r.series:
            pts = s.finite() or s.points
            if pts:
                out.append((s.name, pts[-1][1]))
    return out


def _stat(panel: dict[str, Any], results: list[QueryResult], w: float, h: float) -> str:
    values = _instant_values(results)
    if not values:
        return _no_data(results, w, h)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    cell = w / len(values)
    cells = []
    for name, v in values:
        text = fmt(v, unit)
        size = max(14.0, min(h * 0.5, cell / max(len(text), 1) * 1.5, 56.0))
        label = (f'<div class="stat-name">{html.escape(name)}</div>'
                 if name and len(values) > 1 else "")
        cells.append(f'<div class="stat" style="width:{cell:.0f}px">{label}'
                     f'<div class="stat-value" style="font-size:{size:.0f}px;'
                     f'color:{_threshold_color(panel, v)}">{html.escape(text)}</div></div>')
    return f'<div class="stats" style="height:{h:.0f}px">{"".join(cells)}</div>'


def _bargauge(panel: dict[str, Any], results: list[QueryResult], w: float, h: float) -> str:
    values = _instant_values(results)
    if not values:
        return _no_data(results, w, h)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    top = max((v for _, v in values if math.isfinite(v)), default=1.0) or 1.0
    row_h = min(36.0, (h - 4) / len(values))
    rows = []
    for name, v in values:
        share = max(0.0, min(1.0, v / top)) if math.isfinite(v) else 0.0
        c = _threshold_color(panel, v)
        rows.append(
            f'<div class="bar" style="height:{row_h - 4:.0f}px">'
            f'<span class="bar-name">{html.escape(name)}</span>'
            f'<span class="bar-track"><span class="bar-fill" style="width:{share * 100:.1f}%;'
            f'background:linear-gradient(90deg,{c}33,{c})"></span></span>'
            f'<span class="bar-value" style="color:{c}">{html.escape(fmt(v, unit))}</span>'
            "</div>")
    return f'<div class="bars">{"".join(rows)}</div>'


def _no_data(results: list[QueryResult], w: float, h: float) -> str:
    errors = [r.error for r in results if r.status != "success"]
    if errors:
        return (f'<div class="nodata error" style="height:{h:.0f}px">query error: '
                f"{html.escape(errors[0])}</div>")
    return f'<div class="nodata" style="height:{h:.0f}px">No data</div>'


_CSS = """
* { box-sizing: border-box; }
body { margin: 0; background: #111217; color: #ccccdc;
  font: 13px/1.4 Inter, "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; }
.topbar { position: absolute; left: 0; top: 0; right: 0; height: 88px;
  border-bottom: 1px solid #2a2d33; background: #181b1f; padding: 10px 16px; }
.crumbs { font-size: 16px; color: #ccccdc; }
.crumbs b { font-weight: 500; }
.crumbs .muted { color: #8e8e9e; }
.controls { margin-top: 12px; display: flex; gap: 8px; align-items: center; }
.var { display: inline-flex; border: 1px solid #2f3238; border-radius: 2px; height: 30px; }
.var span { padding: 5px 10px; }
.var .k { background: #22252b; border-right: 1px solid #2f3238; }
.spacer { flex: 1; }
.note { color: #8e8e9e; font-size: 12px; }
.panel { position: absolute; background: #181b1f; border: 1px solid #2a2d33;
  border-radius: 2px; overflow: hidden; }
.panel h3 { margin: 0; height: 32px; padding: 7px 8px; font-size: 14px; font-weight: 500;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.row { position: absolute; font-size: 17px; font-weight: 500; color: #ccccdc;
  padding-top: 4px; }
.row:before { content: "\\25BE"; margin-right: 8px; color: #8e8e9e; }
svg.chart { display: block; }
svg .grid { stroke: #ccccdc; stroke-opacity: 0.09; stroke-width: 1; }
svg .tick { fill: #8e8e9e; font-size: 11px; }
.legend { padding: 2px 8px 0; overflow: hidden; font-size: 12px; }
.legend .item { display: inline-block; margin-right: 12px; white-space: nowrap;
  line-height: 18px; }
.legend i { display: inline-block; width: 14px; height: 4px; border-radius: 2px;
  margin-right: 6px; vertical-align: middle; }
.stats { display: flex; align-items: center; }
.stat { text-align: center; padding: 0 4px; }
.stat-name { color: #ccccdc; font-size: 12px; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.stat-value { font-weight: 500; line-height: 1.1; white-space: nowrap; }
.bars { padding: 2px 8px; }
.bar { display: flex; align-items: center; gap: 8px; margin-bottom: 4px; }
.bar-name { width: 34%; text-align: right; font-size: 12px; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
.bar-track { flex: 1; height: 100%; background: rgba(204,204,220,0.06); }
.bar-fill { display: block; height: 100%; }
.bar-value { width: 56px; font-size: 14px; font-weight: 500; }
.nodata { display: flex; align-items: center; justify-content: center; color: #8e8e9e;
  padding: 0 12px 32px; font-size: 14px; }
.nodata.error { color: #F2495C; font-size: 12px; }
"""


def _window_text(seconds: float) -> str:
    if seconds < 120:
        return f"Last {seconds:.0f} seconds"
    if seconds < 7200:
        return f"Last {seconds / 60:.0f} minutes"
    return f"Last {seconds / 3600:.0f} hours"


def render_html(ev: Evaluation, *, width: int = 1600, note: str = "") -> str:
    """The page: one absolutely placed box per panel, `width` px wide."""
    dash = ev.dashboard
    by_panel: dict[int | None, list[QueryResult]] = {}
    for r in ev.results:
        by_panel.setdefault(r.panel_id, []).append(r)
    body = []
    for panel in panels(dash):
        x, y, w, h = _box(panel, width)
        title = html.escape(panel.get("title", ""))
        if panel.get("type") == "row":
            body.append(f'<div class="row" style="left:{x:.0f}px;top:{y:.0f}px;'
                        f'width:{w:.0f}px;height:{h:.0f}px">{title}</div>')
            continue
        results = by_panel.get(panel.get("id"), [])
        inner_w, inner_h = w - 2, h - 2 - 32
        kind = panel.get("type")
        if kind == "timeseries":
            content = _timeseries(panel, results, ev, inner_w, inner_h)
        elif kind == "stat":
            content = _stat(panel, results, inner_w, inner_h)
        elif kind == "bargauge":
            content = _bargauge(panel, results, inner_w, inner_h)
        else:
            content = _no_data(results, inner_w, inner_h)
        tip = html.escape(panel.get("description", ""), quote=True)
        body.append(f'<div class="panel" data-panel-id="{panel.get("id")}" title="{tip}" '
                    f'style="left:{x:.0f}px;top:{y:.0f}px;width:{w:.0f}px;height:{h:.0f}px">'
                    f"<h3>{title}</h3>{content}</div>")
    # a query variable is drawn at All, the data source variable at the default one
    variables = "".join(
        f'<span class="var"><span class="k">{html.escape(var.get("label") or var["name"])}'
        f'</span><span>{"Prometheus" if var.get("type") == "datasource" else "All"}</span></span>'
        for var in dash.get("templating", {}).get("list", []))
    when = datetime.fromtimestamp(ev.end, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    note_html = html.escape(note) if note else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(dash.get('title', 'dashboard'))}</title>"
        f"<style>{_CSS}</style></head>"
        f'<body style="width:{width}px;height:{page_height(dash)}px;position:relative">'
        '<div class="topbar"><div class="crumbs"><span class="muted">Dashboards / </span>'
        f"<b>{html.escape(dash.get('title', ''))}</b></div>"
        f'<div class="controls">{variables}<span class="spacer"></span>'
        f'<span class="note">{note_html}</span>'
        f'<span class="var"><span>{_window_text(ev.end - ev.start)} · to {when}</span>'
        "</span></div></div>"
        f"{''.join(body)}</body></html>\n")


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(prog="python -m tests.deploy.promdash", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prometheus", help="base URL, e.g. http://127.0.0.1:9090")
    p.add_argument("--dashboard", default=str(here / "deploy" / "grafana" / "canonflow.json"))
    p.add_argument("--window", type=float, default=900.0, help="seconds (default 900)")
    p.add_argument("--scrape-interval", type=float, default=15.0)
    p.add_argument("-o", "--output", default="dashboard.html")
    args = p.parse_args(argv)
    dashboard = json.loads(Path(args.dashboard).read_text(encoding="utf-8"))
    ev = evaluate(dashboard, args.prometheus, window=args.window,
                  scrape_interval=args.scrape_interval)
    Path(args.output).write_text(render_html(ev), encoding="utf-8")
    failed = [r for r in ev.results if r.status != "success"]
    for r in failed:
        print(f"{r.panel} [{r.ref_id}]: {r.error}")
    print(f"{len(ev.results)} queries, {len(failed)} failed; wrote {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
