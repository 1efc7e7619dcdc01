"""``meta.properties``: the cluster id each log dir belongs to (Kafka's format, version 1), written durably once.

Read as Kafka's MetaPropertiesEnsemble reads it: a file that is there but cannot be read, or has no
cluster.id (a damaged file, or one left empty by a power loss before its data reached the disk), stops
the start with an error naming the file, and so do log dirs (or a cluster.id setting) that disagree.
A log dir without the file (new, or emptied) gets one with the cluster id of the others, or a new id.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from logway.server.config import parse_properties
from logway.storage import fs
from logway.storage.checkpoints import write_atomically
from logway.storage.errors import KafkaStorageError

META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    """Kafka's cluster id format: a random UUID as 22 characters of URL-safe base64 (Uuid.toString())."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read_cluster_id(path: Path) -> str | None:
    """The cluster.id of one meta.properties file, None if there is no such file; KafkaStorageError naming
    the file if it cannot be read or holds no cluster.id."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaStorageError(f"Error while reading meta.properties file {path}: {exc}") from None
    cluster_id = parse_properties(text).get("cluster.id", "").strip()
    if not cluster_id:
        why = "the file is empty" if not text.strip() else "it has no cluster.id"
        raise KafkaStorageError(
            f"cluster.id was not specified in {path} ({why}): restore the file with the cluster's id, or remove "
            "it to start this log dir as a new cluster")
    return cluster_id


def load_cluster_id(log_dirs: list[Path], node_id: int, configured: str = "") -> str:
    """The cluster id of the log dirs (and the ``cluster.id`` setting, when given), writing meta.properties
    durably (temp file, fsync, rename, fsync of the directory) in each log dir that has none."""
    found, source = configured, "the cluster.id setting"
    for log_dir in log_dirs:
        path = log_dir / META_PROPERTIES
        cluster_id = read_cluster_id(path)
        if cluster_id is None:
            continue
        if found and cluster_id != found:
            raise KafkaStorageError(f"Invalid cluster.id in: {path}. Expected {found} ({source}), but read {cluster_id}")
        found, source = cluster_id, str(path)
    cluster_id = found or new_cluster_id()
    for log_dir in log_dirs:
        fs.make_dirs(log_dir)
        path = log_dir / META_PROPERTIES
        if not path.exists():
            write_atomically(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    return cluster_id
