"""CloudEvents headers on every record of agents.canonical and agents.chat: the binary
content mode of the CloudEvents Kafka protocol binding (docs "CloudEvents"), so that
generic tooling (Knative, Kafka Connect SMTs, Benthos, the CloudEvents SDKs) routes and
filters by type, source and subject without parsing a record's JSON.

The record's value stays the event itself (the CloudEvent's data, `content-type`
application/json); the attributes are headers:

- `ce_specversion`: 1.0
- `ce_id`: the eventId (chat: the record's event_id), unique per source, and the same
  when a crashed worker publishes the event again (CloudEvents' duplicate rule too)
- `ce_type`: `dev.canonflow.<event type>` (`dev.canonflow.turn.completed`); chat
  records `dev.canonflow.chat.<record type>` (`dev.canonflow.chat.text`)
- `ce_source`: `/canonflow/<provider>/<session id>` (a URI-reference, each part
  percent-encoded): the session the event happened in
- `ce_subject`: the session id (the record's key)
- `ce_time`: the event's createdAt (RFC 3339, UTC, milliseconds); a chat record's is
  its canonical event's
- `ce_dataschema`: the record's definition in the JSON Schema: the schema's `$id`
  (its schema version in the path) and a fragment
  (`https://canonflow.dev/schema/v1/canonflow.schema.json#/$defs/CanonicalEvent`)

Identity: in CloudEvents, source and id together name one event; a consumer takes two
records with the same pair for copies of it. So both come from the event alone, never
from the worker that published it: the eventId is derived from provider, session and
seq (adapters.core.ids; a chat record's from its canonical event's), and the source
names the provider and the session. A worker under another `CANONFLOW_APP_ID`, or a
replay of the raw topics, publishes each event again with the same identity, and
CloudEvents tooling drops the copy as a duplicate. Distinct events never share the
pair: each session has its own source, and its eventIds differ by seq.

Cost: the headers are built per event on the worker's hot path, so everything but
the id, the type, the subject, the source and the time is built once per provider
(`Headers`); the source once per run of records of one session.
"""

from __future__ import annotations

from urllib.parse import quote, quote_from_bytes

from topics.schema import SCHEMA_ID

SPECVERSION = "1.0"
TYPE_PREFIX = "dev.canonflow."
CHAT_TYPE_PREFIX = "dev.canonflow.chat."
CONTENT_TYPE = "application/json"
EVENT_SCHEMA = f"{SCHEMA_ID}#/$defs/CanonicalEvent"
CHAT_SCHEMA = f"{SCHEMA_ID}#/$defs/ChatRecord"

#: One Kafka header: (name, value bytes).
Header = tuple[str, bytes]


def source(provider: str, session_id: str) -> str:
    """The ce_source of the events of session `session_id` of `provider`."""
    return f"/canonflow/{quote(provider, safe='')}/{quote(session_id, safe='')}"


class Headers:
    """Builds the headers of one provider's records: the constant ones once, the rest
    per record from what the event already holds (no encoding of the event again).
    `subject` is the record key, the session id (UTF-8): the source is built from it."""

    __slots__ = ("_event_head", "_chat_head", "_types", "_chat_types", "_prefix",
                 "_subject", "_source")

    def __init__(self, provider: str):
        common: list[Header] = [("ce_specversion", SPECVERSION.encode()),
                                ("content-type", CONTENT_TYPE.encode())]
        self._event_head = (*common, ("ce_dataschema", EVENT_SCHEMA.encode()))
        self._chat_head = (*common, ("ce_dataschema", CHAT_SCHEMA.encode()))
        self._types: dict[str, bytes] = {}
        self._chat_types: dict[str, bytes] = {}
        self._prefix = source(provider, "").encode()
        # the last session's source: a record's events, and a batch's records of one
        # session, come one after the other (one entry, so nothing grows)
        self._subject = b""
        self._source = self._prefix

    def event(self, tag: str, event_id: str, subject: bytes, time: str) -> list[Header]:
        """The headers of a canonical event of type `tag`."""
        return _headers(self._event_head, self._types, TYPE_PREFIX, tag, event_id,
                        self._source_of(subject), subject, time)

    def chat(self, tag: str, event_id: str, subject: bytes, time: str) -> list[Header]:
        """The headers of a chat record of type `tag` (its canonical event's time)."""
        return _headers(self._chat_head, self._chat_types, CHAT_TYPE_PREFIX, tag, event_id,
                        self._source_of(subject), subject, time)

    def _source_of(self, subject: bytes) -> bytes:
        if subject != self._subject:
            self._subject = subject
            self._source = self._prefix + quote_from_bytes(subject, safe="").encode()
        return self._source


def _headers(head: tuple[Header, ...], types: dict[str, bytes], prefix: str, tag: str,
             event_id: str, src: bytes, subject: bytes, time: str) -> list[Header]:
    """`head` and the per-record headers; each ce_type is encoded once, in `types`."""
    ce_type = types.get(tag)
    if ce_type is None:
        ce_type = types[tag] = (prefix + tag).encode()
    return [*head, ("ce_source", src), ("ce_id", event_id.encode()), ("ce_type", ce_type),
            ("ce_subject", subject), ("ce_time", time.encode())]
