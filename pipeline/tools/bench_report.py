"""The bench's reports: the result of `canonflow bench` (and of `--long`) as the table
it prints."""

from __future__ import annotations

from typing import Any


def format_report(r: dict[str, Any]) -> str:
    lines = [*_core(r), *_broker(r), *_after(r)]
    if "modes" in r:
        lines += ["", *format_cpu_report(r)]
    if "replay" in r:
        from pipeline.tools.bench_replay import format_replay_report

        lines += ["", *format_replay_report(r["replay"])]
    if "latency" in r:
        from pipeline.tools.bench_latency import format_latency_report

        lines += ["", *format_latency_report(r["latency"])]
    return "\n".join(lines)


def _core(r: dict[str, Any]) -> list[str]:
    """The heading and the adapter core (1)."""
    w = r["workload"]
    built = r.get("adapter_build", "interpreted")
    lines = [
        f"canonflow bench: {w['messages']:,} native messages, {w['sessions']} sessions, "
        f"{w['partitions']} partitions, medians of {w['repeat']} run(s)",
        "",
        f"adapter core (offline, one core, {built})" + "msg/s".rjust(17 - len(built)),
    ]
    for p, v in r["adapter_core_msgs_per_s"].items():
        lines.append(f"  {p:<36} {v:>12,.0f}")
    if "adapter_core_batched_msgs_per_s" in r:
        label = f"mix, {w['batch']} messages per record"
        lines.append(f"  {label:<36} {r['adapter_core_batched_msgs_per_s']:>12,.0f}")
    if "adapter_core_interpreted_msgs_per_s" in r:
        label = "mix, the same source interpreted"
        lines.append(f"  {label:<36} {r['adapter_core_interpreted_msgs_per_s']:>12,.0f}")
    return lines


def _broker(r: dict[str, Any]) -> list[str]:
    """The ceilings and canonflow through the broker (2-4), and their ratios."""
    w = r["workload"]
    batched = w.get("batched_messages", w["messages"])  # the batched runs' workload
    lines = [
        "",
        "through the broker                       msg/s",
        f"  (2) bare aiokafka passthrough        {r['aiokafka_passthrough_msgs_per_s']:>12,.0f}",
        f"  (3) plain Faust passthrough          {r['faust_passthrough_msgs_per_s']:>12,.0f}",
        f"  (4) canonflow, 1 message/record      {r['canonflow_single_msgs_per_s']:>12,.0f}",
        f"  (4) canonflow, {w['batch']} messages/record    "
        f"{r['canonflow_batched_msgs_per_s']:>12,.0f}",
        f"      (up to {w['batch']}: {w['messages_per_batched_record']:.1f} on average, a "
        f"record ends where the other side speaks;",
        f"       the workload {batched // w['messages']} times over, as sessions of their "
        f"own: {batched:,} messages)",
        f"  (4) same, two workers in one group   {r['canonflow_two_workers_msgs_per_s']:>12,.0f}",
        "",
        f"ratio (4 batched)/(2) = {r['ratios']['batched_vs_aiokafka']:.2f}   "
        f"ratio (4 single)/(3) = {r['ratios']['single_vs_faust']:.2f}   (of the medians)",
    ]
    if "ratios_per_run" in r:
        per_run = r["ratios_per_run"]
        lines.append("  within each run: (4 batched)/(2) "
                     + " ".join(f"{x:.2f}" for x in per_run["batched_vs_aiokafka"])
                     + ", (4 single)/(3) "
                     + " ".join(f"{x:.2f}" for x in per_run["single_vs_faust"]))
    return lines


def _after(r: dict[str, Any]) -> list[str]:
    """Memory, table recovery and the stall scan."""
    lines = [
        "",
        "memory",
    ]
    for k, v in r["memory"].items():
        lines.append(f"  {k:<44} {v:>12,.1f}")
    if "recovery" in r:
        rec = r["recovery"]
        lines += ["", f"table recovery ({rec['sessions']:,.0f} sessions in the changelog)",
                  f"  worker ready, empty table                    {rec['ready_empty_s']:>9.1f} s",
                  f"  worker ready, full table                     {rec['ready_full_s']:>9.1f} s",
                  f"  recovery time per 100k sessions              "
                  f"{rec['recovery_s_per_100k']:>9.1f} s"]
    if "stall_scan" in r:
        st = r["stall_scan"]
        lines += ["", f"stall scan ({st['sessions']:,.0f} sessions waiting on a tool)",
                  f"  one tick                                     {st['tick_ms']:>9.2f} ms",
                  f"  learning them (once, after a recovery)       {st['learn_ms']:>9.1f} ms",
                  f"  tick ratio, 10x the sessions                 "
                  f"{st['tick_ratio_sessions']:>9.2f}",
                  f"  tick ratio, each session 50x longer          "
                  f"{st['tick_ratio_length']:>9.2f}  "
                  f"(state {st['state_bytes']:,.0f} -> {st['state_bytes_long']:,.0f} bytes)"]
    return lines


def format_cpu_report(r: dict[str, Any]) -> list[str]:
    """The worker's CPU per native message beside the adapter core's, per guarantee."""
    w = r["cpu_workload"]
    lines = [f"CPU per native message, microseconds ({w['messages']:,} messages, "
             f"medians of {w['repeat']} run(s), CPU time, not a rate)",
             f"  {'guarantee':<16}{'broker':<14}{'worker':>10}{'core':>10}{'ratio':>8}"
             f"{'worker':>10}{'core':>10}{'ratio':>8}",
             f"  {'':<30}{'(up to ' + str(w['batch']) + ' per record)':^28}"
             f"{'(one per record)':^28}"]
    for mode, m in r["modes"].items():
        lines.append(f"  {mode:<16}{m['broker']:<14}"
                     f"{m['worker_cpu_us_per_msg_batched']:>10.1f}"
                     f"{m['core_cpu_us_per_msg']:>10.1f}{m['worker_vs_core_batched']:>7.2f}x"
                     f"{m['worker_cpu_us_per_msg_single']:>10.1f}"
                     f"{m['core_cpu_us_per_msg_single']:>10.1f}"
                     f"{m['worker_vs_core_single']:>7.2f}x")
    for mode, m in r["modes"].items():
        lines.append(f"  {mode}: idle, the worker uses {m['worker_idle_cores']:.3f} core; at "
                     f"most {m['idle_share_batched']:.0%} of the batched measure, "
                     f"{m['idle_share_single']:.0%} of the single")
    return lines


def _mark(value: float, target: float) -> str:
    return "ok" if value <= target else "OVER"


def format_long_report(r: dict[str, Any]) -> str:
    w, t = r["workload"], r["targets"]
    lines = [
        f"canonflow bench --long: one session per provider and size, one native message per "
        f"record, through a worker with batch_max=1 (every record its own batch), "
        f"{w['partitions']} partitions, items capped at {w.get('item_cap', 8 << 20):,} bytes "
        f"(CANONFLOW_ITEM_CAP), {w['seconds']:.0f} s in all",
        f"(answer text in {w['chunk']}-byte deltas; a native message carries a text or an "
        f"output whole up to {w['whole_max'] // 1024} KiB, its record up to 1 MiB)",
        "",
        f"  {'session':<14}{'records':>9}  {'native MiB':>10}  {'answer chars (items)':>20}  "
        f"{'output chars':>14}",
    ]
    for s in r["sessions"]:
        how = "in deltas" if s["output_streamed"] else "whole"
        label = f"{s['provider']} {s['size']}"
        lines.append(f"  {label:<14}{s['records']:>9,}  {s['native_bytes'] / 2**20:>10.2f}  "
                     f"{s['answer_chars']:>15,} ({s['answer_items']:>2})  "
                     f"{s['output_chars']:>14,} {how}")
    ratios = ("changelog_per_native", "canonical_per_native", "chat_per_native")
    lines += [
        "",
        f"  {'per native byte':<16}" + "".join(f"{h:<15}" for h in ("changelog", "canonical",
                                                                   "chat"))
        + "largest table value   peak RSS   seconds  verified",
        f"  {'target':<16}" + "".join(f"{'<= ' + format(t[k], '.1f') + 'x':<15}" for k in ratios)
        + f"<= {t['largest_table_value'] / 1024:.0f} KiB",
    ]
    for s in r["sessions"]:
        label = f"{s['provider']} {s['size']}"
        cells = "".join(f"{format(s[k], '.2f') + 'x ' + _mark(s[k], t[k]):<15}" for k in ratios)
        largest = s["largest_table_value"]
        lines.append(f"  {label:<16}{cells}"
                     f"{format(largest / 1024, '.1f') + ' KiB ' + _mark(largest, t['largest_table_value']):<20}"
                     f"{s['worker_peak_rss_mb']:>6.0f} MB {s['seconds']:>8.1f}  "
                     f"{'yes' if s['verified'] else 'NO'}")
    lines += ["", f"  {'changelog':<16}{'sessions.<p>':<15}{'items.<p>':<15}"
                  f"largest table value: table, key (session/stream/chunk)"]
    for s in r["sessions"]:
        native = s["native_bytes"]
        by = {k.split(".")[0]: v for k, v in s.get("changelog_bytes_by_table", {}).items()}
        lines.append(f"  {s['provider'] + ' ' + s['size']:<16}"
                     f"{format(by.get('sessions', 0) / native, '.2f') + 'x':<15}"
                     f"{format(by.get('items', 0) / native, '.2f') + 'x':<15}"
                     f"{s.get('largest_table_key', '')}")
    return "\n".join(lines) + "\n"
