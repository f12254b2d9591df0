"""Where Gemini CLI's chats live, for the readers (pipeline's import and ship).

One JSON-lines file per session, `tmp/<project short name>/chats/session-<YYYY-MM-DDTHH-MM>-
<first 8 hex of the session id>.jsonl` (0.61; `projects.json` maps a project's path to
its short name), appended as the session goes; its first line is the header with the
`sessionId`. Subagents' chats (`chats/<parent session>/<id>.jsonl`) are not reached by
the pattern. Releases before the JSON-lines file wrote one JSON document per session
(`session-*.json`, rewritten whole), which cannot be followed line by line: not read.
"""

from __future__ import annotations

#: The home directories the chats live under, relative to a user's HOME.
HOMES: tuple[str, ...] = (".gemini",)
#: Glob patterns of the transcript files, relative to a home.
FILES: tuple[str, ...] = ("tmp/*/chats/session-*.jsonl",)
