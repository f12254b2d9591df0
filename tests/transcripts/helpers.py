"""Runtime homes written the way the runtimes write them, for the readers' tests."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: The on-disk pairs: the project's copy when there is one, else the shared material.
ONDISK = (ROOT / "tests" / "fixtures" / "ondisk"
          if (ROOT / "tests" / "fixtures" / "ondisk").is_dir()
          else ROOT.parent / "shared" / "fixtures" / "ondisk")
SHARED_ONDISK = ROOT.parent / "shared" / "fixtures" / "ondisk"


def pair_dir(runtime: str, scenario: str) -> Path:
    """A pair's folder: the project's copy when it has this one, else the shared one."""
    mine = ONDISK / runtime / scenario
    return mine if mine.is_dir() else SHARED_ONDISK / runtime / scenario


def all_pairs() -> list[Path]:
    """Every pair folder (the project's copies first; the shared ones it lacks)."""
    seen: dict[str, Path] = {}
    for base in (ONDISK, SHARED_ONDISK):
        for live in sorted(base.glob("*/*/live.jsonl")):
            seen.setdefault(f"{live.parent.parent.name}/{live.parent.name}", live.parent)
    return [seen[k] for k in sorted(seen)]


def rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(table, row) of a `<db>.rows.jsonl` dump, blobs decoded."""
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out.append((rec["table"], {k: base64.b64decode(v["$blob_b64"])
                                   if isinstance(v, dict) and "$blob_b64" in v else v
                                   for k, v in rec["row"].items()}))
    return out


def insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    cols = ", ".join(f'"{c}"' for c in row)
    conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(row))})',
                 tuple(row.values()))


def writer(db: Path, schema: str) -> sqlite3.Connection:
    """A connection that writes `db` as a runtime does: WAL mode, the schema created,
    the WAL never checkpointed by it (OpenCode leaves it to grow)."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.executescript(schema)
    return conn


def schema_of(db: Path) -> str:
    """The CREATE statements of a database's tables (a copy read without a -wal)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return ";\n".join(sql for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL")) + ";"
    finally:
        conn.close()


def build_db(schema: str, dump: Path, dest: Path, *, keep_open: bool = False
             ) -> sqlite3.Connection | None:
    """A real SQLite database from a fixture's schema and rows dump, in WAL mode.
    `keep_open`: the writer stays connected (returned), so the rows stay in the -wal as
    a running runtime leaves them; closed, SQLite folds them into the main file."""
    conn = writer(dest, schema)
    conn.execute("BEGIN")
    for table, row in rows(dump):
        insert(conn, table, row)
    conn.execute("COMMIT")
    if keep_open:
        return conn
    conn.close()
    return None


def home_of(pair: Path, tmp: Path) -> Path:
    """A copy of a pair's HOME (its dot-directories), where each database the fixture
    gives only as a dump (`<db>.rows.jsonl` + `<db>.schema.sql`) is built for real."""
    home = tmp / f"home-{pair.parent.name}-{pair.name}"
    for entry in pair.iterdir():
        if entry.is_dir() and entry.name.startswith("."):
            for src in entry.rglob("*"):  # bytes only: the fixtures' modes are read-only
                if src.is_file() and not src.is_symlink():
                    dest = home / src.relative_to(pair)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest)
    for dump in sorted(home.rglob("*.rows.jsonl")):
        db = dump.with_name(dump.name[: -len(".rows.jsonl")])
        schema = dump.with_name(db.name + ".schema.sql")
        if not db.exists() and schema.exists():
            build_db(schema.read_text(), dump, db)
    return home
