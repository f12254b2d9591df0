"""What the readers may open: regular files inside the roots they were given.

A root is a directory named on the command line, resolved once (for a file named
there: the directory that holds it). A session file or database is read only when
its path, every link resolved, lies inside its root, and only when it is a regular
file. So a `*.jsonl` link that a process with write access to a runtime's home left
there, pointing at a private key, `/etc/shadow` or `/dev/zero`, is refused before a
byte of its target is read, whatever it points at; a link that stays inside the root
is followed.

The check and the open are one step. The file is opened from the root directory,
one component at a time, each without following a link (`O_NOFOLLOW` relative to the
directory opened before it), so a directory swapped for a link between the check and
the open makes the open fail instead of leaving the root. The last component is
opened with `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer) and
`O_NOCTTY`, after an `lstat` that keeps devices unopened, and `fstat` of the open
descriptor decides: anything but a regular file is closed unread.

SQLite opens its database and the `-wal` and `-shm` beside it by name. They are
checked the same way just before each connection (`confined_database`): the
database resolved inside its root and opened as above, its `-wal` and `-shm`
regular files when present, never links; the connection then uses the resolved
path. A swap in the moment between that check and SQLite's own open is the one window
left: Python's sqlite3 cannot pass SQLITE_OPEN_NOFOLLOW.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
               | getattr(os, "O_CLOEXEC", 0))


class Refused(ValueError):
    """A path the readers do not read: it leads outside its root, or it is not a
    regular file (a FIFO, a device, a socket, a directory)."""


def root_of(path: str) -> str:
    """The root a path named on the command line gives: the directory itself, or the
    directory that holds a file; links in it resolved (the operator named it)."""
    path = os.path.abspath(path)
    return os.path.realpath(path if os.path.isdir(path) else os.path.dirname(path))


def inside(real: str, root: str) -> bool:
    """Whether the resolved path `real` is `root` or below it."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def confine(path: str, root: str) -> str:
    """`path` with every link resolved. Raises Refused when that leaves `root`."""
    real = os.path.realpath(path)
    if not inside(real, root):
        raise Refused(f"{path}: leads to {real}, outside {root}: not read")
    return real


def _what(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _not_regular(path: str, mode: int) -> Refused:
    return Refused(f"{path}: {_what(mode)}, not a regular file: not read")


def open_regular(path: str, root: str) -> tuple[IO[bytes], str]:
    """The regular file `path` opened for reading, and its resolved path, opened
    without following any link from `root` down. Raises Refused (outside `root`, not
    a regular file, a component replaced by a link meanwhile), FileNotFoundError, OSError."""
    real = confine(path, root)
    rel = os.path.relpath(real, root)
    if rel == os.curdir:
        raise Refused(f"{path}: a directory, not a regular file: not read")
    mode = os.lstat(real).st_mode  # a device is never opened (opening one can act)
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    *dirs, name = rel.split(os.sep)
    fd = -1
    parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in dirs:
            child = os.open(part, _DIR_FLAGS, dir_fd=parent)
            os.close(parent)
            parent = child
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"{path}: became a link while opened: not read") from None
        raise
    finally:
        os.close(parent)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _not_regular(path, st.st_mode)
    return os.fdopen(fd, "rb"), real


def confined_database(path: str, root: str) -> tuple[str, bytes]:
    """The resolved path of the SQLite database `path` and its first 100 bytes (its
    header), after the checks SQLite's own opens by name need: the database a regular
    file inside `root` (open_regular), its `-wal` and `-shm`, when present, regular
    files and not links. Raises Refused, FileNotFoundError, OSError."""
    fh, real = open_regular(path, root)
    with fh:
        head = fh.read(100)
    for suffix in ("-wal", "-shm"):
        try:
            mode = os.lstat(real + suffix).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise Refused(f"{path}{suffix}: a link: the database is not read")
        if not stat.S_ISREG(mode):
            raise Refused(f"{path}{suffix}: {_what(mode)}, not a regular file: the "
                          "database is not read")
    return real, head
