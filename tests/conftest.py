"""How `make test`'s parallel run (pytest-xdist, pyproject's `--dist loadscope`) goes.

Most of the suite's time is spent waiting (a worker joining its group, a scenario's
settle window), not computing, so several xdist processes share this machine's cores
well. Each module runs whole in one process (`loadscope`), so a module- or class-scoped
fixture (a scenario run once, a worker started once, checked by several tests) is
still built once. The modules then go out longest first (SLOW_FIRST, then every module
with a test on a broker), so that no minute-long module starts while the other
processes are running out of work, and the short ones fill the end.

Tests marked `serial` time themselves (a worker's exit, CPU per byte): `make test`
runs them after the parallel run, alone. A plain `pytest` run (no `-n`) keeps the
collection order: nothing here applies to it.

(`--dist loadgroup` would spread a module's tests more finely, but pytest 9.2 no longer
sees the group xdist 3.8 writes into a test's node id, pytest-xdist issue #1386.)
"""

from __future__ import annotations

import os

import pytest

# `canonflow import` closes a session whose file has been quiet for longer than the idle
# timeout (CANONFLOW_IDLE_TIMEOUT): a checkout's fixture files age, so without this the
# imports the tests compare would close their last turns on a checkout older than the
# default timeout and not on a fresh one. Tests of that close set their own timeout.
os.environ.setdefault("CANONFLOW_IDLE_TIMEOUT", str(10 * 365 * 24 * 3600))

#: The longest modules (one to four minutes each, interpreted, on two cores), longest
#: first. A name that no longer matches only moves its module back among the others.
SLOW_FIRST = (
    "test_compiled.py",  # a mypyc build: minutes of compiler time
    "test_kafka_cluster.py",  # three Kafka nodes, six faults under load (Kafka only)
    "test_crash_steps.py",  # a worker killed in each step of its commit, life after life
    "test_fleet.py",
    "test_broker_trouble.py",
    "test_bounded_state.py",
    "test_crash.py",
    "test_shutdown.py",
    "test_stuck_sends.py",
    "test_metrics.py",
    "test_rocksdb.py",
    "test_redact_json.py",
    "test_redact_fastpath.py",
    "test_contract.py",
    "test_dashboard_live.py",
    "test_codex_exec.py",
    "test_compaction.py",
    "test_sasl.py",
    "test_item_sizes.py",
)
#: Fixtures that start a broker or a worker: their tests take seconds each.
BROKER_FIXTURES = frozenset({"broker", "own_broker", "worker"})


def _rank(item: pytest.Item) -> int:
    module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    if module in SLOW_FIRST:
        return SLOW_FIRST.index(module)
    if item.get_closest_marker("broker") or BROKER_FIXTURES & set(item.fixturenames):
        return len(SLOW_FIRST)
    return len(SLOW_FIRST) + 1


@pytest.hookimpl(trylast=True)  # the final order: after deselection by -m and -k
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker
        return
    # a module's rank is its highest-ranked test's; the sort is stable, so the tests of
    # a module stay together and in their collection order
    ranks: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        ranks[module] = min(ranks.get(module, len(SLOW_FIRST) + 1), _rank(item))
    items.sort(key=lambda item: ranks[item.nodeid.split("::", 1)[0]])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """This process's Kafka (tests.pipeline.brokers) stops with its session."""
    from tests.pipeline.brokers import stop_shared_kafka

    stop_shared_kafka()
