"""The runtimes' own session files, read as they grow: what `canonflow import` and
`canonflow ship` share.

- `discovery`: which runtime wrote a path, the homes and session files under a
  directory (listed again only when a directory changed), each file's session id;
- `roots`: what the readers may open: regular files inside the directories they are
  given, opened without following a link out of them;
- `sources`: reading a transcript file (complete lines only while it grows; rewrites
  and truncations found by a checksum of what was read) and a SQLite database
  (read-only, with its `-wal`, never locking its writer), each from a saved position;
- `checkpoint`: those positions on disk, written atomically, with the batch in flight;
- `ship`: the sidecar loop that produces each new native record to its transcript
  raw topic, keyed by session.

The offline translation of the same records (`canonflow import`) is a tool:
pipeline.tools.importer.
"""

__all__: list[str] = []
