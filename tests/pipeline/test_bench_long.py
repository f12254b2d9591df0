"""The long-session workload (`canonflow bench --long`): its sessions are valid native
streams that translate to the intended texts, and a run through the broker is checked.
(The timings themselves are never asserted: this machine is shared and noisy.)"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from pipeline.tools.bench_kafka import BenchError
from pipeline.tools.bench_long import (
    LONG_PROVIDERS,
    check_session,
    parse_sizes,
    replay_session,
    run_long_bench,
)
from pipeline.tools.bench_long_sessions import RECORD_BUDGET, WHOLE_MAX, long_session
from pipeline.tools.bench_report import format_long_report

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
SMALL = 16 * 1024


@pytest.mark.parametrize("provider", LONG_PROVIDERS)
def test_a_long_session_replays_without_dead_letters_to_the_intended_texts(provider):
    session = long_session(CAPTURED, provider, SMALL)
    assert len(session.answer) == SMALL and len(session.output) == SMALL
    assert session.answer_items == 1
    assert session.output_streamed == (provider == "codex")
    # the added deltas are 1 KiB each, one native message per line
    assert len(session.lines) > SMALL // 1024
    replayed = replay_session(session)  # raises on a dead letter
    check_session(session, replayed)  # raises unless the deltas join to the answer
    assert replayed.chat > 0


@pytest.mark.parametrize("provider", ["codex", "claude", "opencode"])
def test_an_answer_longer_than_a_whole_message_carries_continues_in_more_items(provider):
    # the runtime re-sends these texts whole; past WHOLE_MAX (so that no native record
    # passes 1 MiB and is dead-lettered) the answer goes on in a further item
    size = WHOLE_MAX + 4096
    session = long_session(CAPTURED, provider, size)
    assert session.answer_items == 2 and len(session.answer) == size
    assert max(len(ln.data) for ln in session.lines) <= RECORD_BUDGET
    check_session(session, replay_session(session))
    if provider == "codex":  # streamed: all of it, aggregatedOutput null past WHOLE_MAX
        assert len(session.output) == size
    else:  # whole, cut to what one record holds
        assert session.output.startswith("fixture-ok") and len(session.output) <= WHOLE_MAX


def test_an_answer_that_does_not_join_is_a_wrong_answer():
    session = long_session(CAPTURED, "acp", SMALL)
    replayed = replay_session(session)
    with pytest.raises(BenchError):
        check_session(msgspec.structs.replace(session, answer=session.answer + "x"), replayed)
    with pytest.raises(BenchError):
        check_session(msgspec.structs.replace(session, output=session.output[1:]), replayed)


def test_sizes_are_kib_or_mib():
    assert parse_sizes("64k,1m,8m") == [64 * 1024, 1024 * 1024, 8 * 1024 * 1024]
    with pytest.raises(ValueError):
        parse_sizes("64x")
    with pytest.raises(ValueError):
        parse_sizes("")


@pytest.mark.broker
def test_a_long_session_runs_through_the_worker_and_matches_the_replay(settings):
    result = run_long_bench(settings, sizes=[SMALL], providers=["codex"], fixtures=CAPTURED,
                            timeout=120, say=lambda s: None)
    (row,) = result["sessions"]
    assert row["verified"] is True  # the canonical events equal the offline replay
    assert row["provider"] == "codex" and row["size"] == "16k"
    for key in ("native_bytes", "changelog_bytes", "canonical_bytes", "chat_bytes",
                "largest_table_value", "events", "chat_records"):
        assert row[key] > 0, key
    for key in ("changelog_per_native", "canonical_per_native", "chat_per_native",
                "worker_peak_rss_mb", "seconds", "largest_table_key"):
        assert key in row, key
    assert row["largest_table_value"] <= row["changelog_bytes"]
    text = format_long_report(result)
    assert "codex 16k" in text and "<= 1.5x" in text and "<= 64 KiB" in text
    json.dumps(result)  # the --json output


@pytest.mark.broker
def test_a_long_session_under_a_lower_item_cap_still_matches_the_replay(settings):
    """The bench's offline replay cuts items at the worker's cap (CANONFLOW_ITEM_CAP):
    before, any cap below a session's item made the bench fail its own check."""
    result = run_long_bench(settings.replace(item_cap=4096), sizes=[SMALL], providers=["acp"],
                            fixtures=CAPTURED, timeout=120, say=lambda s: None)
    (row,) = result["sessions"]
    assert row["verified"] is True and result["workload"]["item_cap"] == 4096
    assert "items capped at 4,096 bytes" in format_long_report(result)
