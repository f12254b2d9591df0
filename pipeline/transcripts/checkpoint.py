"""The shipper's checkpoint: where each source was read to, and the batch in flight.

One JSON file, replaced atomically (written beside it, flushed to disk, renamed over
it, the directory flushed), so a crash leaves the old checkpoint or the new one,
never half of one. A lock file beside it (`<checkpoint>.lock`, flock) keeps a second
shipper off the same checkpoint.

Before a batch is sent, the checkpoint records it as in flight: its number, each
record's source and mark, and for every partition of the raw topics an offset below
which none of its records can be (the partition's end when the shipper started, or
just past its last delivered record). After a crash, the shipper reads those
partitions from there, finds which records of the batch were delivered (their
`canonflow-ship` header), and commits exactly those marks: a restarted shipper sends
nothing twice and skips nothing. The next batch's checkpoint (or the last one, when
the shipper is idle or stops) records the delivered batch's positions.

A save writes what changed since the last one, not the whole state: the positions moved
(the marks applied, the sources forgotten) and the batch in flight, one line appended to
a journal beside the file (`<checkpoint>.journal`) and flushed to disk. A shipper on a
machine with years of sessions (tens of thousands of files, every one in the state)
wrote all of them at every batch, a cost growing with the history times the time
shipped. Once the journal holds as many bytes as the state (at least JOURNAL_MIN), the
state is written whole as before and the journal emptied; both carry a generation, so a
crash between the two leaves lines of the generation before, which are skipped. A line
a crash cut short ends the journal: what it held was never acknowledged.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from typing import Any, BinaryIO

import msgspec

from pipeline.transcripts.sources import DbMark, DbState, FileMark, FileState

VERSION = 1


class CheckpointError(Exception):
    """The checkpoint cannot be read or is held by another shipper."""


class Flying(msgspec.Struct, kw_only=True):
    """The batch in flight: `records[i]` = (source path, mark) of the record sent with
    header value `<shipper>:<batch>:<i>`; `since` = {topic: {partition: offset}}."""

    batch: int
    since: dict[str, dict[int, int]]
    files: list[tuple[int, str, FileMark]] = []
    dbs: list[tuple[int, str, DbMark]] = []


class State(msgspec.Struct, kw_only=True):
    version: int = VERSION
    #: Which journal lines apply to it: those of its generation (one more at each
    #: rewrite of the whole file).
    generation: int = 0
    #: This shipper's id: its records' header names it, so a recovery never mistakes
    #: another shipper's records (other hosts have the same paths) for its own.
    shipper: str = ""
    batch: int = 0
    files: dict[str, FileState] = {}
    dbs: dict[str, DbState] = {}
    flying: Flying | None = None


class Change(msgspec.Struct, kw_only=True):
    """One save's journal line: the marks applied to each source since the save before
    (None: the source was forgotten), in order, and the batch counters as they are."""

    generation: int
    files: list[tuple[str, FileMark | None]] = []
    dbs: list[tuple[str, DbMark | None]] = []
    batch: int
    flying: Flying | None = None


#: The journal is folded into the file once it holds as many bytes as the state, and
#: at least this many (a small state is not rewritten at every few saves).
JOURNAL_MIN = 1 << 20

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(State).decode
_decode_change = msgspec.json.Decoder(Change).decode


class Checkpoint:
    """The checkpoint file at `path`, locked for this process until `close`."""

    def __init__(self, path: str):
        self.path = path
        self.journal_path = path + ".journal"
        self._lock: BinaryIO | None = None
        self._journal: BinaryIO | None = None
        self._journal_bytes = 0
        self._state_bytes = 0  # the size of the file when last written whole
        self._whole_next = True  # no file yet (or not one to append to): write it whole
        self._files: list[tuple[str, FileMark | None]] = []  # changes since the last save
        self._dbs: list[tuple[str, DbMark | None]] = []
        self.state = State()

    # -- changing the positions (what a save writes) ---------------------------------

    def apply_file(self, path: str, mark: FileMark) -> None:
        self.state.files.setdefault(path, FileState()).apply(mark)
        self._files.append((path, mark))

    def apply_db(self, path: str, mark: DbMark) -> None:
        self.state.dbs.setdefault(path, DbState()).apply(mark)
        self._dbs.append((path, mark))

    def forget_file(self, path: str) -> None:
        if self.state.files.pop(path, None) is not None:
            self._files.append((path, None))

    def forget_db(self, path: str) -> None:
        if self.state.dbs.pop(path, None) is not None:
            self._dbs.append((path, None))

    def open(self) -> Checkpoint:
        """Take the lock and read the file (a new state when there is none). Raises
        CheckpointError when another process holds it or the file cannot be decoded."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        lock = open(self.path + ".lock", "a+b")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise CheckpointError(f"{self.path}: another shipper holds it ({self.path}.lock)") \
                from None
        self._lock = lock
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
            self.state = _decode(data)
            self._state_bytes = len(data)
            self._whole_next = False
        except FileNotFoundError:
            self.state = State()
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            self.close()
            raise CheckpointError(f"{self.path}: not a shipper checkpoint ({e}); move it "
                                  "away to ship everything again") from None
        try:
            self._replay_journal()
        except OSError:
            self.close()
            raise
        if not self.state.shipper:
            self.state.shipper = secrets.token_hex(8)
            self._whole_next = True  # the new id is in no line: the file takes it
        return self

    def _replay_journal(self) -> None:
        """Apply the journal to the state read; a line a crash cut short is cut off, so
        what is appended after it starts clean."""
        try:
            with open(self.journal_path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return
        end = _replay(self.state, data)
        if end < len(data):
            with open(self.journal_path, "r+b") as fh:
                fh.truncate(end)
                fh.flush()
                os.fsync(fh.fileno())
        self._journal_bytes = end

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def save(self, *, whole: bool = False) -> None:
        """Make what changed since the last save durable: a line appended to the journal,
        or the state written whole (`whole`, or once the journal is as large as the
        state). Raises OSError (the last save stands)."""
        if (whole or self._whole_next
                or self._journal_bytes >= max(self._state_bytes, JOURNAL_MIN)):
            self._rewrite()
            return
        st = self.state
        line = _encode(Change(generation=st.generation, files=self._files, dbs=self._dbs,
                              batch=st.batch, flying=st.flying)) + b"\n"
        try:
            if self._journal is None:
                self._journal = open(self.journal_path, "ab")
                _sync_dir(self.journal_path)  # a journal made now is found after a crash
            self._journal.write(line)
            self._journal.flush()
            os.fsync(self._journal.fileno())
        except OSError:
            # the line may be in the journal in part: the next save writes the state
            # whole (and empties the journal), so nothing is appended after a torn line
            self._whole_next = True
            raise
        self._journal_bytes += len(line)
        self._files, self._dbs = [], []

    def _rewrite(self) -> None:
        """Replace the file with the whole state, atomically and durably (written beside
        it, flushed, renamed over it, the directory flushed), then empty the journal: a
        crash in between leaves lines of the generation before, which open() ignores."""
        st = self.state
        data = _encode(msgspec.structs.replace(st, generation=st.generation + 1))
        tmp = f"{self.path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        # from here the file is the state: what follows only tidies up (a journal left
        # with lines of the generation before is harmless: they are skipped)
        st.generation += 1
        self._state_bytes, self._whole_next = len(data), False
        self._files, self._dbs = [], []
        _sync_dir(self.path)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._journal_bytes or os.path.exists(self.journal_path):
            with open(self.journal_path, "r+b") as fh:  # emptied (the next save appends)
                fh.truncate(0)
                fh.flush()
                os.fsync(fh.fileno())
        self._journal_bytes = 0

    def __enter__(self) -> Checkpoint:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(OSError):
            self.close()


def read_state(path: str) -> State:
    """The state a shipper would open at `path` (its file, then its journal), read
    without taking the lock or changing anything: for the operator and the tests.
    Raises OSError, msgspec errors."""
    with open(path, "rb") as fh:
        state = _decode(fh.read())
    try:
        with open(path + ".journal", "rb") as fh:
            _replay(state, fh.read())
    except FileNotFoundError:
        pass
    return state


def _replay(st: State, data: bytes) -> int:
    """Apply the journal lines `data` of `st`'s generation to it, in order, up to the
    first line a crash cut short (lines of the generation before are skipped: the file
    was rewritten after them); the offset where the whole lines end."""
    end = 0
    while end < len(data):
        stop = data.find(b"\n", end)
        if stop < 0:
            break  # a line not finished: its save never returned
        try:
            change = _decode_change(data[end:stop])
        except (msgspec.DecodeError, msgspec.ValidationError):
            break
        end = stop + 1
        if change.generation != st.generation:
            continue  # the generation before: the file was rewritten after it
        for path, fmark in change.files:
            if fmark is None:
                st.files.pop(path, None)
            else:
                st.files.setdefault(path, FileState()).apply(fmark)
        for path, dmark in change.dbs:
            if dmark is None:
                st.dbs.pop(path, None)
            else:
                st.dbs.setdefault(path, DbState()).apply(dmark)
        st.batch, st.flying = change.batch, change.flying
    return end


def _sync_dir(path: str) -> None:
    """Flush the directory holding `path` (a rename or a new file in it) to disk."""
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
