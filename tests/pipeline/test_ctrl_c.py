"""Ctrl-C stops a command that talks to the broker (pipeline.cli.common.on_broker) with
exit 130 and no traceback, even when the library it awaits swallows the cancellation
(aiokafka did while a client bootstrapped: a `tail` stopped in its first seconds under
load went on forever)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import asyncio, sys
import click
from pipeline.cli.common import on_broker
from pipeline.settings import Settings

async def work(swallow):
    print("working", flush=True)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if not swallow:
                raise

@click.command()
@click.argument("swallow", type=bool)
def main(swallow):
    on_broker(Settings(), work(swallow))

from pipeline.cli import _Commands
group = _Commands(name="canonflow", commands={"main": main})
group.main(["main", sys.argv[1]], prog_name="canonflow")
"""


@pytest.mark.parametrize("swallow", [False, True], ids=["cancelled", "cancellation swallowed"])
def test_ctrl_c_stops_broker_work_with_130(swallow: bool):
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM, str(swallow)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "working\n"
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - start
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    assert took < 10, f"Ctrl-C took {took:.1f} s"
