"""Broker settings from the environment: `LOGWAY_<KAFKA_NAME>`, as Kafka's container images read `KAFKA_*`.

`LOGWAY_LOG_RETENTION_MS=60000` is `log.retention.ms=60000`. Precedence: command-line flags > environment >
`--config` file. An environment name cannot say where a Kafka name had a dot, a dash or an underscore, so a
name is read the way Confluent's images read `KAFKA_*` (cp-docker-images `env_to_props`): `_` is a dot, `___`
a dash and `__` an underscore (`LOGWAY_LISTENER_NAME_SASL__SSL_PLAIN_SASL_JAAS_CONFIG`). When a name has no
`__`, it is first looked up among the keys the broker knows (upper-cased, dots and dashes as `_`), so a known
name never needs the escapes; `listener.name.<listener>.<key>` is recognised with its listener name kept
whole (`LOGWAY_LISTENER_NAME_SASL_SSL_SCRAM_SHA_256_SASL_JAAS_CONFIG`). A name that is neither gets the
same "unknown config" warning as an unknown key in the file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

log = logging.getLogger("logway.server.config")

PREFIX = "LOGWAY_"
# LOGWAY_* variables that are not broker settings: the knobs of the project's test and soak targets (as
# Confluent's images skip KAFKA_HEAP_OPTS, KAFKA_OPTS, ...).
NOT_SETTINGS_PREFIXES = ("LOGWAY_TEST_", "LOGWAY_FUZZ_", "LOGWAY_KILL", "LOGWAY_KAFKA_JARS")


def env_name(key: str) -> str:
    """The environment variable for a known Kafka key: `log.retention.ms` -> `LOGWAY_LOG_RETENTION_MS`."""
    return PREFIX + key.upper().replace(".", "_").replace("-", "_")


def confluent_key(suffix: str) -> str:
    """Confluent's rule for an env name without its prefix: `_` -> `.`, then `___` -> `-`, `__` -> `_`."""
    dotted = suffix.lower().replace("_", ".")
    return dotted.replace("...", "-").replace("..", "_")


def _listener_key(suffix: str, security_keys: Iterable[str], mechanisms: Iterable[str]) -> str | None:
    """`LISTENER_NAME_<NAME>_<KEY>` as `listener.name.<name>.<key>`, the listener name kept whole (it may
    hold `_`, as SASL_SSL does); <KEY> is a security key or `<mechanism>.sasl.jaas.config`."""
    head = "LISTENER_NAME_"
    if not suffix.startswith(head):
        return None
    rest = suffix[len(head):]
    tails = {k: k for k in security_keys}
    tails.update({f"{m.lower()}.sasl.jaas.config": f"{m.lower()}.sasl.jaas.config" for m in mechanisms})
    for tail in sorted(tails, key=len, reverse=True):
        env_tail = "_" + env_name(tail)[len(PREFIX):]
        name = rest[: -len(env_tail)] if rest.endswith(env_tail) else ""
        if name:
            return f"listener.name.{name.lower()}.{tails[tail]}"
    return None


def env_settings(
    environ: Mapping[str, str], known: Iterable[str], security_keys: Iterable[str] = (),
    mechanisms: Iterable[str] = (),
) -> dict[str, str]:
    """The broker properties given as LOGWAY_* variables in ``environ`` (Kafka key -> value)."""
    by_env = {env_name(k): k for k in known}
    out: dict[str, str] = {}
    read: list[str] = []
    for name, value in sorted(environ.items()):
        if not name.startswith(PREFIX) or name.startswith(NOT_SETTINGS_PREFIXES) or name == PREFIX:
            continue
        suffix = name[len(PREFIX):]
        key = None
        if "__" not in suffix:
            key = by_env.get(name) or _listener_key(suffix, security_keys, mechanisms)
        out[key or confluent_key(suffix)] = value
        read.append(f"{name} as {key or confluent_key(suffix)}")
    if read:  # names only: values may be passwords
        log.info("settings from the environment: %s", ", ".join(read))
    return out
