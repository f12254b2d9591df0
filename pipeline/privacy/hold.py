"""Held back: where a streamed delta's tail may start a secret (`hold_point`), for the
conversation core's Emitter (adapters.core.emitter), which holds such a tail back until
the stream's next delta so that the redactor sees each secret whole.
"""

from __future__ import annotations

import re

# ---- Held back (adapters.core.emitter.Emitter): where a delta's tail may start a secret -------
#
# A secret streamed across two deltas reaches the redactor whole only if the core holds
# back the first delta's tail. `hold_point` says where such a tail begins: a key's
# format prefix running to the end (gitleaks' prefixes, as the rules above), a secret
# assignment whose value runs to the end, a URL whose credentials may follow, a private
# key's BEGIN without its END, or the last word when it begins one of those. It looks
# at a bounded tail (HOLD_SCAN characters; a private key HOLD_KEY), so it costs the
# same whatever the stream's length, and most deltas end in a plain word: nothing held.
HOLD_SCAN = 512
HOLD_KEY = 8 * 1024
_TOKEN_PREFIXES = ("sk-", "sk_live_", "sk_test_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_",
                   "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxr-",
                   "AKIA", "ASIA", "AIza", "npm_", "pypi-", "eyJ", "hf_", "SG.")
_KEYWORDS = ("password", "passwd", "secret", "token", "api_key", "api-key", "apikey",
             "access_key", "private_key", "authorization", "accountkey", "credential")
_HOLD_TAILS = [re.compile(p) for p in (
    # a key by its prefix, its characters running to the end
    r"(?<![\w])(?:" + "|".join(re.escape(t) for t in _TOKEN_PREFIXES) + r")[\w\-.=+/]*$",
    # `password: x`, `TOKEN=x`, `"api_key": "x`, `Authorization: Bearer x`: value to the end
    r"(?i:(?:" + "|".join(re.escape(k) for k in _KEYWORDS)
    + r"|pwd)\w*[\"']?\s*[:=]\s*(?:(?:bearer|basic|token)\s+)?[\"']?[^\s\"']*)$",
    # --password x, --token=x, -p'x'
    r"(?:--(?:password|passwd|token|secret|api-key)(?:[= ]\s*)?\S*|(?<!\S)-p['\"]?\S*)$",
    # scheme://user:password@ (the part before @ may be credentials)
    r"[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/@]*$",
    # the last word when it may be the beginning of a keyword or of a key's prefix (a
    # delta may end one character into "ghp_..."): it waits for the next delta
    r"(?<![\w])(?:"
    + "|".join(sorted({re.escape(w[:n]) for w in (*_KEYWORDS, *_TOKEN_PREFIXES, "github_pat_")
                       for n in range(1, len(w) + 1)}, key=len, reverse=True))
    + r")$",
    r"-{5}(?:B(?:E(?:G(?:I(?:N)?)?)?)?)?$",  # the start of a private key's BEGIN
)]


# the starts of the keywords and of the lowercase key prefixes, and of the key prefixes
# that are cased (AKIA, eyJ): a last word that is one may become one
_WORD_STARTS = tuple(sorted({w[:n].lower() for w in (*_KEYWORDS, *_TOKEN_PREFIXES, "pwd")
                             for n in range(1, len(w) + 1)}))
_CASED_STARTS = tuple(sorted({w[:n] for w in _TOKEN_PREFIXES if w != w.lower()
                              for n in range(1, len(w) + 1)}))
_HOLD_TAIL = re.compile("|".join(f"(?:{rx.pattern})" for rx in _HOLD_TAILS))


def hold_point(text: str) -> int:
    """Where the tail of `text` that may be the start of a secret begins (len(text):
    none). Pure and deterministic: replay and the worker hold back the same. Only the
    last three words can hold one (a key, its separator, its value), so only they are
    scanned: a few microseconds whatever the delta's size."""
    n = len(text)
    cut = n
    key = text.rfind("-----BEGIN", max(0, n - HOLD_KEY))
    if key >= 0 and text.find("-----END", key) < 0:
        cut = key
    floor = max(0, n - HOLD_SCAN)
    words = text[floor:].rsplit(maxsplit=3)  # [what comes before, and] the last three
    start = floor + len(words[0]) if len(words) == 4 else floor
    tail = text[start:]
    # most deltas end in a plain word: no separator a secret assignment needs, and no
    # last word that begins a key's prefix or a keyword (C string methods, no regex)
    if not (":" in tail or "=" in tail or "-" in tail
            or tail[tail.rfind(" ") + 1:].lstrip("\"'(`").lower().startswith(_WORD_STARTS)
            or tail[tail.rfind(" ") + 1:].lstrip("\"'(`").startswith(_CASED_STARTS)):
        return cut
    m = _HOLD_TAIL.search(text, start)
    if m is not None and m.start() < cut:
        cut = m.start()
    return cut
