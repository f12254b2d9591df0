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
    #: This shipper's id: its records' header names it, so a recovery never mistakes
    #: another shipper's records (other hosts have the same paths) for its own.
    shipper: str = ""
    batch: int = 0
    files: dict[str, FileState] = {}
    dbs: dict[str, DbState] = {}
    flying: Flying | None = None


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(State).decode


class Checkpoint:
    """The checkpoint file at `path`, locked for this process until `close`."""

    def __init__(self, path: str):
        self.path = path
        self._lock: BinaryIO | None = None
        self.state = State()

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
                self.state = _decode(fh.read())
        except FileNotFoundError:
            self.state = State()
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            self.close()
            raise CheckpointError(f"{self.path}: not a shipper checkpoint ({e}); move it "
                                  "away to ship everything again") from None
        if not self.state.shipper:
            self.state.shipper = secrets.token_hex(8)
        return self

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def save(self) -> None:
        """Replace the file with the current state, atomically and durably. Raises OSError."""
        tmp = f"{self.path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(_encode(self.state))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> Checkpoint:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(OSError):
            self.close()
