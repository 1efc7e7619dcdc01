"""Spark's own Kafka connector jars (format "kafka"), resolved from Maven Central with Maven.

`python -m logway.spark.kafka_jars` prints a comma-separated list for `spark.jars`. The connector's
version must equal the installed PySpark's, so it is taken from `pyspark.__version__`; Maven caches the
downloads in ~/.m2 and the copies land in spark/kafka-connector/jars/<version>/ (git-ignored), so a second
call costs nothing. spark.jars.packages (Ivy) works too, but downloads Hadoop's client (~30 MB) that
PySpark already ships; the pom here takes only the four jars PySpark lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).resolve().parent / "kafka-connector" / "pom.xml"
ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2")


def pyspark_version() -> str:
    """The installed PySpark's version: the connector must be built for the same Spark."""
    import pyspark

    return pyspark.__version__


def connector_jars(spark_version: str | None = None, jars_dir: Path | None = None) -> list[str]:
    """Paths of the connector's jars for `spark_version` (default: the installed PySpark), resolving once."""
    version = spark_version or pyspark_version()
    target = jars_dir or _default_dir(version)
    jars = _found(target)
    if len(jars) < len(ARTIFACTS):
        _resolve(version, target)
        jars = _found(target)
    if len(jars) < len(ARTIFACTS):
        raise RuntimeError(f"Maven did not copy the Kafka connector jars for Spark {version} into {target}")
    return [str(p) for p in jars]


def _default_dir(version: str) -> Path:
    """spark/kafka-connector/jars/<version> in a checkout (git-ignored); the user's cache dir for a read-only install."""
    if os.access(POM.parent, os.W_OK):
        return POM.parent / "jars" / version
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "logway" / "spark-kafka-jars" / version


def _found(target: Path) -> list[Path]:
    return sorted(p for p in target.glob("*.jar") if p.name.startswith(ARTIFACTS))


def _resolve(version: str, target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven (mvn) is needed to fetch Spark's Kafka connector: apt-get install maven")
    command = [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
               f"-Dspark.version={version}", f"-Djars.dir={target}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"resolving org.apache.spark:spark-sql-kafka-0-10_2.13:{version} from Maven Central "
                           f"failed (is that version published?):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


if __name__ == "__main__":
    print(",".join(connector_jars(sys.argv[1] if len(sys.argv) > 1 else None)))
