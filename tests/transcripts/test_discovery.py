"""Finding the runtimes' sessions under a path, and which runtime wrote a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import topics.runtimes
from pipeline.transcripts.discovery import (
    RUNTIMES,
    NoAdapter,
    Tree,
    load_kind,
    load_kinds,
    locate,
    session_of,
    sniff,
)

CLAUDE_ROW = b'{"type":"queue-operation","operation":"enqueue","sessionId":"c1"}\n'
CODEX_META = b'{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}\n'
GEMINI_HEAD = b'{"sessionId":"g-1","projectHash":"ab","startTime":"t","kind":"main"}\n'
CODEX_UUID = "01a231cd-cde6-7d40-8863-c5a32b19225b"


def home(tmp_path: Path) -> Path:
    """A HOME where every runtime has written one session."""
    h = tmp_path / "home"
    files = {
        ".claude/projects/-w/c1.jsonl": CLAUDE_ROW,
        ".claude/projects/-w/notes.txt": b"not a pattern's",
        f".codex/sessions/2026/12/01/rollout-2026-12-01T13-31-40-{CODEX_UUID}.jsonl": CODEX_META,
        ".gemini/tmp/workspace/chats/session-2026-12-01T13-40-g1.jsonl": GEMINI_HEAD,
        ".local/share/opencode/opencode.db": b"SQLite format 3\x00",
    }
    for rel, data in files.items():
        (h / rel).parent.mkdir(parents=True, exist_ok=True)
        (h / rel).write_bytes(data)
    return h


def found(paths: list[Path], runtime: str | None = None) -> list[tuple[str, str, bool]]:
    kinds, missing = load_kinds(runtime)
    loc = locate([str(p) for p in paths], kinds, missing, explicit=runtime is not None)
    assert loc.errors == []
    return [(f.kind.name, os.path.basename(f.path), f.db) for f in loc.found]


def test_every_runtime_has_an_adapter_that_says_where_its_files_are():
    for name in RUNTIMES:
        kind = load_kind(name)
        assert kind.homes and (kind.files or kind.tables), name


def test_a_home_directory_holds_every_runtimes_sessions(tmp_path: Path):
    assert found([home(tmp_path)]) == [
        ("claude", "c1.jsonl", False),
        ("codex", f"rollout-2026-12-01T13-31-40-{CODEX_UUID}.jsonl", False),
        ("gemini", "session-2026-12-01T13-40-g1.jsonl", False),
        ("opencode", "opencode.db", True),
    ]


def test_a_runtimes_home_a_prefix_of_it_or_a_folder_inside_it(tmp_path: Path):
    h = home(tmp_path)
    assert found([h / ".claude"]) == [("claude", "c1.jsonl", False)]
    assert found([h / ".local"]) == [("opencode", "opencode.db", True)]
    assert found([h / ".local/share/opencode"]) == [("opencode", "opencode.db", True)]
    assert found([h / ".claude/projects/-w"]) == [("claude", "c1.jsonl", False)]
    assert found([h / ".codex/sessions/2026"])[0][0] == "codex"


def test_a_folder_of_homes_is_searched_and_a_path_given_twice_gives_its_sessions_once(
        tmp_path: Path):
    a, b = home(tmp_path / "a"), home(tmp_path / "b")
    assert len(found([tmp_path])) == 8
    assert len(found([a, a / ".claude", b])) == 8


def test_a_lone_file_is_recognised_by_its_first_line_or_header(tmp_path: Path):
    for name, data, runtime in (("x.jsonl", CLAUDE_ROW, "claude"), ("y.jsonl", CODEX_META, "codex"),
                                ("z.jsonl", GEMINI_HEAD, "gemini"),
                                ("w.db", b"SQLite format 3\x00", "opencode")):
        (tmp_path / name).write_bytes(data)
        assert found([tmp_path / name]) == [(runtime, name, runtime == "opencode")]


def test_a_file_no_runtime_wrote_and_a_folder_without_homes_are_one_line_each(tmp_path: Path):
    (tmp_path / "notes.jsonl").write_bytes(b'{"hello": 1}\n')
    kinds, missing = load_kinds()
    loc = locate([str(tmp_path / "notes.jsonl"), str(tmp_path), str(tmp_path / "gone")],
                 kinds, missing)
    assert loc.found == [] and len(loc.errors) == 3
    assert "not a session file of any runtime" in loc.errors[0]
    assert "no runtime's home" in loc.errors[1]
    assert "cannot read" in loc.errors[2]


def test_a_runtime_named_reads_the_file_as_its_own(tmp_path: Path):
    (tmp_path / "notes.jsonl").write_bytes(b'{"hello": 1}\n')
    assert found([tmp_path / "notes.jsonl"], runtime="claude") == [
        ("claude", "notes.jsonl", False)]


def test_a_runtime_without_an_adapter_is_said_in_one_line(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(topics.runtimes, "RUNTIMES", tuple(
        r for r in topics.runtimes.RUNTIMES if r.id != "claude-transcript"))
    with pytest.raises(NoAdapter, match="claude-transcript.*not registered"):
        load_kind("claude")
    kinds, missing = load_kinds()
    (tmp_path / "x.jsonl").write_bytes(CLAUDE_ROW)
    loc = locate([str(tmp_path / "x.jsonl")], kinds, missing)
    assert loc.found == [] and loc.errors == [
        f"{tmp_path / 'x.jsonl'}: a claude transcript, but {missing['claude']}"]


def test_session_ids_are_the_runtimes_own():
    kinds = {k.name: k for k in load_kinds()[0]}
    assert session_of(kinds["claude"], "/h/p/abc.jsonl", None) == "abc"
    assert session_of(kinds["codex"], f"/s/rollout-2026-12-01T13-31-40-{CODEX_UUID}.jsonl",
                      None) == CODEX_UUID
    assert session_of(kinds["codex"], "/s/odd.jsonl", CODEX_META.strip()) == "x"
    assert session_of(kinds["gemini"], "/c/session-x.jsonl", None) is None  # wait for it
    assert session_of(kinds["gemini"], "/c/session-x.jsonl", GEMINI_HEAD.strip()) == "g-1"
    assert session_of(kinds["gemini"], "/c/session-x.jsonl", b"garbage") == "session-x"


def test_sniffing_names_no_runtime_for_other_json():
    assert sniff(b'{"a": 1}') is None and sniff(b"[1]") is None and sniff(b"\xff") is None


def test_the_tree_lists_a_directory_again_only_when_it_changed(tmp_path: Path):
    d = tmp_path / "projects" / "-w"
    d.mkdir(parents=True)
    (d / "a.jsonl").write_bytes(b"")
    past = 1_600_000_000 * 1_000_000_000
    for p in (tmp_path, tmp_path / "projects", d):
        os.utime(p, ns=(past, past))
    tree = Tree()
    assert tree.glob(str(tmp_path), "projects/*/*.jsonl") == [str(d / "a.jsonl")]
    listed = tree.listed
    assert tree.glob(str(tmp_path), "projects/*/*.jsonl") == [str(d / "a.jsonl")]
    assert tree.listed == listed  # nothing changed: nothing listed
    (d / "b.jsonl").write_bytes(b"")  # the directory's mtime moves
    assert tree.glob(str(tmp_path), "projects/*/*.jsonl") == [str(d / "a.jsonl"),
                                                             str(d / "b.jsonl")]
    assert tree.listed == listed + 1
