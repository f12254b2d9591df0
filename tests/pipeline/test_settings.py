from __future__ import annotations

import pytest

from pipeline.settings import Settings, from_env, item_cap_from_env, to_env


def test_defaults_run_on_one_machine_with_no_configuration():
    s = from_env({})
    assert (s.broker, s.web_host, s.store, s.partitions) == ("", "127.0.0.1", "memory://", 12)


def test_environment_and_overrides():
    s = from_env({"CANONFLOW_PARTITIONS": "6", "CANONFLOW_INCLUDE_RAW": "yes",
                  "CANONFLOW_PROVIDERS": "claude, codex"}, broker="kafka://k:9092")
    assert (s.partitions, s.include_raw, s.providers, s.bootstrap) == (
        6, True, ("claude", "codex"), "k:9092")


def test_settings_survive_the_trip_through_the_environment():
    s = Settings(broker="kafka://a:1;kafka://b:2", app_id="x", partitions=3, include_raw=True,
                 providers=("acp",), producer_max_batch_size=1, rebalance_timeout=3.0)
    assert from_env(to_env(s)) == s
    assert s.bootstrap == "a:1,b:2"


@pytest.mark.parametrize("env", [{"CANONFLOW_PROVIDERS": "nope"},
                                 {"CANONFLOW_INCLUDE_RAW": "maybe"},
                                 {"CANONFLOW_PARTITIONS": "many"}])
def test_bad_values_are_clear_errors(env):
    with pytest.raises(ValueError):
        from_env(env)


def test_the_item_cap_alone_is_read_as_the_worker_reads_it():
    """What replay and import read of the worker's settings: the cap, checked the same
    way, whatever the others say (they need no broker nor partition count)."""
    assert item_cap_from_env({}) == from_env({}).item_cap == 64 * 1024
    assert item_cap_from_env({"CANONFLOW_ITEM_CAP": "4096",
                              "CANONFLOW_PARTITIONS": "many"}) == 4096
    with pytest.raises(ValueError, match=r"item_cap is 0: it must be at least 1"):
        item_cap_from_env({"CANONFLOW_ITEM_CAP": "0"})
    with pytest.raises(ValueError, match=r"CANONFLOW_ITEM_CAP='8MiB' is not an integer"):
        item_cap_from_env({"CANONFLOW_ITEM_CAP": "8MiB"})


def test_tls_and_sasl_settings_reach_every_kafka_client(tmp_path):
    """TLS and SASL pass through to aiokafka (admin, producers, consumers) and to Faust.
    (The embedded Tansu build serves no TLS listener, so a real TLS handshake is left to
    deploy/README.md's cluster recipes.)"""
    import ssl
    import subprocess

    from faust.auth import SASLCredentials

    from pipeline.cluster.admin import kafka_client_kwargs
    from pipeline.worker.app import broker_credentials

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    s = from_env({"CANONFLOW_BROKER": "kafka://k:9093", "CANONFLOW_SECURITY_PROTOCOL": "SASL_SSL",
                  "CANONFLOW_SASL_MECHANISM": "SCRAM-SHA-512", "CANONFLOW_SASL_USERNAME": "u",
                  "CANONFLOW_SASL_PASSWORD": "p", "CANONFLOW_SSL_CAFILE": str(cert)})
    kw = kafka_client_kwargs(s)
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("u", "p")
    assert isinstance(kw["ssl_context"], ssl.SSLContext)
    creds = broker_credentials(s)
    assert isinstance(creds, SASLCredentials) and creds.mechanism.value == "SCRAM-SHA-512"
    assert broker_credentials(Settings(broker="kafka://k:9092")) is None
