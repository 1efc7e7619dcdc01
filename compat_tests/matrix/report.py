"""The compatibility matrix (client x scenario -> pass/fail) printed after a pytest session and written to MATRIX.md."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
MATRIX_MD = HERE / "MATRIX.md"

CLIENTS = {  # test file stem -> column label
    "test_java": "Java kafka-clients",
    "test_librdkafka": "confluent-kafka (librdkafka)",
    "test_kcat": "kcat (librdkafka)",
    "test_kafka_python": "kafka-python",
    "test_aiokafka": "aiokafka",
    "test_kafkajs": "kafkajs",
}
SCENARIOS = ["admin", "roundtrip", "idempotent", "idempotent_restart", "group", "offsets", "spark"]


def client_versions() -> dict[str, str]:
    """Exact versions of every client in the matrix, as installed."""
    out: dict[str, str] = {}
    try:
        import kafka

        out["test_kafka_python"] = kafka.__version__
    except ImportError:
        pass
    try:
        import aiokafka

        out["test_aiokafka"] = aiokafka.__version__
    except ImportError:
        pass
    try:
        import confluent_kafka

        out["test_librdkafka"] = f"{confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        pass
    if shutil.which("kcat"):
        text = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"Version (\S+) .*librdkafka (\S+)", text)
        if m:
            out["test_kcat"] = f"{m[1]} / librdkafka {m[2]}"
    jar = HERE / "java" / "lib" / "kafka-clients.jar"
    if jar.exists():
        with zipfile.ZipFile(jar) as z:
            props = z.read("kafka/kafka-version.properties").decode()
        m = re.search(r"^version=(\S+)", props, re.M)
        if m:
            out["test_java"] = m[1]
    pkg = HERE / "node" / "node_modules" / "kafkajs" / "package.json"
    if pkg.exists():
        out["test_kafkajs"] = json.loads(pkg.read_text())["version"]
    return out


@dataclass
class Matrix:
    """Outcomes of the matrix cells seen in this session."""

    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)

    def record(self, nodeid: str, when: str, outcome: str, longrepr: str) -> None:
        """Fold one pytest phase report into the cell it belongs to (setup errors and skips count too)."""
        m = re.search(r"(test_\w+)\.py::test_(\w+)", nodeid)
        if not m or m[1] not in CLIENTS:
            return
        cell = (m[1], m[2])
        if outcome == "skipped":
            self.cells[cell] = "skip"
            self.reasons[cell] = _reason(longrepr)
        elif outcome == "failed":
            self.cells[cell] = "FAIL" if when == "call" else "ERROR"
            self.reasons[cell] = _reason(longrepr)
        elif when == "call":
            self.cells.setdefault(cell, "pass")

    def markdown(self, broker: str) -> str:
        """The matrix as a markdown table plus one line per failing or skipped cell."""
        versions = client_versions()
        clients = [c for c in CLIENTS if any(k[0] == c for k in self.cells)]
        scenarios = [s for s in SCENARIOS if any(k[1] == s for k in self.cells)]
        scenarios += sorted({k[1] for k in self.cells} - set(scenarios))
        lines = [f"# Client compatibility matrix against {broker}", ""]
        lines.append("| scenario | " + " | ".join(f"{CLIENTS[c]} {versions.get(c, '')}".strip() for c in clients) + " |")
        lines.append("| --- |" + " --- |" * len(clients))
        for s in scenarios:
            lines.append(f"| {s} | " + " | ".join(self.cells.get((c, s), "") for c in clients) + " |")
        notes = [f"- {CLIENTS[c]} / {s}: {self.cells[(c, s)]}: {self.reasons[(c, s)]}" for c, s in sorted(self.reasons)]
        if notes:
            lines += ["", "## Failures and skips", "", *notes]
        return "\n".join(lines) + "\n"


def _reason(longrepr: str) -> str:
    """The most telling single line of a failure: the first `E ` line of the traceback, else the last line."""
    text = str(longrepr)
    if "Skipped: " in text:
        return text.split("Skipped: ", 1)[1].removesuffix("')")
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()[:400]
    last = text.strip().splitlines()[-1] if text.strip() else ""
    return last[:400]
