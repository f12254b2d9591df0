"""Where OpenCode's transcript lives, for the readers (pipeline's import and ship).

OpenCode 1.18 keeps no JSON storage tree: everything is in one SQLite database in
WAL mode. Its `event` table is the durable event bus (`evt_` ids, the live `/event`
payloads with a `.1` version suffix on the type), append-only with a gapless `seq`
per session (`aggregate_id`). Every final row of `session`/`message`/`part` equals
the payload of the last event about it (checked on every fixture run), so the event
table alone gives the whole conversation in order, and a shipper that follows new
rows by `seq` sees every change; `message`/`part` are updated in place and could not
be followed that way.
"""

from __future__ import annotations

#: The home directories the database lives under, relative to a user's HOME.
HOMES: tuple[str, ...] = (".local/share/opencode",)
#: The database file names inside a home (read together with their `-wal`).
DATABASES: tuple[str, ...] = ("opencode.db",)
#: (table, session-id SQL expression, ORDER BY clause): the tables a reader sends,
#: in this order per session, as `{"table": T, "row": {column: value}}` records.
TABLES: tuple[tuple[str, str, str], ...] = (("event", "aggregate_id", "seq"),)
