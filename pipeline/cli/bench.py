"""`canonflow bench`: the benchmarks (pipeline.tools.bench and its sections)."""

from __future__ import annotations

import click

from pipeline.cli.common import (
    for_cluster,
    load_settings,
    on_broker,
    partitions_option,
    run_broker_option,
)


@click.command()
@run_broker_option
@partitions_option
@click.option("--messages", type=int, default=20000, show_default=True,
              help="Native messages in the workload (copies of the captured conversations).")
@click.option("--repeat", type=int, default=3, show_default=True, help="Runs per measurement.")
@click.option("--batch", type=click.IntRange(min=1), default=50, show_default=True,
              help="Native messages per record in the batched run.")
@click.option("--fixtures", type=click.Path(file_okay=False, exists=True), default=None,
              help="Captured conversations (default: the project's tests/fixtures/captured, or a captured set beside the project).")
@click.option("--timeout", type=float, default=300.0, show_default=True)
@click.option("--recovery-sessions", type=int, default=100_000, show_default=True,
              help="Sessions in the table for the recovery measurement (0 skips it).")
@click.option("--long", "long_", is_flag=True,
              help="Run only the long-session workload: one session per provider and size, "
                   "its answer and command output that long, through a worker with "
                   "batch_max=1 (changelog, canonical and chat bytes per native byte, largest "
                   "table value, peak RSS, seconds).")
@click.option("--long-sizes", default="64k,1m,8m", show_default=True,
              help="With --long: the sizes of the answer and the output (k = KiB, m = MiB).")
@click.option("--long-providers", default="codex,claude,opencode,acp", show_default=True,
              help="With --long: the providers.")
@click.option("--replay-messages", type=int, default=200_000, show_default=True,
              help="Messages in the offline replay section's Claude stream-json file "
                   "(0 skips it).")
@click.option("--replay", "replay_only", is_flag=True,
              help="Run only the offline replay section: canonflow replay beside a bare "
                   "msgspec decode of the same file, and redaction's share of it.")
@click.option("--latency", "latency_only", is_flag=True,
              help="Run only the latency section: native messages offered at fixed rates to "
                   "a worker, one per record; produce -> agents.canonical p50, p99, max; "
                   "then the same rates to a Faust passthrough that translates nothing, "
                   "the floor; and the cores each uses idle (about 110 s).")
@click.option("--latency-rates", default="100,1000,5000", show_default=True,
              help="The rates the latency section offers, native messages per second; "
                   "\"0\" skips it in the full run.")
@click.option("--cpu", "cpu_only", is_flag=True,
              help="Run only the CPU section: the worker's CPU microseconds per native "
                   "message (batched records, one message per record) beside the adapter "
                   "core's, per --guarantee.")
@click.option("--engine", type=click.Choice(["tansu", "kafka"]), default=None,
              help="The broker each run starts for itself: the embedded Tansu (default) or "
                   "Apache Kafka (its jars fetched once by Maven). Not with --broker.")
@click.option("--guarantee", "guarantees", default="at_least_once", show_default=True,
              help="The worker's delivery guarantees the CPU section measures "
                   "(CANONFLOW_GUARANTEE), comma-separated: at_least_once, exactly_once.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench(broker: str | None, partitions: int | None, messages: int, repeat: int, batch: int,
          fixtures: str | None, timeout: float, recovery_sessions: int, long_: bool,
          long_sizes: str, long_providers: str, replay_messages: int, replay_only: bool,
          latency_only: bool, latency_rates: str, cpu_only: bool, engine: str | None,
          guarantees: str, as_json: bool) -> None:
    """Throughput, CPU and memory: adapter core, aiokafka and Faust ceilings, canonflow
    end to end, the worker's CPU per message against the core's, the offline replay
    against a bare decode, and the latency at fixed rates.

    With --long, only the long-session workload (pipeline/tools/bench_long.py); with
    --replay, only the offline replay (bench_replay.py); with --latency, only the
    latency at fixed rates (bench_latency.py); with --cpu, only the CPU per message
    (bench_cpu.py)."""
    import json
    from pathlib import Path

    from pipeline.cluster.broker import BrokerError
    from pipeline.tools.bench_kafka import BenchError

    if engine and broker:
        raise click.UsageError("--engine starts a broker for each run; --broker names a "
                               "running one: give one of them")
    settings = load_settings(broker=broker, partitions=partitions)
    if engine:
        settings = settings.replace(broker_kind=engine)
    modes = _guarantees(guarantees)
    if settings.broker and not replay_only:  # one that does not answer: one line, at once
        on_broker(settings, for_cluster(settings))
    where = Path(fixtures) if fixtures else None
    try:
        if cpu_only:
            from pipeline.tools.bench_cpu import run_cpu_bench
            from pipeline.tools.bench_report import format_cpu_report
            from pipeline.tools.bench_workload import default_fixtures

            result = run_cpu_bench(settings, messages=messages, batch=batch, repeat=repeat,
                                   fixtures=where or default_fixtures(), timeout=timeout,
                                   guarantees=modes, say=_say)
            click.echo(json.dumps(result, indent=2) if as_json
                       else "\n".join(format_cpu_report(result)))
        elif replay_only:
            from pipeline.tools.bench_replay import format_replay_report, run_replay_bench

            result = run_replay_bench(replay_messages or 200_000, repeat, _say)
            click.echo(json.dumps(result, indent=2) if as_json
                       else "\n".join(format_replay_report(result)))
        elif latency_only:
            from pipeline.tools.bench_latency import format_latency_report, run_latency_bench

            result = run_latency_bench(settings, rates=_rates(latency_rates), fixtures=where,
                                       say=_say)
            click.echo(json.dumps(result, indent=2) if as_json
                       else "\n".join(format_latency_report(result)))
        elif long_:
            from pipeline.tools.bench_long import run_long_bench
            from pipeline.tools.bench_report import format_long_report

            sizes, providers = _long_workload(long_sizes, long_providers)
            result = run_long_bench(settings, sizes=sizes, providers=providers, fixtures=where,
                                    timeout=timeout, say=_say)
            click.echo(json.dumps(result, indent=2) if as_json else format_long_report(result))
        else:
            from pipeline.tools.bench import run_bench
            from pipeline.tools.bench_report import format_report

            rates = [] if latency_rates.strip() == "0" else _rates(latency_rates)
            result = run_bench(settings, messages=messages, repeat=repeat, batch=batch,
                               fixtures=where, timeout=timeout, say=_say,
                               recovery_sessions=recovery_sessions, replay_messages=replay_messages,
                               guarantees=modes)
            if rates:  # last: the latency at fixed rates (bench_latency)
                from pipeline.tools.bench_latency import run_latency_bench

                result["latency"] = run_latency_bench(settings, rates=rates, fixtures=where, say=_say)
            click.echo(json.dumps(result, indent=2) if as_json else format_report(result))
    except (BenchError, BrokerError) as e:  # a wrong answer, a broker that did not start
        raise click.ClickException(" ".join(str(e).split())) from None


def _say(line: str) -> None:
    """The bench's progress, on stderr (the result goes to stdout)."""
    click.echo(line, err=True)


def _rates(text: str) -> list[int]:
    """--latency-rates: positive integers, comma-separated.

    Raises click.BadParameter for anything else."""
    try:
        rates = [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        rates = []
    if not rates or min(rates) < 1:
        raise click.BadParameter("positive integers, comma-separated",
                                 param_hint="--latency-rates")
    return rates


def _guarantees(text: str) -> tuple[str, ...]:
    """--guarantee: guarantees this worker runs, comma-separated.

    Raises click.BadParameter for an unknown one, and for one the worker does not read
    yet (bench_cpu.measurable_guarantees)."""
    from pipeline.tools.bench_cpu import GUARANTEES, measurable_guarantees

    modes = tuple(dict.fromkeys(g.strip() for g in text.split(",") if g.strip()))
    unknown = [g for g in modes if g not in GUARANTEES]
    if unknown or not modes:
        raise click.BadParameter(f"{', '.join(unknown) or 'none given'}; use some of "
                                 f"{', '.join(GUARANTEES)}", param_hint="--guarantee")
    missing = [g for g in modes if g not in measurable_guarantees()]
    if missing:
        raise click.BadParameter(f"{', '.join(missing)}: this worker runs only "
                                 f"{', '.join(measurable_guarantees())}",
                                 param_hint="--guarantee")
    return modes


def _long_workload(sizes_text: str, providers_text: str) -> tuple[list[int], list[str]]:
    """--long-sizes and --long-providers, read and checked.

    Raises click.BadParameter for a size that does not parse or an unknown provider."""
    from pipeline.tools.bench_long import parse_sizes
    from pipeline.tools.bench_long_sessions import CAPTURES

    try:
        sizes = parse_sizes(sizes_text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--long-sizes") from None
    providers = [p.strip() for p in providers_text.split(",") if p.strip()]
    unknown = [p for p in providers if p not in CAPTURES]
    if unknown or not providers:
        raise click.BadParameter(f"{unknown or 'none given'}; use some of "
                                 f"{', '.join(CAPTURES)}", param_hint="--long-providers")
    return sizes, providers
