"""The Kafka client the admin subcommands share: connection settings, waiting on results, one-line errors.

The tools use confluent-kafka's AdminClient (librdkafka). It is maintained by Confluent in step with Apache
Kafka, ships binary wheels (nothing to compile), and covers every call the tools need behind one object:
ListGroups/DescribeGroups with decoded member assignments, OffsetFetch/OffsetCommit for a group,
ListOffsets by time (KIP-396), DescribeConfigs with sources and IncrementalAlterConfigs. kafka-python's
KafkaAdminClient lacks ListOffsets by timestamp and decoded assignments, so reset-offsets and describe would
need a second client or hand-written decoding. It is a runtime dependency because these commands are part
of the installed `logway` command, not a test helper.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from logway.cli.tools.errors import ToolError

# Java client security properties (kafka-*.sh --command-config) and their librdkafka names.
_RENAMED = {
    "ssl.truststore.location": "ssl.ca.location",  # librdkafka reads PEM files only (ssl.truststore.type=PEM)
    "ssl.keystore.location": "ssl.certificate.location",
    "ssl.key.password": "ssl.key.password",
}
# Java-only properties librdkafka has no use for (it reads PEM, it does no JAAS).
_DROPPED = {"ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password", "ssl.keystore.password",
            "sasl.jaas.config", "ssl.endpoint.identification.algorithm"}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file (key=value or key: value, # and ! comments), as kafka tools' --command-config."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ToolError(f"--command-config {path}: {exc.strerror or exc}") from None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        key, value = (match.group(1), match.group(2)) if match else (line, "")
        props[key] = value.strip()
    return props


def client_config(bootstrap: str, command_config: str | None) -> dict[str, Any]:
    """librdkafka settings for ``bootstrap`` plus the Java-style security properties of ``command_config``."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "logway-admin",
                              "logger": _quiet_logger()}
    if command_config is None:
        return config
    props = read_properties(command_config)
    jaas = props.get("sasl.jaas.config", "")
    options = dict(_JAAS_OPTION.findall(jaas))
    if "username" in options:
        config["sasl.username"] = options["username"]
        config["sasl.password"] = options.get("password", "")
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        config["ssl.endpoint.identification.algorithm"] = "none"
    for key, value in props.items():
        if key in _DROPPED:
            continue
        config[_RENAMED.get(key, key)] = value
    return config


def _quiet_logger() -> logging.Logger:
    """librdkafka's own log lines (connection retries...) go to the `logway.tools.rdkafka` logger, off by default."""
    logger = logging.getLogger("logway.tools.rdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger


class Admin:
    """An AdminClient with a deadline for every call; a failed call becomes a ToolError with the broker's words."""

    def __init__(self, bootstrap: str, command_config: str | None = None, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.errors: list[KafkaError] = []  # what librdkafka reported on the side (a failed login, ...)
        config = {**client_config(bootstrap, command_config), "error_cb": self.errors.append}
        try:
            self.client = AdminClient(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ToolError(f"client configuration: {describe_error(exc)}") from None
        self.bootstrap = bootstrap

    def metadata(self):
        """Cluster metadata of all topics; broker unreachable within the timeout is a ToolError.

        Always all topics: a Metadata request naming a topic lets a broker with auto.create.topics.enable
        create it, and a tool that only looks must not create anything.
        """
        try:
            return self.client.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            self.client.poll(0)  # delivers librdkafka's queued error callbacks
            login = [e for e in self.errors if e.code() == KafkaError._AUTHENTICATION]
            if login:  # the client retries a refused login until the timeout, then says "transport failure"
                raise ToolError(login[-1].str()) from None
            if error is not None and error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                                      KafkaError._ALL_BROKERS_DOWN):
                raise ToolError(f"cannot reach a broker at {self.bootstrap} within {self.timeout:g}s "
                                f"({error.str()})") from None
            raise ToolError(describe_error(exc)) from None

    def wait(self, future: Future, what: str) -> Any:
        """The result of one admin call, or a ToolError naming ``what`` failed and why."""
        try:
            return future.result(timeout=self.timeout + 5)
        except TimeoutError:
            raise ToolError(f"{what}: no answer from {self.bootstrap} within {self.timeout:g}s") from None
        except KafkaException as exc:
            raise ToolError(f"{what}: {describe_error(exc)}") from None

    def options(self) -> dict[str, float]:
        """request_timeout for an admin call, in seconds as confluent-kafka takes it."""
        return {"request_timeout": self.timeout}


def describe_error(exc: BaseException) -> str:
    """A KafkaException's error as one line: the broker's message and Kafka's error name."""
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        text = error.str()
        name = error.name()
        return text if name.lstrip("_").lower() in text.lower().replace(" ", "_") else f"{text} ({name})"
    return str(exc) or type(exc).__name__


def parse_config_list(items: Iterable[str]) -> dict[str, str]:
    """kafka-configs' --add-config syntax: k1=v1,k2=[a,b] (square brackets for values holding commas)."""
    configs: dict[str, str] = {}
    for item in items:
        for part in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", item):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise ToolError(f"config {part!r}: expected KEY=VALUE")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            configs[key.strip()] = value
    return configs
