"""`canonflow demo`, the README's run command, end to end on its own embedded broker:
what a person sees on a first run (no warning, whole session ids, a legend for every
column, a last line that says what to try next) and what it leaves behind (nothing:
its files live in one temporary directory, removed at exit, by Ctrl-C too)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.tools.demo import LEGEND, NEXT, TRANSCRIPTS, samples
from topics.catalog import PROVIDERS

ROOT = Path(__file__).resolve().parents[2]
#: A warning: as the warnings module prints it (`file.py:12: Category: message`, then
#: the `warnings.warn(...)` line), or as a compiler does (`file.c:7: warning: ...`).
WARNING = re.compile(r"^\S+\.py:\d+: \w+: |\b\w*Warning: |warnings\.warn|: warning: |"
                     r"^\s*warning:", re.I | re.M)


def _demo_env(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """The demo's environment: TMPDIR and its working directory of the test's own, both
    empty, so that whatever it leaves behind is found."""
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    return env, tmp, cwd


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_bundled_samples_cover_every_provider():
    assert {p for p, _, _ in samples()} == set(PROVIDERS)


def test_demo_shows_every_expected_canonical_event_and_exits_by_itself(tmp_path):
    env, tmp, cwd = _demo_env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pipeline.cli", "demo", "--timeout", "120"],
                       capture_output=True, text=True, timeout=240, env=env, cwd=cwd)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    seen, want = map(int, re.search(r"(\d+)/(\d+) canonical events", r.stdout).groups())
    assert seen == want > 0
    for provider in PROVIDERS:
        assert re.search(rf"^{re.escape(provider)}\s", r.stdout, re.M), provider
    assert "turn.completed" in r.stdout and "item.completed" in r.stdout

    # nothing on screen is a warning
    assert not WARNING.search(r.stdout + r.stderr), WARNING.search(r.stdout + r.stderr)
    # every session id whole: the samples' own, and the transcripts' UUIDs
    for provider, session, _ in samples():
        if provider not in TRANSCRIPTS:
            assert re.search(rf"^{re.escape(provider)} +{re.escape(session)} +#", r.stdout,
                             re.M), session
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.search(rf"^\S+-transcript +{uuid} +#", r.stdout, re.M)
    # a legend for every column, then the columns' names, before the first event
    lines = r.stdout.splitlines()
    legend = LEGEND.splitlines()
    start = lines.index(legend[0])
    assert lines[start:start + len(legend)] == legend
    assert re.fullmatch(r"provider +session +#seq \*type +what it says", lines[start + len(legend)])
    assert [row.split()[0] for row in legend[1:] if not row.startswith(" " * 4)] == [
        "provider", "session", "#seq", "*", "type", "what"]
    assert not any(re.match(r"\S+ +\S+ +#\d", ln) for ln in lines[:start])
    # the last line says what to try next
    assert lines[-1] == NEXT
    assert "`canonflow ui`" in NEXT and "five-minute tour" in NEXT
    # and nothing is left behind: no temporary file, no data directory
    assert os.listdir(tmp) == [] and os.listdir(cwd) == []


def test_demo_interrupted_stops_its_processes_and_removes_its_files(tmp_path):
    """Ctrl-C in a terminal: SIGINT to the whole foreground group (the demo and its
    worker), mid-way through the events."""
    env, tmp, cwd = _demo_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "demo", "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd, start_new_session=True)
    try:
        out: list[str] = []
        for line in proc.stdout:  # type: ignore[union-attr]
            out.append(line)
            if line.startswith("provider "):  # the columns' names: events come next
                break
        assert os.listdir(tmp), "the demo keeps its files in TMPDIR while it runs"
        worker = int(re.search(r"worker pid (\d+)", "".join(out)).group(1))
        time.sleep(1.0)  # some events shown
        os.killpg(proc.pid, signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert rest.splitlines()[-1].startswith("canonflow demo: interrupted")
    broker = int(re.search(r"embedded broker .* pid (\d+)", err).group(1))
    assert not _alive(worker) and not _alive(broker)
    assert os.listdir(tmp) == [] and os.listdir(cwd) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_demo_terminated_removes_its_files_too(tmp_path, signum):
    env, tmp, cwd = _demo_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "demo", "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("provider "):
                break
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert os.listdir(tmp) == [] and os.listdir(cwd) == []


# ---- `make demo`'s build, before the demo: one line on screen, no warning ----------


def test_the_build_of_the_package_says_no_setuptools_warning():
    """setuptools (65 here, as the venv gets it) warns on every build that reads the
    `[tool.setuptools]` table; setup.py silences that one warning."""
    r = subprocess.run([sys.executable, "setup.py", "--quiet", "--name"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "canonflow"
    assert not WARNING.search(r.stdout + r.stderr), r.stderr


@pytest.mark.parametrize("status", [0, 1])
def test_make_sends_the_mypyc_build_output_to_a_log_and_prints_one_line(tmp_path, status):
    """The Makefile's compile step, run by make on a copy of the Makefile with a stand-in
    for the venv's python that talks as mypyc and the compiler do (the real build takes
    minutes): the screen gets one line (two when the build fails), the log the rest."""
    for name in ("Makefile", "setup.py", "pyproject.toml", "topics/runtimes.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "adapters").mkdir()
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").touch()  # pip install done
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'building adapters.compiled'\n"
                      "echo 'setuptools/dist.py:1: _BetaConfiguration: beta' >&2\n"
                      "echo 'build/__native.c:7: warning: unused variable' >&2\n"
                      f"exit {status}\n")
    python.chmod(0o755)
    r = subprocess.run(["make", "--no-print-directory", f"VENV={venv}", f"PY={python}",
                        f"{venv}/.built-compiled"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    log = venv / "mypyc-build.log"
    shown = r.stdout.splitlines() + r.stderr.splitlines()
    assert shown[0] == f"make: compiling the adapters with mypyc (a few minutes the first " \
                       f"time; log: {log})"
    if status == 0:
        assert shown == shown[:1]
    else:
        assert shown[1:] == [f"make: mypyc build failed (see {log}): adapters run interpreted"]
    assert not WARNING.search(r.stdout + r.stderr)
    assert "unused variable" in log.read_text() and "_BetaConfiguration" in log.read_text()
