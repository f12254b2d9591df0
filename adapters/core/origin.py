"""Who sent a JSON-RPC message that came without its `origin` header.

Two-way protocols (Codex's app-server, ACP) carry both directions on one raw topic, and
the `origin` header says which side wrote each message. Without it, the message itself
often says: a request or notification names a method that only one side sends (the
protocol's schema lists them), and a response answers a request of the other side that
is still in flight with its id. Where neither settles it (a method both sides send or
none defines, a response to an id no request in flight has, or requests of both sides
have), the message is refused, with a reason that says so: guessing would put the
client's words in the agent's mouth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.core.contract import Origin, UnknownOrigin


def jsonrpc_origin(obj: dict[str, Any], protocol: str, *,
                   client_sends: Callable[[str], bool], agent_sends: Callable[[str], bool],
                   agent_asked: Callable[[Any], bool], client_asked: Callable[[Any], bool]
                   ) -> Origin:
    """The side that sent `obj`: `client_sends(method)` / `agent_sends(method)` say which
    side a method is the schema's; `agent_asked(id)` / `client_asked(id)` whether a request
    of that side with the id is in flight. A message of no JSON-RPC shape is the agent's,
    for the translator to refuse. Raises UnknownOrigin where the message does not say."""
    method = obj.get("method")
    if isinstance(method, str):
        if client_sends(method):
            return "client"
        if agent_sends(method):
            return "agent"
        raise UnknownOrigin(f"{protocol} message {method[:80]!r} came without an origin, and "
                            "the schema does not say which side sends it: cannot tell who "
                            "sent it (send it with an 'origin' header)")
    if method is None and "id" in obj and ("result" in obj or "error" in obj):
        rid = obj["id"]
        answers_agent = agent_asked(rid)  # the client's answer to the agent
        answers_client = client_asked(rid)
        if answers_agent != answers_client:
            return "client" if answers_agent else "agent"
        which = "requests of both sides have" if answers_agent else "no request has"
        raise UnknownOrigin(f"{protocol} response to id {str(rid)[:40]!r} came without an "
                            f"origin, and {which} that id in flight: cannot tell who sent it "
                            "(send it with an 'origin' header)")
    return "agent"
