#!/usr/bin/env bash
# Install the third-party Kafka clients of the compatibility matrix (compat_tests/matrix/) from the package
# registries and compile its Java program. Idempotent: every step is skipped when its result is already there.
#   usage: compat_tests/setup.sh [VENV]   (default .venv; run from the repo root or anywhere)
# Needs Python 3.11, Java 17 (javac), Node/npm and root for apt-get (kcat).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-.venv}"
case "$VENV" in /*) ;; *) VENV="$ROOT/$VENV" ;; esac
MATRIX="$ROOT/compat_tests/matrix"
JAVA_LIB="$MATRIX/java/lib"
JAVA_CLASSES="$MATRIX/java/classes"
FLINK_WHEEL="shigawire-apache-flink-libraries==2.0.0.post1"   # ships kafka-clients 3.9.1 and its codec jars
JARS=(kafka-clients slf4j-api lz4-java snappy-java zstd-jni)

say() { echo "setup.sh: $*"; }

# Python clients: aiokafka and confluent-kafka (librdkafka), pinned so the matrix names exact versions.
if ! "$VENV/bin/python" -c "import aiokafka, confluent_kafka, kafka" 2>/dev/null; then
    say "pip install aiokafka confluent-kafka kafka-python"
    "$VENV/bin/pip" install --quiet "aiokafka==0.14.0" "confluent-kafka==2.16.1" "kafka-python>=3.0"
fi

# kcat from Debian (it brings Debian's librdkafka, a second, older librdkafka build in the matrix).
if ! command -v kcat >/dev/null; then
    say "apt-get install kcat"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

# Java client jars: extracted from a PyPI wheel that ships them (no Maven here).
missing=0
for jar in "${JARS[@]}"; do [ -f "$JAVA_LIB/$jar.jar" ] || missing=1; done
if [ "$missing" = 1 ]; then
    say "kafka-clients jars from $FLINK_WHEEL"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    "$VENV/bin/pip" download --quiet --no-deps "$FLINK_WHEEL" -d "$tmp"
    mkdir -p "$JAVA_LIB"
    members=()
    for jar in "${JARS[@]}"; do members+=("pyflink/lib/$jar.jar"); done
    "$VENV/bin/python" - "$tmp"/*.whl "$JAVA_LIB" "${members[@]}" <<'EOF'
import sys, zipfile
from pathlib import Path
wheel, dest, names = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        (dest / Path(name).name).write_bytes(z.read(name))
EOF
fi

# The Java program: recompiled when its source is newer than its class file.
if [ ! -f "$JAVA_CLASSES/Compat.class" ] || [ "$MATRIX/java/src/Compat.java" -nt "$JAVA_CLASSES/Compat.class" ]; then
    say "javac Compat.java"
    mkdir -p "$JAVA_CLASSES"
    javac -d "$JAVA_CLASSES" -cp "$JAVA_LIB/*" "$MATRIX/java/src/Compat.java"
fi

# kafkajs (+ kafkajs-snappy) from npm, as locked in package-lock.json.
if [ ! -d "$MATRIX/node/node_modules/kafkajs" ] || [ ! -d "$MATRIX/node/node_modules/kafkajs-snappy" ]; then
    say "npm ci kafkajs"
    (cd "$MATRIX/node" && npm ci --no-audit --no-fund --loglevel=error)
fi

# --- Spark's own Kafka connector (tests/spark compare format("kafka") with format("logway-kafka")) ---------
# Maven from Debian, then the connector jars for the installed PySpark from Maven Central into
# spark/kafka-connector/jars/<version>/ (git-ignored; downloads cached in ~/.m2). The Spark test fixture runs the
# same resolve itself; doing it here reports a Maven problem before the test run. Skipped when present.
if ! command -v mvn >/dev/null; then
    say "apt-get install maven"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
fi
if "$VENV/bin/python" -c "import pyspark" 2>/dev/null; then
    "$VENV/bin/python" -m logway.spark.kafka_jars >/dev/null
fi

say "clients ready"
