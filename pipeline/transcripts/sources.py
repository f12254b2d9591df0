"""Reading the runtimes' session files and databases from a saved position.

Both readers return records as (session id, native record bytes, mark): the mark is
the position just after that record, applied (`commit`) only once the record is
delivered, so a reader restarted from its last committed state reads nothing twice
and skips nothing. A mark whose record is None only moves the position (blank lines,
a finished read).

Files (`FileSource`). Runtimes append whole lines; a line without its newline is
still being written, and waits (an import of finished files takes it as it is). The
state keeps the device and inode, the position, a CRC-32 of every byte before it,
and the length and CRC-32 of the last line. A poll that finds the size, mtime and
inode as they were reads nothing (one stat per file); otherwise it reads from the
start of the last line, which must be as it was:
- appended: read on from the position;
- replaced by a file that starts with what was read (written elsewhere and renamed
  over it): its CRC over the old length matches, read on;
- truncated, or rewritten with other bytes: read again from the start (`rewritten`
  says so). The shipper then sends the new content under the same session: the
  runtime's own ids let the adapter drop what it already published.
A line longer than its raw topic takes (`max_line`) is never held whole: it is read
through in pieces and comes as a `TooLong` (its head, size, SHA-256 and checksums),
which the shipper and the importer turn into one dead letter (`long_line_letter`). So
a reader holds at most its read limit and one line, whatever the file holds.

Both readers open only what pipeline.transcripts.roots allows: a regular file inside
the source's root, reached without a link out of it.

Databases (`Database`): the adapter's TABLES, read with
`SELECT *, <session> AS __session FROM <table> ORDER BY <order>` and sent as
`{"table": T, "row": {column: value}}` (JSON text columns stay strings, blobs become
{"$blob_b64": ...} as in the fixtures' dumps). The connection is read-only
(`mode=ro`), so it never writes the database or checkpoints its WAL, and lives for
one read: one short read transaction, which in WAL mode takes no lock the writer waits
for (see `open_readonly` for a -shm it cannot write, `Database._read_at_rest` for a
database whose runtime is not running). The identity of a database is its device and
inode (a new one: every row again). Each table keeps, per session, the
ORDER BY key of the last row sent (rows at or below it are not sent again) and, to
read only new rows, the largest rowid read with that row's identity: when that row
changed or vanished (rows deleted, VACUUM renumbered them), the next poll reads the
whole table once and the per-session keys filter it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any
from urllib.parse import quote

import msgspec

from pipeline.transcripts.discovery import RACY_NS, SQLITE_MAGIC, Kind, session_of
from pipeline.transcripts.roots import Refused, confined_database, open_regular, root_of
from topics.catalog import raw_topic, topic
from topics.records import DeadLetter

#: The most one poll reads from one source before it hands over what it has.
READ_LIMIT = 4 * 1024 * 1024
#: The capture time (`t`) of a transcript record: none, the rows carry their own
#: times (the adapters read them); the shipper and `canonflow import` give the same.
NO_TIME = 0
#: Seconds a database read waits for a lock (a WAL reader waits only while the
#: database is being recovered or its WAL restarted).
DB_TIMEOUT = 1.0
#: Room a record needs in its topic beside its value: key, headers, batch framing.
RECORD_ROOM = 4096
#: The first bytes of a line too long to ship that its dead letter carries.
HEAD_BYTES = 4096
#: The pieces a line too long to ship is read through (its hash and checksum).
PIECE_BYTES = 1 << 20

_encode = msgspec.json.Encoder().encode


class SourceError(Exception):
    """A source cannot be read now (gone, locked, corrupt, not what it should be)."""


class FileMark(msgspec.Struct, array_like=True, frozen=True):
    """A file's position after a record."""

    dev: int
    ino: int
    pos: int
    crc: int
    last: int
    last_crc: int
    session: str | None
    size: int = -1  # the stat of a read that reached the end of the file, else -1
    mtime: int = -1


class FileState(msgspec.Struct, kw_only=True):
    """What a file's reader keeps between polls (and in the checkpoint)."""

    dev: int = 0
    ino: int = 0
    pos: int = 0  # bytes read: the end of the last complete line
    crc: int = 0  # CRC-32 of bytes [0, pos)
    last: int = 0  # length of the last line read, newline included
    last_crc: int = 0
    session: str | None = None
    size: int = -1  # the size and mtime when the file was last read to its end
    mtime: int = -1

    def apply(self, m: FileMark) -> None:
        self.dev, self.ino, self.pos, self.crc = m.dev, m.ino, m.pos, m.crc
        self.last, self.last_crc, self.session = m.last, m.last_crc, m.session
        if m.size >= 0:
            self.size, self.mtime = m.size, m.mtime


def max_line(provider: str) -> int:
    """The longest line (newline excluded) shipped as one record of `provider`'s raw
    topic: its max.message.bytes (the catalog's) less RECORD_ROOM."""
    return topic(raw_topic(provider)).max_message_bytes - RECORD_ROOM


class TooLong(msgspec.Struct, frozen=True):
    """A line longer than its raw topic takes, read through in pieces of PIECE_BYTES:
    its first HEAD_BYTES, its size and SHA-256 (newline excluded), and what its mark
    needs (its size and CRC-32 with the newline, the file's CRC-32 through it)."""

    head: bytes
    size: int
    sha256: str
    raw_size: int
    crc: int
    file_crc: int
    finished: bool  # its newline was found (else the end of the file came first)


Record = tuple[str | None, "bytes | TooLong | None", Any]  # (session, value, mark)


def long_line_letter(kind: Kind, path: str, session: str | None, at: int, line: TooLong,
                     redact: Callable[[DeadLetter], DeadLetter] | None = None) -> DeadLetter:
    """The one dead letter for a line too long to ship (`at`: its first byte in the
    file): its head, its size and SHA-256, the reason; its head redacted by `redact`
    (the size and hash stay the whole line's)."""
    name = raw_topic(kind.provider)
    letter = DeadLetter(
        topic=name, partition=-1, offset=-1, provider=kind.provider, errorClass="LineTooLong",
        reason=f"{path}: the line at byte {at} is {line.size} bytes, longer than {name} takes "
               f"({max_line(kind.provider)} bytes): not shipped; here are its first "
               f"{len(line.head)} bytes, its size and SHA-256",
        value=line.head, key=session, origin="agent", valueBytes=line.size,
        valueSha256=line.sha256)
    if redact is not None:
        letter = msgspec.structs.replace(redact(letter), valueBytes=line.size,
                                         valueSha256=line.sha256)
    return letter


class Reading(msgspec.Struct):
    """One poll of one source: its records in order; `more` when it stopped at the
    read limit; `rewritten` when it started over (a truncated or rewritten file)."""

    records: list[Record]
    more: bool = False
    rewritten: str = ""


class FileSource:
    """One session file, followed from its committed state, read only as a regular
    file inside `root` (pipeline.transcripts.roots; default: the directory holding it)."""

    def __init__(self, path: str, kind: Kind, state: FileState | None = None,
                 root: str | None = None):
        self.path, self.kind = path, kind
        self.state = state if state is not None else FileState()
        self.root = root or root_of(path)
        self.max_line = max_line(kind.provider)

    def changed(self) -> bool:
        """Whether a read could find something new (one stat). Raises OSError."""
        st = os.stat(self.path)
        s = self.state
        return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev) != (s.size, s.mtime, s.ino, s.dev)

    def commit(self, mark: FileMark) -> None:
        self.state.apply(mark)

    def read(self, *, final: bool = False, limit: int = READ_LIMIT) -> Reading:
        """The complete lines after the committed position (`final`: the unfinished
        last one too), up to about `limit` bytes; a line longer than max_line comes as
        a TooLong. Raises SourceError (outside its root, not a regular file), OSError."""
        try:
            fh, _ = open_regular(self.path, self.root)
        except Refused as e:
            raise SourceError(str(e)) from None
        with fh:
            st = os.fstat(fh.fileno())
            s = self.state
            start = FileMark(st.st_dev, st.st_ino, s.pos, s.crc, s.last, s.last_crc, s.session)
            why = self._moved(fh, st)
            if why:
                start = FileMark(st.st_dev, st.st_ino, 0, 0, 0, 0, None)
            out = Reading([], rewritten=why)
            fh.seek(start.pos)
            size = 0
            for value, mark in _lines(fh, start, self, final):
                out.records.append((mark.session, value, mark))
                size += len(value.head) if isinstance(value, TooLong) else len(value or b"")
                if size >= limit:
                    out.more = True
                    return out
            racy = time.time_ns() - st.st_mtime_ns <= RACY_NS
            last = out.records[-1][2] if out.records else start
            # a read that reached the end: the next poll skips the file until its stat
            # moves (not when its mtime is so recent that a same-size write could hide)
            out.records.append((last.session, None, msgspec.structs.replace(
                last, size=-1 if racy else st.st_size, mtime=-1 if racy else st.st_mtime_ns)))
            return out

    def _moved(self, fh: Any, st: os.stat_result) -> str:
        """Why the bytes already read are no longer the file's start ("" if they are)."""
        s = self.state
        if s.pos == 0:
            return ""
        if st.st_size < s.pos:
            return f"truncated from {s.pos} to {st.st_size} bytes"
        if (st.st_dev, st.st_ino) == (s.dev, s.ino):
            fh.seek(s.pos - s.last)
            if _crc(fh, s.last) == (s.last_crc, 0):
                return ""
        fh.seek(0)
        return "" if _crc(fh, s.pos) == (s.crc, 0) else \
            f"rewritten (its first {s.pos} bytes changed)"


def _crc(fh: IO[bytes], size: int) -> tuple[int, int]:
    """CRC-32 of the next `size` bytes, read in pieces, and how many of them were missing."""
    crc, left = 0, size
    while left:
        chunk = fh.read(min(left, PIECE_BYTES))
        if not chunk:
            break
        crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    return crc, left


def _lines(fh: Any, start: FileMark, src: FileSource, final: bool
           ) -> Iterator[tuple[bytes | TooLong | None, FileMark]]:
    pos, crc, session = start.pos, start.crc, start.session
    # a line is never held whole past max_line: memory stays bounded by it
    readline, limit = fh.readline, src.max_line + 1
    while True:
        raw = readline(limit)
        if not raw:
            return
        ended = raw.endswith(b"\n")
        if ended or len(raw) < limit:
            if not ended and not final:
                return  # still being written
            line = raw.rstrip(b"\r\n")
            value: bytes | TooLong | None = line if line.strip() else None
            first, raw_size, raw_crc = line, len(raw), zlib.crc32(raw)
            file_crc = zlib.crc32(raw, crc)
        else:
            long = _long_line(fh, raw, crc)
            if not long.finished and not final:
                return  # still being written (read through again at the next change)
            value, first, raw_size, raw_crc, file_crc = (long, long.head, long.raw_size,
                                                         long.crc, long.file_crc)
        if session is None:
            session = session_of(src.kind, src.path, first)
            if session is None:  # the runtime names it in a line not finished yet
                return
        pos, crc = pos + raw_size, file_crc
        yield value, FileMark(start.dev, start.ino, pos, crc, raw_size, raw_crc, session)


def _long_line(fh: IO[bytes], first: bytes, file_crc: int) -> TooLong:
    """The rest of a line whose first `first` bytes already exceed max_line, read
    through in pieces: what its dead letter and its mark need, never the line."""
    sha = hashlib.sha256()
    size, crc, held = 0, 0, b""  # `held`: the last byte, not hashed until the next piece
    piece, finished, head = first, False, b""
    while piece:
        finished = piece.endswith(b"\n")
        crc, file_crc = zlib.crc32(piece, crc), zlib.crc32(piece, file_crc)
        size += len(piece)
        head += piece[:HEAD_BYTES - len(head)]
        body = held + (piece[:-1] if finished else piece)
        sha.update(body[:-1])
        held = body[-1:]
        if finished:
            break
        piece = fh.readline(PIECE_BYTES)
    cr = finished and held == b"\r"  # a CRLF line's \r is not the line's
    if not cr:
        sha.update(held)
    line_size = size - int(finished) - int(cr)
    return TooLong(head=head[:line_size], size=line_size, sha256=sha.hexdigest(),
                   raw_size=size, crc=crc, file_crc=file_crc, finished=finished)


class TableState(msgspec.Struct, kw_only=True):
    """A table's reading position: the per-session ORDER BY key of the last row sent,
    and the rowid read through (a hint) with the identity of that row."""

    rowid: int = 0
    at: list[Any] | None = None
    sessions: dict[str, list[Any]] = {}


class DbMark(msgspec.Struct, array_like=True, frozen=True):
    """A table's position after a row (`session`/`key`), or after a whole read
    (`rowid`/`at`, session None), and the stat of that read."""

    table: str
    session: str | None
    key: list[Any] | None = None
    rowid: int = -1
    at: list[Any] | None = None
    stat: list[int] | None = None
    reset: bool = False  # another database file now: forget every position first


class DbState(msgspec.Struct, kw_only=True):
    """What a database's reader keeps between polls (and in the checkpoint)."""

    dev: int = 0
    ino: int = 0
    stat: list[int] = []  # size and mtime of the database and its -wal at the last full read
    tables: dict[str, TableState] = {}

    def apply(self, m: DbMark) -> None:
        if m.reset:
            self.dev, self.ino, self.stat, self.tables = 0, 0, [], {}
        if m.table:
            t = self.tables.setdefault(m.table, TableState())
            if m.session is not None and m.key is not None:
                t.sessions[m.session] = m.key
            if m.rowid >= 0:
                t.rowid, t.at = m.rowid, m.at
        if m.stat is not None:
            self.dev, self.ino, self.stat = m.stat[0], m.stat[1], m.stat[2:]


def open_readonly(path: str, timeout: float = DB_TIMEOUT) -> sqlite3.Connection:
    """A read-only connection to the SQLite database `path`, that never writes it,
    never checkpoints its WAL and never takes a lock its writer would wait for.

    `mode=ro` opens it read-only, and SQLite then reads the `-wal` beside it as any
    reader does (a copy of the main file alone misses every change since the last
    checkpoint). A WAL reader still needs the `-shm` (the WAL index): it writes its
    read mark there. When it may not write it (another user's database, a read-only
    mount), SQLite (3.22+) builds the index in its own memory from the `-wal` on each
    read transaction: slower, still consistent with a concurrent writer (tested).
    `immutable=1` skips locking and would read torn pages while the runtime writes:
    it is used only for a database at rest (Database._read_at_rest). Raises
    sqlite3.Error."""
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None,
                           check_same_thread=False)
    conn.execute("PRAGMA query_only = 1")
    return conn


def _order_keys(order: str) -> list[str]:
    """The expressions of an ORDER BY clause (ascending only). Raises ValueError."""
    out, depth, cur = [], 0, ""
    for ch in order:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    keys = []
    for expr in (e.strip() for e in out):
        words = expr.rsplit(None, 1)
        if len(words) == 2 and words[1].upper() == "DESC":
            raise ValueError(f"ORDER BY {order!r}: only ascending orders can be followed")
        keys.append(words[0] if len(words) == 2 and words[1].upper() == "ASC" else expr)
    return keys


def _key(values: Any) -> list[Any]:
    """An ORDER BY key that compares as SQLite orders: NULL, numbers, text, blobs."""
    out: list[Any] = []
    for v in values:
        if v is None:
            out += [0, 0]
        elif isinstance(v, int | float):
            out += [1, v]
        elif isinstance(v, str):
            out += [2, v]
        else:
            out += [3, bytes(v).hex()]
    return out


def _json_value(v: Any) -> Any:
    return {"$blob_b64": base64.b64encode(v).decode()} if isinstance(v, bytes | memoryview) else v


class Database:
    """One SQLite database of a runtime, its TABLES followed from the committed state,
    read only as a regular file inside `root`, its -wal and -shm too
    (pipeline.transcripts.roots; default: the directory holding it)."""

    def __init__(self, path: str, kind: Kind, state: DbState | None = None,
                 root: str | None = None):
        self.path, self.kind = path, kind
        self.state = state if state is not None else DbState()
        self.root = root or root_of(path)

    def _stat(self) -> list[int]:
        st = os.stat(self.path)
        out = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
        try:
            wal = os.stat(self.path + "-wal")
            out += [wal.st_size, wal.st_mtime_ns]
        except FileNotFoundError:
            out += [0, 0]
        return out

    def changed(self) -> bool:
        """Whether the database or its -wal moved since the last full read. Raises OSError."""
        s = self.state
        return self._stat() != [s.dev, s.ino, *s.stat]

    def commit(self, mark: DbMark) -> None:
        self.state.apply(mark)

    def close(self) -> None:
        """Nothing stays open between reads (kept for the readers' common shape)."""

    def read(self, *, final: bool = False, limit: int = READ_LIMIT) -> Reading:
        """The rows not yet sent, per table in TABLES order, up to about `limit`
        bytes (`final` is accepted for the readers' common signature: rows are whole).
        Raises SourceError (locked, corrupt, a table missing, outside its root, not
        a regular file) or OSError."""
        try:
            real, head = confined_database(self.path, self.root)
        except Refused as e:
            raise SourceError(str(e)) from None
        stat = raw = self._stat()
        why, state = "", self.state
        if state.ino and stat[:2] != [state.dev, state.ino]:
            # another file now (deleted and created again): every row again
            why = "replaced by another file (another inode): read again from its first row"
            state = DbState()
        if time.time_ns() - max(stat[3], stat[5]) <= RACY_NS:
            stat = [*stat[:2], -1, -1, -1, -1]  # so recent a same-size write could hide
        try:
            if raw[4:] == [0, 0] and _wal_mode(head):
                out = self._read_at_rest(real, raw, state, stat, limit)
            else:
                # a connection per read: between polls nothing of this reader is open,
                # so the runtime's last close may fold and remove its WAL as usual
                conn = open_readonly(real)
                try:
                    out = self._read(conn, state, stat, limit)
                finally:
                    conn.close()
        except sqlite3.Error as e:
            raise SourceError(f"{self.path}: {_sqlite_reason(e, self.path)}") from None
        if why:
            out.rewritten = why
            out.records.insert(0, (None, None, DbMark("", None, reset=True)))
        return out

    def _read_at_rest(self, real: str, raw: list[int], state: DbState, stat: list[int],
                      limit: int) -> Reading:
        """A WAL database without its -wal: its runtime is not running (SQLite removed
        the -wal at its last close) and every change is in the main file. A read-only
        connection would create a -wal and a -shm beside it (or, in a directory it may
        not write, refuse to open it), so it is read as immutable, and kept only if no
        -wal appeared and the file did not move meanwhile (a writer that starts
        creates its -wal first and writes only there until a checkpoint). Raises
        sqlite3.Error, SourceError when it changed while read."""
        uri = f"file:{quote(real)}?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        try:
            out = self._read(conn, state, stat, limit)
        finally:
            conn.close()
        if self._stat() != raw:
            raise SourceError(f"{self.path}: written while read at rest; read again next poll")
        return out

    def _read(self, conn: sqlite3.Connection, state: DbState, stat: list[int], limit: int
              ) -> Reading:
        out = Reading([])
        size = 0
        conn.execute("BEGIN")  # one snapshot for every table, ended at once
        try:
            for table, session_expr, order in self.kind.tables:
                t = state.tables.get(table) or TableState()
                keys = _order_keys(order)
                identity = f"{session_expr}, " + ", ".join(keys)
                hint = t.rowid
                if hint:
                    row = conn.execute(f'SELECT {identity} FROM "{table}" WHERE rowid = ?',
                                       (hint,)).fetchone()
                    if row is None or [row[0], *_key(row[1:])] != t.at:
                        hint = 0  # rows deleted or renumbered: read it whole once
                cur = conn.execute(
                    f'SELECT *, {session_expr} AS __session, rowid AS __rowid, '
                    + ", ".join(f"{k} AS __k{i}" for i, k in enumerate(keys))
                    + f' FROM "{table}" WHERE rowid > ? ORDER BY {order}', (hint,))
                names = [d[0] for d in cur.description]
                ncols = len(names) - 2 - len(keys)
                top, top_at = hint, t.at if hint else None
                for row in cur:
                    session = str(row[ncols])
                    key = _key(row[ncols + 2:])
                    rowid = row[ncols + 1]
                    if rowid > top:
                        top, top_at = rowid, [session, *key]
                    done = t.sessions.get(session)
                    if done is not None and key <= done:
                        continue
                    value = _encode({"table": table, "row": {
                        names[i]: _json_value(row[i]) for i in range(ncols)}})
                    out.records.append((session, value, DbMark(table, session, key)))
                    size += len(value)
                    if size >= limit:
                        out.more = True
                        return out
                out.records.append((None, None, DbMark(table, None, rowid=top, at=top_at)))
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")
        out.records.append((None, None, DbMark("", None, stat=stat)))
        return out


def _wal_mode(head: bytes) -> bool:
    """Whether a database file's header says WAL (read and write versions 2)."""
    return head.startswith(SQLITE_MAGIC) and head[18:20] == b"\x02\x02"


def _sqlite_reason(e: sqlite3.Error, path: str) -> str:
    text = str(e)
    if "unable to open" in text and not os.path.exists(path + "-shm"):
        return (f"{text}: its -wal needs a -shm this reader can neither open nor create "
                "(run the reader as the user that runs the runtime)")
    if "locked" in text or "busy" in text:
        return f"{text} (another process holds a lock on it)"
    if "not a database" in text or "malformed" in text:
        return f"{text} (corrupt or not SQLite)"
    if text.startswith("no such table"):
        return f"{text} (not the database this runtime writes?)"
    return text
