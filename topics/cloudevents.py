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
- `ce_source`: `/canonflow/<worker app id>/<provider>` (a URI-reference, each part
  percent-encoded)
- `ce_subject`: the session id (the record's key)
- `ce_time`: the event's createdAt (RFC 3339, UTC, milliseconds); a chat record's is
  its canonical event's
- `ce_dataschema`: the JSON Schema of the record, its schema version in the path
  (`https://canonflow.dev/schema/v1/canonflow.schema.json#/$defs/CanonicalEvent`)

Cost: the headers are built per event on the worker's hot path, so everything but
the id, the type, the subject and the time is built once per provider (`Headers`).
"""

from __future__ import annotations

from urllib.parse import quote

from topics.canonical import SCHEMA_VERSION

SPECVERSION = "1.0"
TYPE_PREFIX = "dev.canonflow."
CHAT_TYPE_PREFIX = "dev.canonflow.chat."
CONTENT_TYPE = "application/json"
SCHEMA_BASE = f"https://canonflow.dev/schema/v{SCHEMA_VERSION}/canonflow.schema.json"
EVENT_SCHEMA = f"{SCHEMA_BASE}#/$defs/CanonicalEvent"
CHAT_SCHEMA = f"{SCHEMA_BASE}#/$defs/ChatRecord"

#: One Kafka header: (name, value bytes).
Header = tuple[str, bytes]


def source(app_id: str, provider: str) -> str:
    """The ce_source of a worker `app_id`'s events of `provider`."""
    return f"/canonflow/{quote(app_id, safe='')}/{quote(provider, safe='')}"


class Headers:
    """Builds the headers of one provider's records: the constant ones once, the rest
    per record from what the event already holds (no encoding of the event again)."""

    __slots__ = ("_event_head", "_chat_head", "_types", "_chat_types")

    def __init__(self, app_id: str, provider: str):
        src = source(app_id, provider).encode()
        common: list[Header] = [("ce_specversion", SPECVERSION.encode()), ("ce_source", src),
                                ("content-type", CONTENT_TYPE.encode())]
        self._event_head = (*common, ("ce_dataschema", EVENT_SCHEMA.encode()))
        self._chat_head = (*common, ("ce_dataschema", CHAT_SCHEMA.encode()))
        self._types: dict[str, bytes] = {}
        self._chat_types: dict[str, bytes] = {}

    def event(self, tag: str, event_id: str, subject: bytes, time: str) -> list[Header]:
        """The headers of a canonical event of type `tag`."""
        return _headers(self._event_head, self._types, TYPE_PREFIX, tag, event_id, subject,
                        time)

    def chat(self, tag: str, event_id: str, subject: bytes, time: str) -> list[Header]:
        """The headers of a chat record of type `tag` (its canonical event's time)."""
        return _headers(self._chat_head, self._chat_types, CHAT_TYPE_PREFIX, tag, event_id,
                        subject, time)


def _headers(head: tuple[Header, ...], types: dict[str, bytes], prefix: str, tag: str,
             event_id: str, subject: bytes, time: str) -> list[Header]:
    """`head` and the per-record headers; each ce_type is encoded once, in `types`."""
    ce_type = types.get(tag)
    if ce_type is None:
        ce_type = types[tag] = (prefix + tag).encode()
    return [*head, ("ce_id", event_id.encode()), ("ce_type", ce_type),
            ("ce_subject", subject), ("ce_time", time.encode())]
