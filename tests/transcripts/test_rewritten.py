"""`canonflow ship` end to end, a session file rewritten while it is followed: the
shipper sends it again from its start, and the worker translates only its new rows, so
what it publishes is what `canonflow import` gives for the final file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from adapters.core.ids import DEDUPE_KEPT
from pipeline.settings import Settings
from pipeline.worker.process import WorkerProcess
from tests.transcripts.test_ship import (
    ShipperProcess,
    append,
    by_event_id,
    imported,
    read_until,
    session_lines,
    shipped_to,
    wait_until,
)
from topics.catalog import CANONICAL_TOPIC


def text_of(events: list[dict[str, Any]], sid: str) -> str:
    """A session's assistant text, its content.deltas in seq order."""
    mine = sorted((e for e in events if e["sessionId"] == sid), key=lambda e: e["seq"])
    return "".join(e["payload"]["delta"] for e in mine if e["type"] == "content.delta")


def reserialized(lines: list[bytes]) -> list[bytes]:
    """The same rows written again by another writer: other spacing, the same JSON."""
    return [json.dumps(json.loads(ln)).encode() + b"\n" for ln in lines]


@pytest.mark.parametrize("how", ["compacted", "truncated"])
def test_a_file_rewritten_while_shipped_is_translated_once(
        settings: Settings, worker: WorkerProcess, tmp_path: Path, how: str):
    """compacted: the file replaced by its rows written again (other bytes, the same
    rows) and new rows after them. truncated: the file emptied, seen so by the shipper,
    then written again with the same bytes and new rows, after more rows than the
    driver's last DEDUPE_KEPT digests know."""
    home = tmp_path / "home"
    name, lines = session_lines("claude-code-sdk-stdio", "multi_turn")
    file = home / ".claude" / "projects" / "-sandbox-workspace" / name
    cut = 2 * len(lines) // 3 if how == "compacted" else len(lines) - 1
    assert sum(b'"uuid"' in ln for ln in lines[:cut]) > DEDUPE_KEPT or how == "compacted"
    append(file, b"".join(lines[:cut]))
    cp, log = tmp_path / "ship.json", tmp_path / "ship.log"
    ship = ShipperProcess(settings, home, cp, log).start()
    try:
        wait_until("the first rows", lambda: shipped_to(cp, file), log=log)
        if how == "compacted":  # written elsewhere and renamed over it, as runtimes do
            tmp = file.with_suffix(".tmp")
            tmp.write_bytes(b"".join(reserialized(lines[:cut]) + lines[cut:]))
            os.replace(tmp, file)
        else:
            file.write_bytes(b"")
            wait_until("the truncation seen", lambda: f"{file}: truncated" in log.read_text(),
                       log=log)
            append(file, b"".join(lines))
        wait_until("everything shipped", lambda: shipped_to(cp, file), log=log)
    finally:
        status = ship.stop()
    assert status == 0, log.read_text()
    said = log.read_text()
    assert f"{file}: {'rewritten' if how == 'compacted' else 'truncated'}" in said, said
    expected, dead = imported(home)
    assert not dead
    want = {e["eventId"]: e for e in expected}
    got = by_event_id(read_until(settings, CANONICAL_TOPIC,
                                 lambda recs: want.keys() <= by_event_id(recs).keys(), worker))
    assert len(text_of(list(got.values()), file.stem)) == len(text_of(expected, file.stem)) == 58
    assert sorted(got) == sorted(want)  # the rows sent again gave no event under a new id
    assert got == want
