from __future__ import annotations

import pytest

from pipeline.settings import Settings, from_env, to_env


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
