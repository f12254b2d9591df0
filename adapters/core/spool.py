"""Where the conversation core keeps the text of the streams it must deliver whole
later: the `Spool` protocol, the in-memory one (replay, import, tests), and `Whole`, a
stream read back from it."""

from __future__ import annotations

from typing import Any, Protocol

from adapters.core import sha256


class Spool(Protocol):
    """Where the conversation core keeps the bytes of the streams it must deliver whole
    later (pending tool output, text a runtime never sends whole): chunks keyed by
    (session, stream key, chunk number), each written once, dropped when the item
    completes. The worker's is a table co-partitioned with the sessions
    (`items.<provider>`); replay and tests use `MemorySpool`. Reads see
    every write made before them."""

    def get(self, session: str, key: str, n: int) -> str | None: ...

    def put(self, session: str, key: str, n: int, data: str | None) -> None:
        """Write chunk n (None deletes it)."""
        ...


class Whole:
    """A stream's text read back from the spool (Emitter.whole, Emitter.take): `text`,
    its full length in characters, whether the cap cut its middle out, and then the
    SHA-256 midstate of the whole stream's UTF-8 bytes (`sha`, adapters.core.sha256)
    after its `size` bytes (None: not known, as for text joined from several streams)."""

    __slots__ = ("text", "length", "truncated", "sha", "size")

    def __init__(self, text: str, length: int, truncated: bool, sha: bytes | None = None,
                 size: int = 0):
        self.text = text
        self.length = length
        self.truncated = truncated
        self.sha = sha
        self.size = size

    def plus(self, text: str) -> Whole:
        """This stream followed by `text` (said whole after it)."""
        if self.sha is None:
            return Whole(self.text + text, self.length + len(text), self.truncated)
        data = text.encode("utf-8", "surrogatepass")
        return Whole(self.text + text, self.length + len(text), self.truncated,
                     sha256.extend(self.sha, self.size, data), self.size + len(data))

    @property
    def sha256(self) -> str | None:
        """The whole stream's SHA-256, lowercase hex (None: not known)."""
        return None if self.sha is None else sha256.hexdigest(self.sha, self.size)


def whole_fields(whole: Whole | None, field: str = "output") -> dict[str, Any]:
    """ItemPayload fields for a stream read back whole: `output` (or `text`, `diff`)
    and, when the cap cut it, `outputTruncated`, `outputLength` and `outputSha256`
    (`textTruncated`, ...; the digest where it is known); nothing for None."""
    if whole is None:
        return {}
    if not whole.truncated:
        return {field: whole.text}
    fields: dict[str, Any] = {field: whole.text, field + "Truncated": True,
                              field + "Length": whole.length}
    digest = whole.sha256
    if digest is not None:
        fields[field + "Sha256"] = digest
    return fields


class MemorySpool:
    """A Spool in a dict: replay, import and the tests. `len()` is its chunk count."""

    def __init__(self) -> None:
        self.chunks: dict[tuple[str, str, int], str] = {}

    def get(self, session: str, key: str, n: int) -> str | None:
        return self.chunks.get((session, key, n))

    def put(self, session: str, key: str, n: int, data: str | None) -> None:
        if data is None:
            self.chunks.pop((session, key, n), None)
        else:
            self.chunks[(session, key, n)] = data

    def drop_session(self, session: str) -> None:
        """Forget `session`'s chunks (an import done with it; its items stay open)."""
        for key in [k for k in self.chunks if k[0] == session]:
            del self.chunks[key]

    def __len__(self) -> int:
        return len(self.chunks)
