"""Broker configuration: Kafka's property names, defaults, file format, and CLI precedence."""

from __future__ import annotations

import pytest

from logway.cli.main import build_parser, config_from_args
from logway.gateway.config import BrokerConfig
from logway.server.config import ConfigError, parse_properties


def test_properties_format():
    text = (
        "# comment\n! also a comment\n"
        "log.dirs=/a,/b\n"
        "num.partitions : 3\n"
        "listeners PLAINTEXT://127.0.0.1:9999\n"
        "long.value = one \\\n    two\n"
        "escaped\\=key=v\n"
    )
    assert parse_properties(text) == {
        "log.dirs": "/a,/b", "num.partitions": "3", "listeners": "PLAINTEXT://127.0.0.1:9999",
        "long.value": "one two", "escaped=key": "v",
    }


def test_kafka_defaults():
    config = BrokerConfig.load(None, {"log.dirs": "/tmp/x"})
    assert config.num_partitions == 1
    assert config.auto_create_topics is True
    assert config.socket_request_max_bytes == 104857600
    assert config.offsets_topic_num_partitions == 50
    assert config.log_config.segment_bytes == 1073741824
    assert config.log_config.retention_ms == 7 * 24 * 3600 * 1000


def test_log_retention_precedence_ms_over_minutes_over_hours():
    config = BrokerConfig.load(None, {"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert config.log_config.retention_ms == 120000
    config = BrokerConfig.load(None, {"log.retention.minutes": "2", "log.retention.ms": "5"})
    assert config.log_config.retention_ms == 5


def test_cli_flags_override_the_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:1111\nlog.dirs=/from/file\nnum.partitions=4\n")
    args = build_parser().parse_args([
        "serve", "--config", str(props), "--log-dirs", str(tmp_path / "a") + "," + str(tmp_path / "b"),
        "--advertised-listeners", "PLAINTEXT://example.test:2222", "--override", "num.partitions=6",
    ])
    config = config_from_args(args)
    assert config.log_dirs == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert str(config.listeners[0]) == "PLAINTEXT://127.0.0.1:1111"
    assert (config.advertised.host, config.advertised.port) == ("example.test", 2222)
    assert config.num_partitions == 6


@pytest.mark.parametrize("props", [
    {"listeners": "nonsense"},
    {"listeners": "SSL://127.0.0.1:9093"},
    {"num.partitions": "zero"},
    {"num.partitions": "0"},
    {"auto.create.topics.enable": "maybe"},
])
def test_bad_values_are_rejected_at_start(props):
    with pytest.raises((ConfigError, ValueError)):
        BrokerConfig.load(None, props)
