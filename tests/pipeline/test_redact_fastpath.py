"""Issue 24 (and 25, finding 5): redaction is cheap without being weaker.

The fast path (a literal prefilter over the encoded event, then one combined pass per
string, the matching rules only, the envelope skipped) must redact exactly what the
slow reference path does (tests/pipeline/redact_reference.py: every rule on every
string of every event), on the captures and on generated secrets; and the prefilter
must be unable to miss a match: every match of a rule holds one of its literals."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import msgspec
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.core.hold import _KEYWORDS, _STARTS, _TOKEN_PREFIXES
from pipeline.privacy.redact import (
    ENVELOPE_FIELDS,
    RULES,
    SECRET_MEMBERS,
    Redactor,
    hold_point,
    required_literals,
    secret_member,
)
from pipeline.tools.replay import Replayer
from tests.pipeline.redact_reference import (
    reference_apply,
    reference_hold_point,
    reference_text,
)
from tests.pipeline.secret_corpus import CORPUS
from topics.canonical import decode_event, encode_event

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
R = Redactor.from_env({})


def _captures() -> list[tuple[str, list[bytes]]]:
    """(provider, the raw lines) of each capture, and its events as published unredacted."""
    out = []
    for path in sorted(CAPTURED.glob("*/*.capture.jsonl")):
        out.append((path.parent.name, [x for x in path.read_bytes().splitlines() if x.strip()]))
    return out


def _events() -> list[bytes]:
    events = []
    for provider, lines in _captures():
        rep = Replayer(provider)
        for i, raw in enumerate(lines, 1):
            events += [encode_event(e) for e in rep.feed("s", i, raw, "capture")[0]]
    return events


EVENTS = _events()
SECRETS = [s for c in CORPUS for s in c.secrets]
TEXTS = [c.text for c in CORPUS]


def _same(encoded: bytes) -> None:
    fast, slow = R.apply(encoded), reference_apply(R, encoded)
    assert fast == slow
    if slow is encoded:
        assert fast is encoded  # unchanged events are published as they came


def test_the_fast_path_is_the_reference_on_every_captured_event():
    assert len(EVENTS) > 500
    for e in EVENTS:
        _same(e)


def _strings(doc: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(doc, str):
        return [path]
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _strings(v, path + (k,))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _strings(v, path + (i,))]
    return []


def _put(doc: Any, path: tuple, value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


def test_the_fast_path_is_the_reference_on_captured_events_given_secrets():
    n = 0
    for i, e in enumerate(EVENTS):
        doc = json.loads(e)
        paths = [p for p in _strings(doc) if p[0] not in ENVELOPE_FIELDS]
        if not paths:
            continue
        text = TEXTS[i % len(TEXTS)]
        _put(doc, paths[i % len(paths)], "before " + text + " after")
        if isinstance(doc.get("payload"), dict):
            doc["payload"][SECRET_MEMBERS[i % len(SECRET_MEMBERS)]] = i
        encoded = msgspec.json.encode(doc)
        _same(encoded)
        n += R.apply(encoded) != encoded
    assert n > 500


_piece = st.one_of(st.sampled_from(TEXTS), st.sampled_from(SECRETS),
                   st.sampled_from(sorted({lit for r in R._rules for lit in r.literals or ()})),
                   st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
                   st.text(alphabet=" \t\r\n\"'\\=:;,&@/-_.$+", max_size=4))
_text = st.lists(_piece, max_size=8).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(EVENTS), _text, _text, st.sampled_from(SECRET_MEMBERS + ("name",)), _text)
def test_the_fast_path_is_the_reference_on_generated_secrets(event, text, key, member, value):
    doc = json.loads(event)
    paths = [p for p in _strings(doc) if p[0] not in ENVELOPE_FIELDS]
    if paths:
        _put(doc, paths[len(text) % len(paths)], text)
    doc.setdefault("payload", {})
    if isinstance(doc["payload"], dict):
        doc["payload"][key] = value
        doc["payload"][member] = [value, len(value), None]
    _same(msgspec.json.encode(doc))


@settings(max_examples=300, deadline=None)
@given(_text)
def test_text_and_dead_letter_redaction_is_the_reference(text):
    data = text.encode("utf-8", "surrogatepass")
    assert R.redact_text(data) == reference_text(R, data)


# -- the prefilter cannot miss -----------------------------------------------------

def _rule_case(rule_index: int) -> Any:
    rule = R._rules[rule_index]
    pattern = rule.pattern.replace(r"\z", r"\Z").encode()
    return st.tuples(st.just(rule_index), st.from_regex(pattern, fullmatch=True))


def _json_forms(s: str) -> list[bytes]:
    """JSON texts holding `s` as a value and as a member name, as msgspec and the
    standard library write them."""
    docs = [{"payload": {"output": s}}, {"payload": {s: 1}}]
    return [msgspec.json.encode(d) for d in docs] + \
        [json.dumps(d, ensure_ascii=a).encode() for d in docs for a in (True, False)]


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of([_rule_case(i) for i in range(len(RULES))]))
def test_every_match_of_a_rule_passes_both_prefilters(case):
    i, text = case
    rule = R._rules[i]
    m = rule.rx.search(text)
    if m is None:  # Python's re and RE2 differ on a corner: nothing to hold
        return
    found = m.group()
    assert R._text_prefilter(found) is not None, (RULES[i].name, found)
    try:
        s = found.decode("utf-8")
    except UnicodeDecodeError:
        return
    for form in _json_forms(s):
        assert R._json_prefilter(form) is not None, (RULES[i].name, form)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=6), st.sampled_from(SECRET_MEMBERS), st.text(max_size=3),
       st.booleans())
def test_a_secret_members_name_passes_the_json_prefilter(prefix, member, spaces, upper):
    name = prefix + (member.upper() if upper else member)
    assert secret_member(name)
    doc = {"payload": {"input": {name: 1}}}
    texts = [msgspec.json.encode(doc), json.dumps(doc).encode(),
             json.dumps(doc, ensure_ascii=False, separators=(" , ", " : ")).encode()]
    for t in texts:
        assert R._json_prefilter(t) is not None, t


def test_every_built_in_rule_has_literals():
    for rule in RULES:
        lits = required_literals(rule.pattern)
        assert lits and all(len(x) >= 2 for x in lits), rule.name
    assert not R._always


def test_member_names_fold_to_ascii_as_re2_folds_them():
    # secret_member lower-cases; a name it matches must show its literal to the
    # prefilter, which matches without case the way RE2 does: check every character
    # whose lower case is one ASCII letter or digit
    for cp in range(0x110000):
        c = chr(cp)
        if 0xD800 <= cp < 0xE000 or c.isascii():
            continue
        low = c.lower()
        if len(low) == 1 and low.isascii() and low.isalnum():
            assert re2.compile("(?i)" + low).search(c) is not None, hex(cp)
    assert secret_member("DB_PASSWORD") and secret_member("clientSecret")
    assert not secret_member("apiKeySource") and not secret_member("passwords_count")
    assert not secret_member("inputTokens")


def test_no_typed_field_of_the_schema_is_a_secret_member():
    # the member rule turns a number into a string: only free-form values may meet it
    schema = json.loads((Path(__file__).resolve().parents[2] / "topics" /
                         "canonflow.schema.json").read_text())
    names: set[str] = set()

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            names.update(o.get("properties", {}) if isinstance(o.get("properties"), dict)
                         else ())
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(schema)
    assert len(names) > 100 and not [n for n in names if secret_member(n)]


def test_redaction_cost_per_event_against_translation_on_the_captures(capsys):
    """A measurement, reported (no timed assertion): redaction's cost per event next to
    the adapters' translation cost, on the same captured events."""
    captures = _captures()

    def translate() -> int:
        n = 0
        for provider, lines in captures:
            rep = Replayer(provider)
            for i, raw in enumerate(lines, 1):
                n += len(rep.feed("s", i, raw, "capture")[0])
        return n

    def best(fn: Any, rounds: int = 5) -> float:
        t = float("inf")
        for _ in range(rounds):
            start = time.process_time()
            fn()
            t = min(t, time.process_time() - start)
        return t

    n = translate()
    t_translate = best(translate)
    t_redact = best(lambda: [R.apply(e) for e in EVENTS])
    t_reference = best(lambda: [reference_apply(R, e) for e in EVENTS], 1)
    hits = sum(R._json_prefilter(e) is not None for e in EVENTS)
    with capsys.disabled():
        print(f"\n{n} captured events: translation {t_translate / n * 1e6:.1f} us/event, "
              f"redaction {t_redact / n * 1e6:.1f} us/event "
              f"(reference path {t_reference / n * 1e6:.1f}); {hits} events past the prefilter")
    assert n == len(EVENTS) and decode_event(EVENTS[0])


# -- the hold point's shortcut cannot skip a hold ---------------------------------------

_STARTS_AND_PREFIXES = sorted(_STARTS | set(_TOKEN_PREFIXES) | set(_KEYWORDS))
#: keywords in other cases, and the characters re folds to ASCII letters without case
_CASED = sorted({w for k in _KEYWORDS for w in (k.upper(), k.title(), k.swapcase())}
                | {"\u212a", "\u017f", "\u0130", "\u0131", "PaSsWoRd:", "tOkEn=",
                   "\u017fecret", "pa\u017f\u017fword", "to\u212aen", "AP\u0130KEY"})
_hold_piece = st.one_of(st.sampled_from(_STARTS_AND_PREFIXES), st.sampled_from(SECRETS),
                        st.sampled_from(_CASED),
                        st.sampled_from(TEXTS),
                        st.text(alphabet=st.characters(codec="utf-8"), max_size=6),
                        st.text(alphabet=" \t\n\"'()`.,;:=-_/+@éß\u00a0", max_size=3),
                        # past HOLD_SCAN; past HOLD_KEY (a key's BEGIN before it is not held)
                        st.sampled_from(["x" * 509, "word " * 102, "word " * 1640]),
                        st.just("-----BEGIN"))
_delta = st.lists(_hold_piece, max_size=6).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_delta)
def test_the_hold_point_is_the_reference_on_generated_deltas(text):
    assert hold_point(text) == reference_hold_point(text)


def test_the_hold_point_is_the_reference_on_captured_and_corpus_text():
    texts = [d for e in EVENTS for d in [json.loads(e)["payload"].get("delta")] if d]
    texts += [t[:i] for t in TEXTS for i in range(len(t) + 1)]
    assert len(texts) > 1000
    for t in texts:
        assert hold_point(t) == reference_hold_point(t), t


def test_a_key_prefix_after_punctuation_is_held():
    # the shortcut before issue 24 read the last word from its last space and asked
    # whether it began like a keyword: "foo.gh" let "gh" pass (and "p_..." in the next
    # delta hid a GitHub token's start), as did "zz(gh", "bar/AKIA" and "q)ey"
    for text in ("foo.gh", "zz(gh", "bar/AKIA", "q)ey", "x\ngh", "(ghp_12", "a.SG."):
        assert hold_point(text) < len(text), text


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_CASED), st.sampled_from(_KEYWORDS),
                          st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
                          st.text(alphabet="pwdtokenKSI_-= :", max_size=6)),
                max_size=6).map("".join))
def test_the_keyword_test_is_the_keyword_regex(text):
    from adapters.core.hold import _KEYWORD, _has_keyword

    assert _has_keyword(text) == (_KEYWORD.search(text) is not None)
