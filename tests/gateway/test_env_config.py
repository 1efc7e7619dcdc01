"""LOGWAY_<KAFKA_NAME> environment settings: the name mapping (known keys, Confluent's `__`/`___` escapes),
precedence (flags > environment > file) and the unknown-key warning."""

from __future__ import annotations

import logging

from logway.cli.main import build_parser, config_from_args
from logway.gateway.config import broker_keys, environment_properties
from logway.server.env_config import confluent_key, env_name


def serve_config(tmp_path, environ, *flags):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=4\nlog.retention.ms=1000\nlog.dirs=/from/file\n")
    args = build_parser().parse_args(["serve", "--config", str(props), *flags])
    return config_from_args(args, environ)


def test_dots_as_underscores_for_known_keys():
    env = {"LOGWAY_LOG_RETENTION_MS": "60000", "LOGWAY_ADVERTISED_LISTENERS": "PLAINTEXT://h:1",
           "LOGWAY_LISTENERS": "PLAINTEXT://0.0.0.0:9092", "LOGWAY_LOG_DIRS": "/var/lib/logway",
           "LOGWAY_AUTO_CREATE_TOPICS_ENABLE": "false", "PATH": "/bin", "KAFKA_NUM_PARTITIONS": "9"}
    assert environment_properties(env) == {
        "log.retention.ms": "60000", "advertised.listeners": "PLAINTEXT://h:1",
        "listeners": "PLAINTEXT://0.0.0.0:9092", "log.dirs": "/var/lib/logway", "auto.create.topics.enable": "false",
    }


def test_every_known_key_round_trips():
    for key in broker_keys():
        assert environment_properties({env_name(key): "v"}) == {key: "v"}


def test_confluent_escapes_for_underscores_and_dashes():
    assert confluent_key("LISTENER_NAME_SASL__SSL_SCRAM___SHA___256_SASL_JAAS_CONFIG") == (
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    env = {"LOGWAY_LISTENER_NAME_SASL__SSL_PLAIN_SASL_JAAS_CONFIG": "j"}
    assert environment_properties(env) == {"listener.name.sasl_ssl.plain.sasl.jaas.config": "j"}


def test_listener_keys_without_escapes_keep_the_listener_name_whole():
    env = {"LOGWAY_LISTENER_NAME_SASL_SSL_SCRAM_SHA_256_SASL_JAAS_CONFIG": "j",
           "LOGWAY_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION": "/k.pem"}
    assert environment_properties(env) == {
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "j",
        "listener.name.external.ssl.keystore.location": "/k.pem",
    }


def test_test_knobs_are_not_settings():
    env = {"LOGWAY_KILLS": "10", "LOGWAY_KILL_SEED": "1", "LOGWAY_FUZZ_SEED": "2", "LOGWAY_TEST_BOOTSTRAP": "h:1",
           "LOGWAY_KAFKA_JARS": "/x", "LOGWAY_": "x"}
    assert environment_properties(env) == {}


def test_flags_over_environment_over_file(tmp_path):
    env = {"LOGWAY_NUM_PARTITIONS": "6", "LOGWAY_LOG_DIRS": "/from/env", "LOGWAY_LOG_RETENTION_MS": "2000"}
    config = serve_config(tmp_path, env, "--log-dirs", str(tmp_path / "flag"))
    assert config.num_partitions == 6  # environment over file
    assert config.log_config.retention_ms == 2000
    assert config.log_dirs == [str(tmp_path / "flag")]  # flag over environment
    config = serve_config(tmp_path, env, "--override", "num.partitions=8")
    assert config.num_partitions == 8 and config.log_dirs == ["/from/env"]
    config = serve_config(tmp_path, {})
    assert config.num_partitions == 4 and config.log_config.retention_ms == 1000


def test_unknown_name_warns_like_a_file_key(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, "logway.server.config"):
        config = serve_config(tmp_path, {"LOGWAY_NUM_PARTITION": "3", "LOGWAY_ZOOKEEPER_CONNECT": "zk:2181"})
    assert "unknown config num.partition (did you mean num.partitions?); ignored" in config.warnings
    assert "config zookeeper.connect is a Kafka setting that does not apply to Logway; ignored" in config.warnings
    assert config.num_partitions == 4


def test_users_command_reads_log_dirs_from_the_environment(tmp_path, monkeypatch, capsys):
    from logway.cli.main import main

    monkeypatch.setenv("LOGWAY_LOG_DIRS", str(tmp_path / "data"))
    assert main(["users", "add", "--user", "alice", "--password", "pw", "--iterations", "4096"]) == 0
    assert main(["users", "list"]) == 0
    assert "alice: SCRAM-SHA-256" in capsys.readouterr().out
    assert any((tmp_path / "data").iterdir())
