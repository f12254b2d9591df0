"""Where Codex's transcript lives, for the readers (pipeline's import and ship).

The rollout JSONL is the whole record: `thread_history_1.sqlite` is a projection of
it (its items are the rollout's `item_completed` items in the app-server's camelCase,
its turn status the rollout's `task_complete`/`turn_aborted`), Codex cores before
0.171 (codex-acp's 0.137) do not write it, and a second source for one session would
have no order against the file's lines. So codex-transcript reads rollouts only and
has no TABLES.
"""

from __future__ import annotations

#: The home directories the rollouts live under, relative to a user's HOME.
HOMES: tuple[str, ...] = (".codex",)
#: Glob patterns of the transcript files, relative to a home.
FILES: tuple[str, ...] = ("sessions/*/*/*/rollout-*.jsonl",)
