"""Every on-disk pair through the command line: `canonflow import` of a run's HOME gives
exactly what the transcript adapters give for its session files.

tests/adapters/test_transcript_<runtime>.py compare each adapter's events for the
files with the live adapter's events for `live.jsonl` of the same run (same assistant
texts, tool calls with outputs, turns), minus each runtime's list of what the files
cannot show. This module closes the chain for the command: the CLI finds the sessions
(discovery), reads them (files line by line, databases through SQLite with the WAL)
and translates them; its output must equal, event for event, the adapter fed the
records read here independently: the file's lines as they are, a database's rows from
the fixture's own dump (`<db>.rows.jsonl`), ordered as the adapter's TABLES say, and
the session ids each runtime uses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from adapters import Line
from pipeline.cli import main
from pipeline.transcripts.discovery import load_kinds
from tests.adapters.harness import events_of, run_whole
from tests.transcripts.helpers import all_pairs, home_of

PAIRS = all_pairs()
KINDS = {k.name: k for k in load_kinds()[0]}
UUID_AT_END = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _session_id(runtime: str, path: Path, first: bytes) -> str:
    """Each runtime's own id of the session a file holds."""
    if runtime == "codex":
        m = UUID_AT_END.search(path.stem)
        assert m is not None, path
        return m.group()
    if runtime == "gemini":
        return json.loads(first)["sessionId"]
    return path.stem


def sessions_of(home: Path) -> dict[tuple[str, str], list[bytes]]:
    """(provider, session id) -> its native records, read without the readers under test."""
    out: dict[tuple[str, str], list[bytes]] = {}
    for kind in KINDS.values():
        for h in kind.homes:
            for pattern in kind.files:
                for f in sorted((home / h).glob(pattern)):
                    lines = [x for x in f.read_bytes().splitlines() if x.strip()]
                    sid = _session_id(kind.name, f, lines[0])
                    out.setdefault((kind.provider, sid), []).extend(lines)
            for db in kind.databases:
                dump = home / h / f"{db}.rows.jsonl"
                if not (home / h / db).exists() or not dump.exists():
                    continue
                rows = [json.loads(x) for x in dump.read_bytes().splitlines()]
                for table, session_col, order in kind.tables:
                    keys = [c.strip() for c in order.split(",")]
                    mine = sorted((r["row"] for r in rows if r["table"] == table),
                                  key=lambda row: [row[k] for k in keys])
                    for row in mine:
                        out.setdefault((kind.provider, str(row[session_col])), []).append(
                            json.dumps({"table": table, "row": row}).encode())
    return out


def adapters_give(home: Path) -> list[dict[str, Any]]:
    """The adapters' events, session after session in (provider, id) order, each record
    with the capture time a shipped transcript record carries (none: 0)."""
    out: list[dict[str, Any]] = []
    for (provider, sid), records in sorted(sessions_of(home).items()):
        out += events_of(run_whole(provider, [Line(r, "agent", 0) for r in records], sid))
    return out


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_import_of_a_runs_home_gives_what_the_adapters_give_for_its_files(pair: Path,
                                                                          tmp_path: Path):
    home = home_of(pair, tmp_path)
    result = CliRunner().invoke(main, ["import", str(home)])
    assert result.exit_code == 0, result.output
    got = [json.loads(x) for x in result.stdout.splitlines()]
    want = adapters_give(home)
    assert got and got == want
    assert {e["sessionId"] for e in got} == {sid for _, sid in sessions_of(home)}


def test_every_runtime_has_pairs():
    names = {p.parent.name for p in PAIRS}
    assert {"claude-code-stream-json", "codex-app-server", "gemini-stream-json",
            "opencode-serve", "acp-codex", "acp-claude-code", "acp-gemini"} <= names
