"""The operator's first hour (issue 20): every failure a command knows is one clear
line on stderr and a non-zero exit, never a traceback; Ctrl-C exits 130 promptly at
every stage; the worker says when it is ready; children die with their parent.

Each command runs as a real subprocess (`python -m pipeline.cli`), as an operator runs
it; brokers are the embedded Tansu, on free loopback ports.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.cluster.broker import EMBEDDED_CLUSTER_ID, EmbeddedBroker, die_with_parent, free_port
from pipeline.settings import Settings, to_env
from pipeline.worker.process import READY, Repeats, WorkerProcess, for_cluster

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "fixtures" / "captured" / "codex" / "codex-app-server__tool_shell.capture.jsonl"
#: Where nothing listens (free_port's port is closed again at once).
NOBODY = f"kafka://127.0.0.1:{free_port()}"


def canonflow(*args: str, timeout: float = 60.0, env_extra: dict[str, str] | None = None,
              **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env, **kw)  # type: ignore[call-overload]


def one_line(r: subprocess.CompletedProcess[str], status: int) -> str:
    """The one line of stderr of a command that failed with `status`."""
    lines = r.stderr.splitlines()
    assert r.returncode == status and len(lines) == 1, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.mark.parametrize("command", [["topics", "check"], ["topics", "create"], ["tail"],
                                     ["produce", "-p", "codex", "-s", "s", "--format",
                                      "capture", str(CAPTURE)]])
def test_an_unreachable_broker_is_one_line_with_the_reason(command):
    """It was ~40 lines of traceback and 'Unclosed AIOKafkaProducer'."""
    line = one_line(canonflow(*command, "--broker", NOBODY), 3)
    assert line.startswith(f"canonflow: no broker answers at {NOBODY[8:]} (")
    assert "Connect call failed" in line


@pytest.mark.parametrize("command", [["topics", "check"], ["tail"], ["run"], ["ship", "x"],
                                     ["produce", "-p", "codex", "-s", "s", str(CAPTURE)]])
@pytest.mark.parametrize("address", ["kafka://:::", "kafka://host", "http://host:9092",
                                     "kafka://host:99999"])
def test_a_malformed_broker_address_is_a_usage_error(command, address):
    line = one_line(canonflow(*command, "--broker", address), 2)
    assert f"broker address {address!r}" in line and "-h" in line


@pytest.mark.parametrize(("args", "says"), [
    (["topics", "check", "--partitions", "0"], "partitions is 0"),
    (["topics", "create", "--partitions", "-2"], "partitions is -2"),
    (["run", "--web-port", "70000"], "web port 70000"),
])
def test_a_count_or_port_out_of_range_is_a_usage_error(args, says):
    """--partitions 0 was accepted; a web port out of range was a traceback."""
    assert says in one_line(canonflow(*args, "--broker", NOBODY), 2)


@pytest.mark.parametrize("command", [["run", "--broker", NOBODY], ["demo"],
                                     ["replay", "-p", "codex", "--format", "capture",
                                      str(CAPTURE)],
                                     ["import", str(CAPTURE)]])
@pytest.mark.parametrize(("variable", "value", "says"), [
    ("CANONFLOW_REDACT_PATTERNS", "(", "invalid redaction pattern '('"),
    ("CANONFLOW_REDACT", "maybe", "CANONFLOW_REDACT='maybe': use on or off"),
    ("CANONFLOW_REDACT_HOOK", "nowhere:fn", "cannot load redaction hook 'nowhere:fn'"),
    ("CANONFLOW_ITEM_CAP", "1.5", "CANONFLOW_ITEM_CAP='1.5' is not an integer"),
])
def test_a_bad_translation_setting_is_a_usage_error_before_any_work(command, variable, value,
                                                                   says):
    """A bad redaction setting was a traceback; `run` and `demo` gave it only after their
    broker had started and the topics were made (`run` first waited for a broker)."""
    r = canonflow(*command, env_extra={variable: value}, timeout=30)
    assert r.stdout == ""
    assert says in one_line(r, 2)


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("CANONFLOW_PARTITIONS", "four", "CANONFLOW_PARTITIONS='four' is not an integer"),
    ("CANONFLOW_IDLE_TIMEOUT", "soon", "CANONFLOW_IDLE_TIMEOUT='soon' is not a number"),
])
def test_a_setting_of_the_wrong_type_names_its_variable(variable, value, says):
    """It said "Expected `int`, got `str` - at `$.partitions`"."""
    assert says in one_line(canonflow("run", "--broker", NOBODY, env_extra={variable: value}), 2)


@pytest.mark.parametrize("command", [["run", "--broker", NOBODY],
                                     ["produce", "-p", "codex", "-s", "s", "--broker", NOBODY,
                                      str(CAPTURE)]])
@pytest.mark.parametrize(("variable", "value", "says"), [
    ("CANONFLOW_LOG_LEVEL", "loud",
     "CANONFLOW_LOG_LEVEL='loud': use one of debug, info, warning, error, critical"),
    ("CANONFLOW_STORE", "redis://", "CANONFLOW_STORE='redis://': use memory:// or rocksdb://"),
    ("CANONFLOW_SECURITY_PROTOCOL", "TLS", "CANONFLOW_SECURITY_PROTOCOL='TLS': use one of "
                                           "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("CANONFLOW_STALL_MODEL", "-5", "stall_model is -5.0: it must be at least 0 "
                                    "(CANONFLOW_STALL_MODEL)"),
    ("CANONFLOW_INCLUDE_RAW", "maybe", "CANONFLOW_INCLUDE_RAW='maybe' is not a boolean"),
])
def test_a_setting_out_of_its_values_is_a_usage_error_before_any_work(command, variable,
                                                                     value, says):
    """A log level, a store or a security protocol nobody knows was a traceback once the
    broker had answered (`run`: after its wait for one); a negative stall threshold was
    taken as given."""
    r = canonflow(*command, env_extra={variable: value}, timeout=30)
    assert says in one_line(r, 2)


@pytest.mark.parametrize("command", [["replay", "-p", "codex", "--format", "capture",
                                      str(CAPTURE)],
                                     ["import", str(next((ROOT / "pipeline" / "tools" / "samples")
                                                         .glob("claude-transcript__*.jsonl")))]])
def test_the_offline_translations_read_include_raw_as_the_worker_does(command):
    """CANONFLOW_INCLUDE_RAW=yes copied native messages into the worker's events, and
    replay and import ignored it without a word."""
    plain = canonflow(*command)
    raw = canonflow(*command, env_extra={"CANONFLOW_INCLUDE_RAW": "yes"})
    assert raw.returncode == plain.returncode
    assert '"raw":' not in plain.stdout and raw.stdout.count('"raw":') > 5, raw.stderr
    assert canonflow(*command, "--include-raw").stdout == raw.stdout
    bad = canonflow(*command, env_extra={"CANONFLOW_INCLUDE_RAW": "maybe"})
    assert bad.stdout == ""
    assert "CANONFLOW_INCLUDE_RAW='maybe' is not a boolean" in one_line(bad, 2)


def test_a_second_worker_on_a_data_directory_in_use_exits_at_once_naming_the_first(
        settings, worker):
    """It hung, with Faust's warnings. The first worker holds a lock in its data
    directory from its start (before it waits for a broker) to its end."""
    lock = Path(settings.data_dir) / "worker.lock"
    for _ in range(600):  # the first worker's start: its lock file says its PID
        if lock.exists() and lock.read_text().strip() == str(worker.pid):
            break
        time.sleep(0.1)
    second = canonflow("run", env_extra=to_env(settings), timeout=60)
    assert one_line(second, 1) == (
        f"canonflow: another worker (pid {worker.pid}) runs on the data directory "
        f"{os.path.abspath(settings.data_dir)}: give each worker its own (CANONFLOW_DATA_DIR)")
    assert worker.alive()
    worker.stop()  # its lock goes with it: a worker starts there again
    again = WorkerProcess(settings, log_path=str(Path(settings.data_dir) / "again.log")).start()
    try:
        for _ in range(600):
            if lock.read_text().strip() == str(again.pid) or not again.alive():
                break
            time.sleep(0.1)
        assert again.alive() and lock.read_text().strip() == str(again.pid)
    finally:
        again.stop()


def test_a_bad_otlp_endpoint_is_a_usage_error_at_once():
    """It was retried for 33 s."""
    start = time.monotonic()
    r = canonflow("otel-export", "--from-file", "-", "--endpoint", "not-a-url", input="")
    assert "--endpoint" in one_line(r, 2) and time.monotonic() - start < 20


@pytest.mark.parametrize("command", [["produce", "-p", "codex", "-s", "s", "--broker", NOBODY],
                                     ["bench"]])
@pytest.mark.parametrize("batch", ["0", "-3"])
def test_a_batch_below_one_is_a_usage_error(command, batch):
    args = [*command, "--batch", batch] + ([str(CAPTURE)] if command[0] == "produce" else [])
    assert "--batch" in one_line(canonflow(*args), 2)


def test_a_capture_file_read_as_native_says_so_instead_of_dead_lettering_it():
    """Every line was a dead letter, and the exit status 0."""
    replay = canonflow("replay", "-p", "codex", str(CAPTURE))
    assert replay.stdout == ""
    assert one_line(replay, 1).endswith("line 1 is a capture line "
                                        '({"origin", "msg"}): use --format capture')
    produce = canonflow("produce", "-p", "codex", "-s", "s", "--broker", NOBODY, str(CAPTURE))
    assert "use --format capture" in one_line(produce, 1)  # before any connection
    native = canonflow("replay", "-p", "codex", "--format", "capture", str(CAPTURE))
    assert native.returncode == 0 and native.stdout.count("\n") > 5


def test_produce_refuses_a_file_with_a_bad_last_line_before_sending_any(tmp_path):
    """produce reads a file as it sends it, but checks every line first: a capture whose
    last line is broken sends nothing (here: never connects)."""
    broken = tmp_path / "broken.capture.jsonl"
    broken.write_bytes(CAPTURE.read_bytes() + b'{"origin": "agent", "msg": \n')
    r = canonflow("produce", "-p", "codex", "-s", "s", "--format", "capture",
                  "--broker", NOBODY, str(broken))
    assert "not a capture file" in one_line(r, 1)


def test_version_and_the_broker_help_of_commands_that_start_no_broker():
    r = canonflow("--version")
    assert r.returncode == 0 and r.stdout.strip() == "canonflow 0.1.0"
    for command in (["produce"], ["tail"], ["topics", "check"], ["topics", "create"]):
        text = " ".join(canonflow(*command, "-h").stdout.split())
        assert "required" in text and "embedded" not in text, (command, text)
    assert "start an embedded broker" in " ".join(canonflow("run", "-h").stdout.split())


def test_the_worker_web_port_in_use_is_one_line():
    """It was a 50-line traceback (after the broker and the topics)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line(canonflow("run", "--broker", NOBODY, "--web-port", str(port)), 1)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line


def test_the_broker_on_a_taken_port_fails_with_the_reason():
    """It said it started, then 'the embedded broker exited' with no reason."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = canonflow("broker", "--port", str(port))
    assert r.stdout == ""
    assert one_line(r, 1) == f"canonflow: cannot listen on 127.0.0.1:{port}: the port is in use"


def test_repeated_log_lines_are_held_back_and_counted():
    now = [0.0]
    repeats = Repeats(every=60.0, clock=lambda: now[0])
    log = logging.getLogger("aiokafka.test")

    def record(port: int) -> logging.LogRecord:
        return log.makeRecord(log.name, logging.ERROR, __file__, 1,
                              "Unable connect to node with id 1: Connect call failed "
                              "('127.0.0.1', %d)", (port,), None)

    assert repeats.filter(record(1))
    assert not any(repeats.filter(record(p)) for p in range(2, 500))  # 498 held back
    assert repeats.filter(log.makeRecord(log.name, logging.ERROR, __file__, 1, "other", (), None))
    now[0] = 61.0
    again = record(7)
    assert repeats.filter(again)
    assert again.getMessage().endswith("(498 more like this in 60 s)")
    formatter = logging.Formatter("%(levelname)s %(message)s")  # every handler formats it
    assert formatter.format(again) == formatter.format(again) == \
        f"ERROR {again.getMessage()}"
    info = [log.makeRecord(log.name, logging.INFO, __file__, 1, "Worker ready", (), None)
            for _ in range(3)]
    assert all(repeats.filter(r) for r in info)  # asked for: all of it
    small = Repeats(every=60.0, clock=lambda: now[0], most=3)
    assert all(small.filter(log.makeRecord(log.name, logging.ERROR, __file__, 1, f"m{c}", (),
                                           None)) for c in "abcdef")
    assert len(small.shapes) <= 3


def _gone(pid: int) -> bool:
    """Has process `pid` exited (a zombie no one reaped yet counts: it holds nothing)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_child_dies_with_its_parent_even_by_sigkill(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from pipeline.cluster.broker import die_with_parent\n"
        "child = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent())\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert not _gone(child)
    parent.kill()
    parent.wait()
    _wait(lambda: _gone(child), 5, "the child outlived its parent")
    assert die_with_parent() is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
@pytest.mark.parametrize("command", [["broker"], ["run", "--no-web"]])
def test_kill_9_of_a_command_leaves_no_tansu_holding_its_port(tmp_path, command):
    """`canonflow broker` (and `canonflow run` with its own broker) killed -9 left Tansu
    running, holding the port."""
    out = tmp_path / "out"
    with out.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *command], cwd=ROOT,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: "pid " in out.read_text() or proc.poll() is not None, 30, "a pid")
        assert proc.poll() is None, out.read_text()
        found = re.search(r"kafka://127\.0\.0\.1:(\d+) \(?pid (\d+)", out.read_text())
        assert found, out.read_text()
        port, tansu = int(found[1]), int(found[2])
        assert not _gone(tansu)
    finally:
        proc.kill()
        proc.wait()
    _wait(lambda: _gone(tansu), 5, "Tansu outlived the command killed -9")
    with socket.socket() as s:  # a new broker can take the port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_killed_tool_leaves_neither_its_broker_nor_its_worker(tmp_path):
    """`kill` of `canonflow bench` left its Tansu broker and its Faust child running: the
    tools start both as EmbeddedBroker and WorkerProcess, here in a parent killed so."""
    parent = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        "from pipeline.cluster.broker import EmbeddedBroker\n"
        "from pipeline.settings import Settings\n"
        "from pipeline.worker.process import WorkerProcess, embedded_settings\n"
        f"b = EmbeddedBroker(log_path={str(tmp_path / 'tansu.log')!r}).start()\n"
        "s = embedded_settings(Settings(partitions=2, web_enabled=False,\n"
        f"                              data_dir={str(tmp_path / 'data')!r}), b.url)\n"
        "w = WorkerProcess(s).start()\n"
        "print(b.pid, w.pid, flush=True)\n"
        "time.sleep(120)\n")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    children = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(children) == 2 and not any(_gone(pid) for pid in children)
    parent.terminate()  # SIGTERM: Python's default ends it without any cleanup
    parent.wait()
    _wait(lambda: all(_gone(pid) for pid in children), 30, "a child outlived the tool")


def test_a_tansu_broker_is_told_from_its_cluster_id(tmp_path):
    """The worker takes the embedded broker's settings from any Tansu it talks to: the
    cluster's metadata carries the id `canonflow broker` starts it with (or Tansu's own)."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as b:
        async def cluster_id() -> str:
            admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap)
            await admin.start()
            try:
                return str((await admin.describe_cluster())["cluster_id"])
            finally:
                await admin.close()

        assert asyncio.run(cluster_id()) == EMBEDDED_CLUSTER_ID
        plain = Settings(broker=b.url)
        live = asyncio.run(for_cluster(plain))
        assert (live.broker_kind, live.producer_max_batch_size, live.rebalance_timeout) == (
            "tansu", 1, 3.0)
        told = asyncio.run(for_cluster(plain.replace(broker_kind="kafka")))
        assert told == plain.replace(broker_kind="kafka")


def _run_worker(tmp_path: Path, broker: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`canonflow run --broker B` with stdout and stderr to a file (not a terminal)."""
    out = tmp_path / "worker.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    env.update(CANONFLOW_PARTITIONS="2", CANONFLOW_DATA_DIR=str(tmp_path / "data"))
    with out.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--broker", broker,
                                 *args], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=die_with_parent())
    return proc, out


def _stopped_by_ctrl_c(proc: subprocess.Popen[bytes], within: float) -> float:
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=within + 30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    took = time.monotonic() - start
    assert took < within, f"Ctrl-C took {took:.1f} s"
    return took


def test_ctrl_c_stops_the_broker_and_tail_with_130_and_no_traceback(tmp_path):
    broker = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "broker"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=die_with_parent())
    assert broker.stdout is not None
    url = "kafka://" + broker.stdout.readline().split("kafka://")[1].split()[0]
    try:
        assert canonflow("topics", "create", "--broker", url).returncode == 0
        tail = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "tail", "--broker", url],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(3)  # following
        _stopped_by_ctrl_c(tail, 5)  # type: ignore[arg-type]
        assert tail.stderr is not None and b"Traceback" not in tail.stderr.read()
    finally:
        _stopped_by_ctrl_c(broker, 10)  # type: ignore[arg-type]
    assert broker.stderr is not None and broker.stderr.read() == ""


@pytest.mark.parametrize("stage", ["waiting", "starting", "ready"])
def test_ctrl_c_exits_130_promptly_at_every_stage_and_the_worker_says_ready_once(
        tmp_path, stage):
    """Waiting for the broker, while Faust starts, once it runs. Ready is one line with
    the web address; stdout is a file: no cursor codes (Faust's spinner wrote them)."""
    web = free_port()
    if stage == "waiting":
        proc, out = _run_worker(tmp_path, NOBODY, "--web-port", str(web))
        _wait(lambda: "waiting for the broker" in out.read_text(), 30, "a wait")
        _stopped_by_ctrl_c(proc, 5)
        return
    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as b:
        proc, out = _run_worker(tmp_path, b.url, "--web-port", str(web))
        mark = "topics created" if stage == "starting" else READY
        _wait(lambda: mark in out.read_text() or proc.poll() is not None, 90, mark)
        _stopped_by_ctrl_c(proc, 10)
    text = out.read_text(errors="replace")
    assert "\x1b[" not in text and "\b" not in text, text
    assert "Traceback" not in text, text
    assert "(Tansu: the embedded broker's settings)" in text
    if stage == "ready":
        assert text.count(READY) == 1
        assert f"{READY}: http://127.0.0.1:{web}/health" in text


_HELD_CTRL_C = """
import os, signal, sys
from pipeline.settings import from_env
from pipeline.worker.process import SignalHold, ensure_topics_waiting, run_worker
hold = SignalHold()
live, _ = ensure_topics_waiting(from_env(), hold=hold)
os.kill(os.getpid(), signal.SIGINT)  # between the two owners: held, not raised
print("held:", hold.signals, flush=True)
sys.exit(run_worker(live, hold=hold))
"""


def test_a_ctrl_c_between_the_broker_wait_and_the_worker_is_held_then_stops_it(tmp_path):
    """Between the wait for the broker and the worker's own handlers, Python's Ctrl-C
    raised KeyboardInterrupt wherever the main thread was; raised in a finalizer it was
    printed and lost, and the worker went on to ready and ran (the starting stage above,
    under load: 2 runs in 15). Now it is held (SignalHold) and acted on once the
    worker's handlers are in place: exit 130, as at any other stage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as b:
        env.update(CANONFLOW_BROKER=b.url, CANONFLOW_PARTITIONS="2", CANONFLOW_WEB_ENABLED="false",
                   CANONFLOW_DATA_DIR=str(tmp_path / "data"))
        done = subprocess.run([sys.executable, "-c", _HELD_CTRL_C], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
    assert f"held: [{int(signal.SIGINT)}]" in done.stdout, (done.stdout, done.stderr)
    assert done.returncode == 130, (done.stdout, done.stderr)
    assert "KeyboardInterrupt" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.serial
def test_a_broker_outage_is_a_few_lines_a_minute_and_ctrl_c_still_stops(tmp_path):
    """During a 40 s outage the worker wrote 2,779 lines; then Ctrl-C took 64 s."""
    broker = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "broker"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
    assert broker.stdout is not None
    url = "kafka://" + broker.stdout.readline().split("kafka://")[1].split()[0]
    proc, out = _run_worker(tmp_path, url, "--no-web")
    try:
        _wait(lambda: READY in out.read_text() or proc.poll() is not None, 90, "ready")
    finally:
        broker.kill()
        broker.wait()
    before = len(out.read_text(errors="replace").splitlines())
    time.sleep(20)
    during = len(out.read_text(errors="replace").splitlines()) - before
    took = _stopped_by_ctrl_c(proc, 10)
    print(f"\noutage: {during} stderr lines in 20 s; Ctrl-C stopped the worker in {took:.1f} s")
    assert during < 40, out.read_text(errors="replace")[-5000:]


def test_the_standalone_broker_and_a_worker_are_healthy_fast_and_again_after_a_restart(
        tmp_path):
    """`canonflow broker` then `canonflow run --broker` got a production cluster's settings:
    34 s to healthy, 113 s after a restart. Prints the times (the bound is only a sanity
    check; the target is under 15 s, measured alone: with the suite's other processes
    beside it the times are longer, so it runs in parallel with them, not serially)."""
    import urllib.request

    broker = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "broker"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
    assert broker.stdout is not None
    url = "kafka://" + broker.stdout.readline().split("kafka://")[1].split()[0]
    web = free_port()

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/health", timeout=2) as r:
                return bool(r.status == 200 and json.load(r)["status"] == "ok")
        except OSError:
            return False

    times = []
    try:
        for _ in ("start", "restart"):
            start = time.monotonic()
            proc, out = _run_worker(tmp_path, url, "--web-port", str(web))
            try:
                _wait(lambda p=proc: healthy() or p.poll() is not None, 60, "a healthy worker")
                assert proc.poll() is None, out.read_text()
                times.append(time.monotonic() - start)
                assert "(Tansu: the embedded broker's settings)" in out.read_text()
            finally:
                proc.terminate()
                assert proc.wait(timeout=60) == 0
    finally:
        broker.terminate()
        broker.wait(timeout=30)
    print(f"\ncanonflow broker + canonflow run --broker: healthy in {times[0]:.1f} s, "
          f"after a restart in {times[1]:.1f} s")
