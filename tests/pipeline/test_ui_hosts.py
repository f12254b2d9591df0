"""`canonflow ui` bound beyond loopback still answers allowed host names only (issue 25,
finding 1): `--host 0.0.0.0` used to turn the Host check off, so any page the user
visited could rebind its name to the UI and read the chat.

Servers here listen on 127.0.0.1 only, so the test serves the very application the
command builds for `--host 0.0.0.0 --allowed-hosts ...` (`ui_app_for`) on a loopback
port and sends real requests with foreign and allowed Host headers.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.settings import Settings
from pipeline.views.chat_store import ChatStore
from pipeline.views.ui import ui, ui_app_for
from tests.pipeline.test_ui import UiServer
from tests.pipeline.test_web_hosts import request

#: Nothing consumes: the store is fed directly, no broker needed.
SETTINGS = Settings(broker="kafka://127.0.0.1:9")


def get(url: str, path: str, host: str) -> tuple[int, bytes]:
    """(status, body) of GET path on the UI at `url`, with this Host header."""
    return request(int(url.rstrip("/").rsplit(":", 1)[1]), path, host)


@pytest.fixture(scope="module")
def exposed_ui():
    """The UI as `canonflow ui --host 0.0.0.0 --allowed-hosts chat.internal,.corp.example`
    builds it, with one session holding a secret."""
    store = ChatStore()
    store.add(json.dumps({"type": "tool_result", "session_id": "s1", "provider": "codex",
                          "seq": 1, "content": "AWS_SECRET=hunter2"}).encode(), 1)
    with UiServer(lambda: ui_app_for(SETTINGS, "0.0.0.0", "chat.internal,.corp.example",
                                     consume=False, store=store)) as server:
        yield server


@pytest.mark.parametrize("path", ["/", "/api/sessions", "/api/sessions/s1", "/api/status",
                                  "/events?session=s1", "/static/app.js"])
@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8066",
                                  "chat.internal.attacker.example", "0.0.0.0:8066",
                                  "10.0.0.9:8066"])
def test_a_foreign_host_name_gets_421_even_beyond_loopback(exposed_ui, path, host):
    status, body = get(exposed_ui.url, path, host)
    assert status == 421, (path, host, status)
    assert b"hunter2" not in body and b"s1" not in body


@pytest.mark.parametrize("host", ["127.0.0.1:8066", "localhost", "chat.internal:8066",
                                  "ui.corp.example"])
def test_loopback_and_the_allowed_names_read_the_chat(exposed_ui, host):
    status, body = get(exposed_ui.url, "/api/sessions/s1", host)
    assert status == 200 and b"hunter2" in body


def test_the_command_refuses_an_entry_that_is_no_host():
    result = CliRunner().invoke(ui, ["--broker", "kafka://127.0.0.1:9", "--host", "0.0.0.0",
                                     "--allowed-hosts", "chat internal"])
    assert result.exit_code == 2 and "not a host name" in result.output
