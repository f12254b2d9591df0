"""The conversation core's item and turn lifecycle (adapters.core.lifecycle): what it
emits for what an adapter says the runtime said."""

from __future__ import annotations

from typing import Any

from adapters import MemorySpool
from adapters.core.emitter import Emitter
from adapters.core.lifecycle import (
    At,
    close_item,
    closed_turns,
    complete_item,
    delta,
    end_turn,
    rest,
    snapshot,
    start_item,
    taken,
)
from topics.canonical import ItemPayload, TurnCompletedPayload


def emitter(cap: int = 1 << 20) -> Emitter:
    return Emitter("codex", "s1", 0, 0, False, "test", 0, None, MemorySpool(), cap)


AT = At("thr", "trn", "itm")


def said(out: Emitter) -> list[tuple[str, Any]]:
    """(event type, its delta or payload status) of what the Emitter collected."""
    return [(type(e).__struct_config__.tag, getattr(e.payload, "delta", None) or getattr(e.payload, "status", None))
            for e in out.events]


def test_deltas_then_a_final_text_give_only_the_missing_rest() -> None:
    out = emitter()
    start_item(out, AT, ItemPayload(itemType="assistant_message", status="inProgress"))
    delta(out, AT, "assistant_text", "Hel")
    delta(out, AT, "assistant_text", "")  # an empty chunk says nothing
    rest(out, AT, "assistant_text", "Hello")
    rest(out, AT, "assistant_text", "Goodbye")  # not an extension: never twice
    assert said(out) == [("item.started", "inProgress"), ("content.delta", "Hel"),
                         ("content.delta", "lo")]
    assert out.events[-1].synthetic is True
    assert taken(out, "itm", "assistant_text", "text") == {"text": "Hel"}


def test_a_snapshot_sends_what_is_past_the_length_carried_and_rebases_when_it_diverges() -> None:
    out = emitter()
    snapshot(out, AT, "command_output", "ab")
    snapshot(out, AT, "command_output", "abcd")
    snapshot(out, AT, "command_output", "ab")  # shorter: nothing
    snapshot(out, AT, "command_output", "xyzwv")  # diverged: its characters past 4
    assert [d for _, d in said(out)] == ["ab", "cd", "v"]
    assert out.whole("itm", "command_output").text == "xyzwv"  # type: ignore[union-attr]


def test_an_item_left_open_completes_with_what_its_stream_carried() -> None:
    out = emitter(cap=1024)  # five chunks of 16 Ki characters: past the cap
    start_item(out, AT, ItemPayload(itemType="command_execution", status="inProgress"),
               streams=("out",))
    delta(out, AT, "command_output", "x" * (5 << 14), "out")
    close_item(out, AT, "command_execution", "failed", "the turn ended", output_stream="out",
               isError=True)
    done = out.events[-1].payload
    assert (done.status, done.detail, done.isError) == ("failed", "the turn ended", True)
    assert done.outputTruncated is True and done.outputLength == 5 << 14
    assert out.events[-1].synthetic is True
    assert out.streams == {}  # closed with its item


def test_completing_an_item_closes_its_streams_and_a_stream_never_opened_reads_empty() -> None:
    out = emitter()
    delta(out, AT, "assistant_text", "hi")
    complete_item(out, AT, ItemPayload(itemType="assistant_message", status="completed"))
    assert out.streams == {}
    assert taken(out, "itm", "assistant_text", "text") == {"text": ""}


def test_a_turn_ends_and_is_remembered_among_the_last_few() -> None:
    out = emitter()
    end_turn(out, At("thr", "trn"), TurnCompletedPayload(state="completed"), synthetic=True)
    assert said(out) == [("turn.completed", None)] and out.events[0].synthetic is True
    closed: tuple[str, ...] = ()
    for n in range(5):
        closed = closed_turns(closed, f"t{n}", kept=3)
    assert closed == ("t2", "t3", "t4")
