"""The conversation core's lifecycle of items and turns: what every runtime does the same
way, so that an adapter says what its runtime said and the core decides what to emit.

An adapter keeps what is truly its runtime's (which native ids are open, what a tool
call's input was, how a native status reads) and calls these with an `At`, the place
its events go (canonical thread, turn, item and parent ids, providerRefs):

* `start_item`: item.started, the item's streams opened (so that its completion can
  take them back whole);
* `delta`: a text or output chunk the runtime streamed: its content.delta, counted
  and (where the item must deliver it whole later) spooled ("never text twice");
* `snapshot`: a growing snapshot of a stream: only what is past what it carried;
* `rest`: a stream's final text less what its deltas carried, as one synthetic
  delta (a delta, then the final text: never twice);
* `taken`: an item's stream read back whole from the spool, as the completed item's
  `text` or `output` fields (`outputTruncated` past the cap), and closed;
* `complete_item`: item.completed, every stream of the item closed first (a later
  line that names the item again opens it afresh);
* `close_item`: the synthetic item.completed of an item its turn (message, session)
  left open, with what its streams carried;
* `end_turn`: turn.completed, and `closed_turns`: the memory of the last turns
  ended, so that a late message never reopens one.

The streams themselves (lengths and digests in the session, bytes in the spool) are
the Emitter's ("Streams", adapters.core.emitter).
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import Struct, UnsetType

from adapters.core.emitter import UNSET, Emitter
from adapters.core.spool import whole_fields
from topics.canonical import (
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    ProviderRefs,
    TurnCompleted,
    TurnCompletedPayload,
    _Event,
)

#: How many ended turns `closed_turns` remembers by default.
CLOSED_KEPT: Final = 16
# the names every delta reads, as C statics compiled (an imported name of an uncompiled
# module is a dict lookup at each use)
_ContentDelta: Final = ContentDelta
_ContentDeltaPayload: Final = ContentDeltaPayload


class At:
    """Where an event goes: its canonical thread, turn, item, parent and request ids
    (UNSET where none) and its providerRefs."""

    __slots__ = ("thread", "turn", "item", "parent", "refs", "request")

    def __init__(self, thread: str | UnsetType = UNSET, turn: str | UnsetType = UNSET,
                 item: str | UnsetType = UNSET, parent: str | UnsetType = UNSET,
                 refs: ProviderRefs | UnsetType = UNSET, request: str | UnsetType = UNSET):
        self.thread = thread
        self.turn = turn
        self.item = item
        self.parent = parent
        self.refs = refs
        self.request = request

    def emit(self, out: Emitter, cls: type[_Event], payload: Struct,
             synthetic: bool = False) -> None:
        out.emit(cls, payload, synthetic=synthetic, thread=self.thread, turn=self.turn,
                 item=self.item, request=self.request, parent=self.parent, refs=self.refs)

    @property
    def item_id(self) -> str:
        """The item's canonical id (an At of an item has one)."""
        item = self.item
        assert isinstance(item, str)
        return item


def start_item(out: Emitter, at: At, payload: ItemPayload, synthetic: bool = False,
               streams: tuple[str, ...] = ()) -> None:
    """item.started, then `streams` of the item opened (spooled): the ones its
    completion takes back whole even when no delta came."""
    out.emit(ItemStarted, payload, synthetic=synthetic, thread=at.thread, turn=at.turn,
             item=at.item, request=at.request, parent=at.parent, refs=at.refs)
    for stream in streams:
        out.append(at.item_id, stream, "")


def _delta_payload(kind: str, text: str, content: int | None,
                   summary: int | None) -> ContentDeltaPayload:
    if content is None and summary is None:  # the usual delta: built with two fields only
        return _ContentDeltaPayload(streamKind=kind, delta=text)  # type: ignore[arg-type]
    return _ContentDeltaPayload(streamKind=kind, delta=text,  # type: ignore[arg-type]
                               contentIndex=UNSET if content is None else content,
                               summaryIndex=UNSET if summary is None else summary)


def emit_delta(out: Emitter, at: At, kind: str, text: str, synthetic: bool = False,
               content: int | None = None, summary: int | None = None) -> None:
    """A content.delta of `kind` (a streamKind) carrying `text` on the item `at` names,
    nothing counted on its stream (the caller does, or `delta` below)."""
    at.emit(out, _ContentDelta, _delta_payload(kind, text, content, summary), synthetic)


def delta(out: Emitter, at: At, kind: str, text: str, stream: str | None = None,
          content: int | None = None, summary: int | None = None, synthetic: bool = False,
          spool: bool = True) -> None:
    """A chunk of `kind` (a streamKind) the runtime streamed on the item: its
    content.delta (none for an empty chunk), and the chunk counted on the item's
    `stream` (`kind` when None), spooled unless `spool` is False (the stream's first
    chunk decides). An empty chunk opens the stream."""
    item = at.item
    assert isinstance(item, str)
    if text:
        out.emit(_ContentDelta, _delta_payload(kind, text, content, summary), synthetic=synthetic,
                 thread=at.thread, turn=at.turn, item=item, parent=at.parent, refs=at.refs)
    out.append(item, stream or kind, text, spool)


def snapshot(out: Emitter, at: At, kind: str, text: str, stream: str | None = None) -> None:
    """A snapshot of the stream's whole text so far (a command's aggregated output):
    what is past the length the stream carried goes out as a delta. A snapshot that
    does not extend what was carried still sends only the characters past that length
    (emitted text is never retracted) and becomes what the stream holds."""
    item, key = at.item_id, stream or kind
    carried = max(out.streamed(item, key), 0)
    if len(text) <= carried:
        return
    part = text[carried:]
    emit_delta(out, at, kind, part)
    if out.extends(item, key, text):
        out.append(item, key, part)
    else:
        out.reset(item, key, text)


def rest(out: Emitter, at: At, kind: str, final: str, stream: str | None = None,
         content: int | None = None, summary: int | None = None) -> None:
    """The item's final text on `stream`, less what its deltas carried, as one synthetic
    delta (nothing when they carried it all, or something else: never twice)."""
    part = out.rest(at.item_id, stream or kind, final)
    if part:
        emit_delta(out, at, kind, part, True, content, summary)


def taken(out: Emitter, item: str, stream: str, field: str = "output") -> dict[str, Any]:
    """ItemPayload `field` (output or text) of the item's stream read back whole (with
    `<field>Truncated` and `<field>Length` when the cap cut it), and the stream closed;
    "" when no stream was open."""
    whole = out.take(item, stream)
    return whole_fields(whole, field) if whole is not None else {field: ""}


def complete_item(out: Emitter, at: At, payload: ItemPayload, synthetic: bool = False) -> None:
    """item.completed. The item's streams are closed first: what they carried is either
    in the payload (taken) or not wanted, and a later line of the same record that
    names the item again opens it afresh."""
    item = at.item
    assert isinstance(item, str)
    out.drop_item(item)
    out.emit(ItemCompleted, payload, synthetic=synthetic, thread=at.thread, turn=at.turn,
             item=item, request=at.request, parent=at.parent, refs=at.refs)


def close_item(out: Emitter, at: At, item_type: str, status: str, detail: str,
               text_stream: str | None = None, output_stream: str | None = None,
               **fields: Any) -> None:
    """The synthetic item.completed of an item left open when its turn (message,
    session) ended: `status` and `detail` say why, the streams named are taken into
    the payload's `text` and `output` (what the item streamed before it was cut off),
    `fields` are the rest of the payload."""
    item = at.item_id
    if text_stream is not None:
        fields.update(taken(out, item, text_stream, "text"))
    if output_stream is not None:
        fields.update(taken(out, item, output_stream, "output"))
    complete_item(out, at, ItemPayload(itemType=item_type, status=status,  # type: ignore[arg-type]
                                       detail=detail, **fields), True)


def end_turn(out: Emitter, at: At, payload: TurnCompletedPayload, synthetic: bool = False
             ) -> None:
    """turn.completed (what its streams held back goes out first: the Emitter's "Held
    back"). The adapter has closed the items the turn left open (close_item)."""
    at.emit(out, TurnCompleted, payload, synthetic)


def closed_turns(closed: tuple[str, ...], turn: str, kept: int = CLOSED_KEPT
                 ) -> tuple[str, ...]:
    """The last `kept` ended turns, `turn` the newest: a late message that names one
    is dropped, never reopens it (the memory is bounded: the state stays small)."""
    return (*closed, turn)[-kept:]

