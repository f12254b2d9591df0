"""Where Claude Code's transcripts live, for the readers (pipeline's import and ship).

One file per session, `projects/<cwd with every non-alphanumeric character as "-">/
<session id>.jsonl`, appended as the session goes. Subagents' transcripts are other
files (`<session>/subagents/agent-*.jsonl` in 2.1, `agent-*.jsonl` beside the session
in older releases, rows marked `isSidechain`): the first pattern does not reach the
former, and the adapter skips sidechain rows, so the latter give no events.
"""

from __future__ import annotations

#: The home directories the transcripts live under, relative to a user's HOME.
HOMES: tuple[str, ...] = (".claude",)
#: Glob patterns of the transcript files, relative to a home.
FILES: tuple[str, ...] = ("projects/*/*.jsonl",)
