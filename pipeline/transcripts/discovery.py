"""Which runtime wrote a path, and the session files and databases under a directory.

A transcript runtime is one of `RUNTIMES` (the `--runtime` names); what it reads
comes from its adapter package (adapters/<name>_transcript, through the registry):
`HOMES` (its home directories, relative to a user's HOME), `FILES` (glob patterns of
its session files, relative to a home), `DATABASES` and `TABLES` (the SQLite files in
a home, and what to read from them). A runtime whose adapter is not registered is
`missing`, with the reason: a path of it gives one clear error line, never a
traceback, and the other runtimes go on.

A path is a session file or a database (recognised by where it lives, else by its
first line or SQLite header), a runtime's home (`.claude`, `.codex`, `.gemini`,
`.local/share/opencode`, or a prefix of it such as `.local`), a directory inside a
home (only the sessions under it), or a directory holding homes (a HOME, a folder of
HOMEs: searched `SEARCH_DEPTH` levels down, not into hidden directories).

`Tree` keeps directory listings until a directory's mtime changes, so the shipper
lists again only the directories that gained or lost an entry; a listing younger than
`RACY_NS` is not trusted (an entry added in the same clock tick leaves the mtime as
it was), as git does with its index.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import msgspec

from pipeline.transcripts.roots import inside, open_regular, root_of

#: --runtime name -> provider id of its transcript adapter.
RUNTIMES: dict[str, str] = {
    "claude": "claude-transcript",
    "codex": "codex-transcript",
    "gemini": "gemini-transcript",
    "opencode": "opencode-transcript",
}
#: How many directory levels below a given directory homes are looked for.
SEARCH_DEPTH = 3
#: A listing or a stat younger than this (ns) may miss a change made in the same tick.
RACY_NS = 2_000_000_000
SQLITE_MAGIC = b"SQLite format 3\x00"

_UUID_AT_END = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                          r"[0-9a-fA-F]{12}$")
_decode = msgspec.json.Decoder().decode


class NoAdapter(Exception):
    """A transcript runtime has no adapter here (not registered, or not importable)."""


@dataclass(frozen=True)
class Kind:
    """One transcript runtime, as the readers see it (from its adapter package)."""

    name: str
    provider: str
    homes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    databases: tuple[str, ...] = ()
    tables: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Found:
    """A session file or database of `kind` at `path` (`db`: a SQLite database), read
    only inside `root` (pipeline.transcripts.roots; "": the directory holding it)."""

    kind: Kind
    path: str
    db: bool = False
    root: str = ""


@dataclass
class Located:
    """What `locate` found: the sources, and one error line per path that cannot be
    read or where no runtime's home or session file is (an empty home is no error)."""

    found: list[Found] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def load_kind(name: str) -> Kind:
    """The runtime `name` from its adapter package. Raises KeyError for a name not in
    RUNTIMES, NoAdapter when its adapter is not registered or cannot be imported."""
    from adapters.registry import packages

    provider = RUNTIMES[name]
    package = packages().get(provider)
    if package is None:
        raise NoAdapter(f"no adapter reads {name} transcripts here: provider {provider!r} "
                        "is not registered (topics/runtimes.py)")
    try:
        module = importlib.import_module(package)
    except ImportError as e:
        raise NoAdapter(f"the {provider} adapter ({package}) cannot be imported: {e}") from None
    return Kind(name=name, provider=provider,
                homes=tuple(getattr(module, "HOMES", ())),
                files=tuple(getattr(module, "FILES", ())),
                databases=tuple(getattr(module, "DATABASES", ())),
                tables=tuple(tuple(t) for t in getattr(module, "TABLES", ())))  # type: ignore[misc]


def load_kinds(only: str | None = None) -> tuple[list[Kind], dict[str, str]]:
    """(the runtimes with an adapter, {name: why not} for the others), in RUNTIMES
    order; `only` restricts both to one name."""
    kinds, missing = [], {}
    for name in RUNTIMES if only is None else (only,):
        try:
            kinds.append(load_kind(name))
        except NoAdapter as e:
            missing[name] = str(e)
    return kinds, missing


def session_of(kind: Kind, path: str, first_line: bytes | None) -> str | None:
    """The session id of the file `path` (the record key), given its first complete
    line (None while it has none). None means "not known yet": Gemini names its
    session only in the header line."""
    stem = os.path.basename(path)
    if stem.endswith(".jsonl"):
        stem = stem[: -len(".jsonl")]
    if kind.name == "codex":  # rollout-<local time>-<thread uuid>.jsonl
        m = _UUID_AT_END.search(stem)
        if m:
            return m.group()
        meta = _object(first_line)
        payload = meta.get("payload") if meta else None
        if isinstance(payload, dict) and isinstance(payload.get("id"), str):
            return payload["id"]
        return stem
    if kind.name == "gemini":  # the header names the session; the file name has 8 digits of it
        if first_line is None:
            return None
        header = _object(first_line)
        sid = header.get("sessionId") if header else None
        return sid if isinstance(sid, str) and sid else stem
    return stem  # claude: <session uuid>.jsonl


def _object(line: bytes | None) -> dict | None:
    if not line:
        return None
    try:
        obj = _decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def sniff(first_line: bytes) -> str | None:
    """The runtime whose session file starts with `first_line`, or None."""
    obj = _object(first_line)
    if obj is None:
        return None
    if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
        return "codex"
    if isinstance(obj.get("sessionId"), str) and ("projectHash" in obj or "startTime" in obj):
        return "gemini"
    if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("type"), str):
        return "claude"
    return None


class Tree:
    """Directory listings, listed again only when a directory's mtime moves."""

    def __init__(self) -> None:
        self._dirs: dict[str, tuple[int, list[tuple[str, bool]]]] = {}
        #: (root, pattern) -> (the directories the match read, with their mtimes; files)
        self._globs: dict[tuple[str, str], tuple[list[tuple[str, int]], list[str]]] = {}
        self._real: dict[str, str] = {}
        self._trace: list[tuple[str, int]] | None = None
        self.listed = 0  # listings actually read (the cost the cache saves)

    def real(self, path: str) -> str:
        """os.path.realpath(path), remembered (it costs an lstat per component)."""
        real = self._real.get(path)
        if real is None:
            real = self._real[path] = os.path.realpath(path)
        return real

    def entries(self, path: str) -> list[tuple[str, bool]]:
        """(name, is a directory) of `path`'s entries, sorted; [] when it is gone."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            self._dirs.pop(path, None)
            return []
        if self._trace is not None:
            self._trace.append((path, mtime))
        cached = self._dirs.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        try:
            with os.scandir(path) as it:
                entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
        except OSError:
            return []
        self.listed += 1
        if time.time_ns() - mtime > RACY_NS:  # else list it again next time
            self._dirs[path] = (mtime, entries)
        else:
            self._dirs.pop(path, None)
        return entries

    def glob(self, root: str, pattern: str) -> list[str]:
        """The files under `root` matching `pattern` (`*` and `?` within a name, `**`
        any number of directories; like glob, a wildcard does not match a leading dot)."""
        cached = self._globs.get((root, pattern))
        if cached is not None and self._unchanged(cached[0]):
            return cached[1]
        out: list[str] = []
        self._trace = []
        try:
            self._match(root, pattern.split("/"), out)
            self._globs[(root, pattern)] = (self._trace, out)
        finally:
            self._trace = None
        return out

    def _unchanged(self, dirs: list[tuple[str, int]]) -> bool:
        """Whether every directory a match read still has the mtime it had, and had it
        long enough that no entry can hide behind it (RACY_NS)."""
        now = time.time_ns()
        for path, mtime in dirs:
            try:
                if os.stat(path).st_mtime_ns != mtime or now - mtime <= RACY_NS:
                    return False
            except OSError:
                return False
        return True

    def _match(self, base: str, parts: list[str], out: list[str]) -> None:
        head, rest = parts[0], parts[1:]
        if head == "**":
            if rest:
                self._match(base, rest, out)
            for name, is_dir in self.entries(base):
                if is_dir and not name.startswith("."):
                    self._match(os.path.join(base, name), parts, out)
            return
        for name, is_dir in self.entries(base):
            if name.startswith(".") and not head.startswith("."):
                continue
            if not fnmatch.fnmatchcase(name, head):
                continue
            if rest and is_dir:
                self._match(os.path.join(base, name), rest, out)
            elif not rest and not is_dir:
                out.append(os.path.join(base, name))


def _parts(path: str) -> list[str]:
    return [p for p in os.path.normpath(path).split(os.sep) if p]


def homes_for(directory: str, kinds: Iterable[Kind], tree: Tree) -> list[tuple[Kind, str, str]]:
    """(kind, home, within) for each home `directory` is in, is a prefix of, or holds
    (searched SEARCH_DEPTH levels down); `within` limits the sessions to a directory
    inside the home (else it is the home itself)."""
    directory = os.path.abspath(directory)
    kinds = list(kinds)
    mine = _parts(directory)
    out: list[tuple[Kind, str, str]] = []
    for kind in kinds:
        for home in kind.homes:
            hp = _parts(home)
            for i in range(len(mine), len(hp) - 1, -1):  # the home or inside it
                if mine[i - len(hp):i] == hp:
                    root = os.sep + os.path.join(*mine[:i])
                    out.append((kind, root, directory))
                    break
            else:
                for k in range(len(hp) - 1, 0, -1):  # directory is a prefix: `.local`
                    if mine[-k:] == hp[:k]:
                        rest = os.path.join(directory, *hp[k:])
                        if os.path.isdir(rest):
                            out.append((kind, rest, rest))
                        break
    if out:
        return out
    return _search(directory, kinds, tree, SEARCH_DEPTH)


def _search(directory: str, kinds: list[Kind], tree: Tree, depth: int
            ) -> list[tuple[Kind, str, str]]:
    out = []
    for kind in kinds:
        for home in kind.homes:
            path = os.path.join(directory, home)
            if os.path.isdir(path):
                out.append((kind, path, path))
    if out or depth == 0:
        return out
    for name, is_dir in tree.entries(directory):
        if is_dir and not name.startswith("."):
            out += _search(os.path.join(directory, name), kinds, tree, depth - 1)
    return out


def sources_in(home: str, within: str, kind: Kind, tree: Tree) -> list[Found]:
    """The session files and databases of `kind` in `home`, under `within`."""
    found = [Found(kind, p) for pattern in kind.files for p in tree.glob(home, pattern)]
    found += [Found(kind, os.path.join(home, db), db=True) for db in kind.databases
              if os.path.isfile(os.path.join(home, db))]
    prefix = within.rstrip(os.sep) + os.sep
    return [f for f in found if within == home or f.path.startswith(prefix)]


def classify_file(path: str, kinds: list[Kind], missing: dict[str, str],
                  explicit: bool) -> Found:
    """The runtime of the file `path`: by the home it lives in, its database name or
    SQLite header, else its first line. `explicit` (one runtime was named): that one.
    Raises OSError when it cannot be read, NoAdapter when it is a transcript of a
    runtime without an adapter, ValueError when it is none of the runtimes' (Refused,
    a ValueError: not a regular file, or a link out of the directory holding it)."""
    fh, _ = open_regular(path, root_of(path))
    with fh:
        head = fh.readline(1 << 20)
    is_db = head.startswith(SQLITE_MAGIC)
    if explicit and kinds:
        return Found(kinds[0], path, db=is_db)
    name = os.path.basename(path)
    if is_db:
        named = [k for k in kinds if name in k.databases]
        readers = named or [k for k in kinds if k.tables]
        if len(readers) == 1:
            return Found(readers[0], path, db=True)
    for kind in kinds:
        if not is_db and _under_home(path, kind):
            return Found(kind, path)
    runtime = None if is_db else sniff(head.rstrip(b"\r\n"))
    if runtime is not None:
        for kind in kinds:
            if kind.name == runtime:
                return Found(kind, path)
        if runtime in missing:
            raise NoAdapter(f"{path}: a {runtime} transcript, but {missing[runtime]}")
    what = "a SQLite database none of the runtimes reads" if is_db else \
        "not a session file of any runtime"
    names = ", ".join(k.name for k in kinds) or "none"
    raise ValueError(f"{path}: {what} (runtimes with an adapter: {names})")


def _under_home(path: str, kind: Kind) -> bool:
    """Whether `path` matches one of `kind`'s FILES patterns below one of its homes."""
    parts = _parts(os.path.abspath(path))
    for home in kind.homes:
        hp = _parts(home)
        for i in range(len(parts) - 1, len(hp) - 1, -1):
            if parts[i - len(hp):i] == hp:
                rel = "/".join(parts[i:])
                if any(fnmatch.fnmatchcase(rel, p) for p in kind.files):  # `*` spans `/`
                    return True
    return False


def locate(paths: Iterable[str], kinds: list[Kind], missing: dict[str, str], *,
           explicit: bool = False, tree: Tree | None = None) -> Located:
    """The sources under `paths`, deduplicated, in path order; one error line for each
    path that cannot be read or holds nothing a runtime wrote."""
    tree = tree or Tree()
    out = Located()
    seen: set[str] = set()

    def add(items: Iterable[Found], root: str) -> None:
        for f in items:
            real = tree.real(f.path)
            if real not in seen:
                seen.add(real)
                out.found.append(replace(f, root=root))

    for path in paths:
        if os.path.isdir(path):
            root = root_of(path)
            homes = homes_for(path, kinds, tree)
            for kind, home, within in homes:
                # a home found in `path` that is a link out of it is not searched
                real = os.path.realpath(home)
                if within == home and not inside(real, root):
                    out.errors.append(f"{home}: leads to {real}, outside {root}: not read")
                    continue
                add(sources_in(home, within, kind, tree), root)
            if not homes:
                out.errors.append(_nothing_under(path, kinds, missing))
            continue
        try:
            add([classify_file(path, kinds, missing, explicit)], root_of(path))
        except OSError as e:
            out.errors.append(f"cannot read {path}: {e.strerror or e}")
        except (NoAdapter, ValueError) as e:
            out.errors.append(str(e))
    out.found.sort(key=lambda f: (f.kind.provider, f.path))
    return out


def _nothing_under(path: str, kinds: list[Kind], missing: dict[str, str]) -> str:
    homes = ", ".join(h for k in kinds for h in k.homes) or "none"
    line = f"{path}: no runtime's home ({homes}) in it, above it or {SEARCH_DEPTH} levels below"
    if missing:
        line += "; without an adapter here: " + "; ".join(missing.values())
    return line
