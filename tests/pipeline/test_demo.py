"""`canonflow demo`, the README's run command, end to end on its own embedded broker."""

from __future__ import annotations

import re
import subprocess
import sys

from pipeline.tools.demo import samples
from topics.catalog import PROVIDERS


def test_the_bundled_samples_cover_every_provider():
    assert {p for p, _, _ in samples()} == set(PROVIDERS)


def test_demo_shows_every_expected_canonical_event_and_exits_by_itself():
    r = subprocess.run([sys.executable, "-m", "pipeline.cli", "demo", "--timeout", "120"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    seen, want = map(int, re.search(r"(\d+)/(\d+) canonical events", r.stdout).groups())
    assert seen == want > 0
    for provider in PROVIDERS:
        assert re.search(rf"^{re.escape(provider)}\s", r.stdout, re.M), provider
    assert "turn.completed" in r.stdout and "item.completed" in r.stdout
