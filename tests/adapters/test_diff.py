"""adapters.core.diff: the unified diffs of file changes (ItemPayload `diff`).

A diff is checked by applying it: a small applier below reads the hunks and must turn
the old text into the new one, for any texts (a property test), for the common-ends
shortcut and for the MATCH_MAX fallback."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.core import diff as diffmod
from adapters.core.diff import diff_fields, hunks_diff, records_diff, text_diff
from adapters.core.tools import command_text, tool_fields

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def _apply(old: str, diff: str) -> str:
    """Apply a one-file unified diff to `old` (strictly: context and removed lines must
    match, hunk counts must add up)."""
    lines = diff.split("\n")
    assert lines.pop() == "", "a diff ends with a newline"
    assert lines[0].startswith("--- ") and lines[1].startswith("+++ ")
    src = old.split("\n")
    src_eol = src[-1] == ""  # False: the last line has no newline
    if src_eol:
        src.pop()
    out: list[str] = []
    out_eol = True
    at = 0  # next source line
    i = 2
    while i < len(lines):
        m = _HUNK.match(lines[i])
        assert m, f"not a hunk header: {lines[i]!r}"
        a_start, a_len = int(m[1]), int(m[2] or 1)
        b_len = int(m[4] or 1)
        start = a_start - 1 if a_len else a_start
        assert at <= start <= len(src), "hunks in order, within the file"
        out.extend(src[at:start])
        at = start
        i += 1
        seen_a = seen_b = 0
        while i < len(lines) and not lines[i].startswith("@@"):
            sign, text = lines[i][0], lines[i][1:]
            no_eol = i + 1 < len(lines) and lines[i + 1].startswith("\\ No newline")
            if sign in " -":
                assert src[at] == text, f"line {at + 1}: {src[at]!r} != {text!r}"
                assert no_eol == (at == len(src) - 1 and not src_eol)
                at += 1
                seen_a += 1
            if sign in " +":
                out.append(text)
                out_eol = not no_eol
                seen_b += 1
            i += 2 if no_eol else 1
        assert (seen_a, seen_b) == (a_len, b_len), "hunk counts"
    if at < len(src):
        out.extend(src[at:])
        out_eol = src_eol
    if not out:
        return ""
    return "\n".join(out) + ("\n" if out_eol else "")


_texts = st.lists(st.sampled_from(["a", "b", "c", "", "d e"]), max_size=30).map(
    lambda ls: "\n".join(ls)) | st.lists(st.sampled_from(["a", "b", "c"]), max_size=30).map(
    lambda ls: "".join(x + "\n" for x in ls))


@settings(max_examples=300, deadline=None)
@given(_texts, _texts)
def test_any_diff_applied_to_the_old_text_gives_the_new_one(old, new):
    diff = text_diff("/w/f", old, new)
    if old == new:
        assert diff == ""
    else:
        assert _apply(old, diff) == new


def test_a_new_file_is_diffed_against_dev_null_and_a_deleted_one_to_it():
    assert text_diff("/w/f", None, "hello fixture\n") == \
        "--- /dev/null\n+++ /w/f\n@@ -0,0 +1 @@\n+hello fixture\n"
    assert text_diff("/w/f", "x\ny", None) == \
        "--- /w/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n\\ No newline at end of file\n"


def test_an_excerpt_without_a_final_newline_is_not_the_end_of_the_file():
    assert text_diff("/w/f", "hello fixture", "hello world", excerpt=True) == \
        "--- /w/f\n+++ /w/f\n@@ -1 +1 @@\n-hello fixture\n+hello world\n"
    assert "No newline" in text_diff("/w/f", "hello fixture", "hello world")


def test_an_edit_in_a_large_file_compares_only_what_changed():
    old = "".join(f"line {i}\n" for i in range(200_000))
    new = old.replace("line 100000\n", "line 100000 changed\n")
    started = time.perf_counter()
    diff = text_diff("/w/big", old, new)
    assert time.perf_counter() - started < 2.0  # linear: common ends set aside
    assert diff.count("@@ -") == 1  # one hunk
    assert "-line 100000\n+line 100000 changed\n" in diff
    assert _apply(old, diff) == new


def test_past_match_max_the_middle_is_removed_then_added_and_still_applies():
    old = "".join(f"a{i}\n" for i in range(diffmod.MATCH_MAX))
    new = "".join(f"b{i}\n" for i in range(diffmod.MATCH_MAX))
    diff = text_diff("/w/f", old, new)
    assert _apply(old, diff) == new


def test_a_diff_past_the_cap_keeps_its_ends_and_says_how_much_was_left_out():
    content = "".join(f"{i:04d} {'x' * 60}\n" for i in range(1000))
    part = text_diff("/w/f", None, content)
    fields = diff_fields([(part, "empty")], cap=8 * 1024)
    assert fields["diffTruncated"] is True and fields["diffLength"] == len(part)
    text = fields["diff"]
    assert len(text.encode()) <= 8 * 1024
    head, rest = text.split("[canonflow: ", 1)
    left, tail = rest.split(" characters left out]\n", 1)
    assert part.startswith(head) and part.endswith(tail) and head.endswith("\n")
    assert len(head) + int(left) + len(tail) == len(part)
    assert diff_fields([(part, "empty")], cap=len(part.encode())) == \
        {"diff": part, "diffBase": "empty"}


def test_an_items_diff_base_is_its_least_exact_part():
    parts = [(text_diff("/a", "x\n", "y\n"), "file"),
             (text_diff("/b", "x", "y", excerpt=True), "excerpt")]
    assert diff_fields(parts, 1 << 20)["diffBase"] == "excerpt"
    assert diff_fields([("", "empty"), parts[0]], 1 << 20)["diffBase"] == "file"
    assert diff_fields([("", "empty")], 1 << 20) == {}


def test_a_runtimes_own_diff_keeps_its_header_or_gets_one():
    bare = "@@ -1 +1 @@\n-a\n+b"  # Codex's update: hunks only
    assert hunks_diff("/w/f", bare) == "--- /w/f\n+++ /w/f\n@@ -1 +1 @@\n-a\n+b\n"
    assert hunks_diff("/w/f", bare, new_path="/w/g").startswith("--- /w/f\n+++ /w/g\n")
    jsdiff = "Index: /w/f\n=====\n--- /w/f\n+++ /w/f\n@@ -1 +1 @@\n-a\n+b\n"  # OpenCode's
    assert hunks_diff("/w/f", jsdiff) == "--- /w/f\n+++ /w/f\n@@ -1 +1 @@\n-a\n+b\n"


def test_hunk_records_read_as_hunks():
    records = [{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1,
                "lines": ["-hello fixture", "+hello world"]}]
    assert records_diff("/w/f", records) == \
        "--- /w/f\n+++ /w/f\n@@ -1 +1 @@\n-hello fixture\n+hello world\n"
    assert records_diff("/w/f", [{"lines": "nope"}]) == ""


def test_a_command_reads_as_the_model_wrote_it():
    assert command_text('/bin/bash -lc "printf \'fixture-ok\\\\n\'"') == "printf 'fixture-ok\\n'"
    assert command_text(["/bin/bash", "-lc", "touch x"]) == "touch x"
    assert command_text(["ls", "-la", "a b"]) == "ls -la 'a b'"
    assert command_text("git", ["log", "-1"]) == "git log -1"
    assert command_text("bash -lc 'unbalanced") == "bash -lc 'unbalanced"
    assert command_text("ls -c x") == "ls -c x"
    assert command_text(42) is None
    assert command_text("bash -lc 'ls -la'") == "ls -la"  # read without shlex
    assert command_text('/bin/sh -c "cd /w && make"') == "cd /w && make"
    assert command_text("zsh -c ''") == ""


def _shlex_command(command: str) -> str:
    """What command_text gave for a string before its plain words were read without
    shlex: shlex.split read every wrapped command."""
    import shlex

    from adapters.core.tools import _wrapped

    if not _wrapped(command):
        return command
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if len(argv) == 3 and argv[1] in ("-c", "-lc") and argv[0].rsplit("/", 1)[-1] in {
            "sh", "bash", "zsh", "dash"}:
        return argv[2]
    return command


# few characters, most of them special, so that escapes and quotes meet often
_SHELL_CHARS = st.sampled_from(["a", "$", "é", " ", "\t", "\x0b", "'", '"', "\\", "\\"])


@settings(max_examples=1000, deadline=None)
@given(shell=st.sampled_from(["bash", "/bin/bash", "sh", "/usr/bin/zsh", "dash", "b'ash",
                              "/bi\\n/sh", "fish"]),
       flag=st.sampled_from(["-c", "-lc", "-x"]),
       quote=st.sampled_from(["", "'", '"']),
       body=st.lists(_SHELL_CHARS, max_size=12).map("".join),
       tail=st.sampled_from(["", "", "", " ", "'", '"', " x"]))
def test_a_wrapped_command_reads_as_shlex_reads_it(shell, flag, quote, body, tail):
    command = f"{shell} {flag} {quote}{body}{quote}{tail}"
    assert command_text(command) == _shlex_command(command)


def test_tool_inputs_under_any_runtimes_names_give_the_same_fields():
    edit = {"paths": ["/w/f"], "diff": "--- /w/f\n+++ /w/f\n@@ -1 +1 @@\n-a\n+b\n",
            "diffBase": "excerpt"}
    for inp in ({"file_path": "/w/f", "old_string": "a", "new_string": "b"},  # Claude, Gemini
                {"filePath": "/w/f", "oldString": "a", "newString": "b"},  # OpenCode
                {"path": "/w/f", "old_str": "a", "new_str": "b"}):  # Amp
        assert tool_fields("Edit", inp, 1 << 20) == edit
    assert tool_fields("Bash", {"cmd": "ls", "cwd": "/w"}, 1 << 20) == {"command": "ls", "cwd": "/w"}
    assert tool_fields("Bash", {"command": "ls", "workdir": "/w"}, 1 << 20) == \
        {"command": "ls", "cwd": "/w"}
    assert tool_fields("mcp__linear__list_issues", {"q": 1}, 1 << 20) == \
        {"mcpServer": "linear", "mcpTool": "list_issues"}
    assert tool_fields("WebSearch", {"query": "faust"}, 1 << 20) == {"query": "faust"}
    assert tool_fields("WebFetch", {"url": "https://x", "prompt": "p"}, 1 << 20) == \
        {"url": "https://x"}
    patch = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n*** End Patch"
    assert tool_fields("Edit", {"patchText": patch}, 1 << 20) == {"paths": ["a.py", "b.py"]}
