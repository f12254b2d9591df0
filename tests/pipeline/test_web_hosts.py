"""The worker's web server answers allowed Host names only (issue 25, finding 1).

A web page the user visits can rebind its own DNS name to the worker's address: the
browser then reads /metrics, /health or Faust's /table/ views as same-origin, but still
sends the page's own name as Host. The worker refuses such a request (421) on every
path, its own views and Faust's alike. Tested on a real worker over real HTTP on
127.0.0.1, and the allow-list itself case by case.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cluster.broker import EmbeddedBroker, free_port
from pipeline.ops.web import AllowedHosts
from pipeline.settings import Settings
from pipeline.worker.process import WorkerProcess, embedded_settings, ensure_topics
from tests.pipeline.test_metrics import wait_for

pytestmark = pytest.mark.broker

#: Every path a rebinding page could want, canonflow's and Faust's built-in ones.
PATHS = ["/metrics", "/health", "/", "/table/", "/table/sessions.codex/", "/router/",
         "/router/sessions.codex/get/x/"]


def request(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    """(status, body) of GET path on 127.0.0.1:port with this Host header (None: none at
    all, in an HTTP/1.0 request, which may leave it out)."""
    if host is None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            data = b"".join(iter(lambda: sock.recv(65536), b""))
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def answers(port: int) -> bool:
    try:
        return request(port, "/metrics", f"127.0.0.1:{port}")[0] == 200
    except OSError:  # not listening yet
        return False


@pytest.fixture(scope="module")
def web_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A real worker, its web server on 127.0.0.1, one extra name allowed (as the
    Kubernetes manifests add the pod's address)."""
    tmp = tmp_path_factory.mktemp("web-hosts")
    with EmbeddedBroker(log_path=str(tmp / "tansu.log")) as broker:
        s = Settings(app_id="canonflow-web-hosts", partitions=2, web_enabled=True,
                     web_port=free_port(), data_dir=str(tmp / "data"),
                     web_allowed_hosts="canonflow-worker-0.canonflow-worker, 10.1.2.0/24")
        s = embedded_settings(s, broker.url)
        ensure_topics(s)
        worker = WorkerProcess(s, log_path=str(tmp / "worker.log")).start()
        try:
            wait_for(lambda: answers(s.web_port), "the worker's web server", worker=worker)
            yield s
        finally:
            worker.stop()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:{port}",
                                  "localhost.attacker.example:{port}", "127.0.0.1.nip.io:{port}",
                                  "10.9.9.9:{port}", "[::2]:{port}", "", None])
def test_a_foreign_host_name_gets_421_on_every_path(web_worker, path, host):
    port = web_worker.web_port
    status, body = request(port, path, None if host is None else host.format(port=port))
    assert status == 421, (path, host, status, body[:200])
    assert b"canonflow_" not in body and b"partitions" not in body  # a reason, no data


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.:{port}",
                                  "localhost", "[::1]:{port}",
                                  "canonflow-worker-0.canonflow-worker:{port}",
                                  "10.1.2.3:{port}"])
def test_loopback_names_and_the_configured_ones_are_answered(web_worker, host):
    port = web_worker.web_port
    status, body = request(port, "/metrics", host.format(port=port))
    assert status == 200 and b"canonflow_raw_records_total" in body
    assert request(port, "/health", host.format(port=port))[0] in (200, 503)
    assert request(port, "/", host.format(port=port))[0] == 200


def test_faust_table_and_router_views_are_not_served_even_to_allowed_names(web_worker):
    """They read table values (the items tables spool pending command output) and the
    cluster's layout; canonflow uses neither, so they are off."""
    port = web_worker.web_port
    for path in ("/table/", "/table/sessions.codex/", "/router/"):
        status, _ = request(port, path, f"127.0.0.1:{port}")
        assert status == 404, path


# ---- the allow-list, case by case ------------------------------------------------------


@pytest.mark.parametrize("header, local, allowed", [
    ("127.0.0.1:6066", "127.0.0.1", True),
    ("127.8.9.10", "127.0.0.1", True),  # the whole loopback range
    ("localhost:6066", "10.0.0.5", True),
    ("LocalHost.", "10.0.0.5", True),
    ("[::1]:6066", "10.0.0.5", True),
    ("[::ffff:127.0.0.1]:6066", "10.0.0.5", True),
    # the address the connection came in on, as an IP literal: what the kubelet and
    # Prometheus send when they reach a pod or container by its address
    ("10.0.0.5:6066", "10.0.0.5", True),
    ("10.0.0.5:6066", "::ffff:10.0.0.5", True),
    ("[fd00::5]:6066", "fd00::5", True),
    ("10.0.0.6:6066", "10.0.0.5", False),
    ("10.0.0.5:6066", None, False),
    ("evil.example", "10.0.0.5", False),
    ("localhost.evil.example", "127.0.0.1", False),
    ("evil.localhost.example", "127.0.0.1", False),
    ("", "127.0.0.1", False),
    (None, "127.0.0.1", False),
    ("::1", "127.0.0.1", False),  # a bare IPv6 address is no Host
    ("127.0.0.1:6066:1", "127.0.0.1", False),
    ("[::1", "127.0.0.1", False),
    ("[::1]x", "127.0.0.1", False),
    ("local host", "127.0.0.1", False),
    ("localhost\r\nX: y", "127.0.0.1", False),
    ("127.0.0.1:port", "127.0.0.1", False),
])
def test_default_allow_list(header, local, allowed):
    assert AllowedHosts.parse("").allows(header, local) is allowed


@pytest.mark.parametrize("entries, header, allowed", [
    ("worker-0.svc", "worker-0.svc:6066", True),
    ("worker-0.svc", "WORKER-0.SVC.", True),
    ("worker-0.svc", "x.worker-0.svc", False),
    (".svc.cluster.local", "canonflow-worker-0.canonflow-worker.ns.svc.cluster.local", True),
    (".svc.cluster.local", "svc.cluster.local", True),
    (".svc.cluster.local", "evilsvc.cluster.local", False),
    ("10.1.2.0/24", "10.1.2.200:6066", True),
    ("10.1.2.0/24", "10.1.3.1:6066", False),
    ("10.1.2.7", "10.1.2.7", True),
    ("fd00::/8", "[fd12::1]:6066", True),
    (" a.example , b.example ", "b.example", True),
    ("*", "anything.example", True),
    ("*", "", False),  # even '*' wants a Host
])
def test_configured_entries(entries, header, allowed):
    assert AllowedHosts.parse(entries).allows(header, "192.0.2.1") is allowed


def test_a_specific_bound_address_is_allowed_too():
    hosts = AllowedHosts.parse("", bound="192.0.2.10")
    assert hosts.allows("192.0.2.10:6066", None)
    assert not AllowedHosts.parse("", bound="0.0.0.0").allows("0.0.0.0:6066", None)


@pytest.mark.parametrize("entries", ["10.1.2.0/33", "bad host", "a..b", "-", "*.example.com",
                                     "http://x", "x:80"])
def test_entries_that_are_no_host_name_address_or_network_are_refused(entries):
    with pytest.raises(ValueError):
        AllowedHosts.parse(entries)


def test_a_worker_with_a_bad_allow_list_refuses_to_start(tmp_path: Path):
    """Caught when the app is built, before anything listens."""
    from pipeline.worker.app import create_app

    with pytest.raises(ValueError, match="CANONFLOW_WEB_ALLOWED_HOSTS"):
        create_app(Settings(broker="kafka://127.0.0.1:9", web_allowed_hosts="a b",
                            data_dir=str(tmp_path)))
