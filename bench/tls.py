"""TLS beside Apache Kafka 4.3.1 (`make bench` runs it after the main bench): one Logway and one Kafka process,
each with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256) listeners configured with the same Kafka settings (PEM
keystore, TLS 1.3), driven by the same librdkafka load in alternated rounds (the broker order rotates every round):

- produce: 1 KiB records into 8 partitions (round robin), acks=all, one producer;
- consume: the same records read back from earliest by one consumer (fetch.queue.backoff.ms=10);
- 100 producer connections: 1 KiB, acks=1, 8 partitions, 50 producers in each of 2 processes;

MB/s and broker CPU-s per GB for each listener, then new SASL_SSL connections per second (TLS handshake +
SaslHandshake + SaslAuthenticate, then close) with PLAIN and SCRAM-SHA-256, and whether Tansu 0.6 serves TLS.
Bounded: fixed record and connection counts.

    .venv/bin/python -m bench.tls [--records 300000] [--rounds 3] [--conn-records 200000] [--peers kafka] [--latest]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import logging
import os
import secrets
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from bench.admin import create_topic
from bench.cases import throughput
from bench.driver import run_load
from bench.latest import write_section
from bench.peer import tansu_binary
from bench.procs import REPO, Broker, Kafka, Logway, free_port, recv_exact, scratch_dir
from bench.report import git_revision, machine
from bench.request_cost import BaselineLogway

sys.path.insert(0, str(REPO / "tests" / "gateway"))
from tls_certs import make_certs  # noqa: E402

log = logging.getLogger("bench.tls")
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, SECRET = "bench", "bench-secret"
PARTITIONS = 8
KIB = 1024
CASES = (("produce", "produce 1 KiB, 8 partitions, acks=all, 1 producer"),
         ("consume", "consume it from earliest, 1 consumer"),
         ("connections", "produce 1 KiB, 8 partitions, acks=1, 100 producer connections (2 processes)"))


def security_settings(certs: dict[str, str]) -> dict[str, str]:
    """The broker settings of both brokers' SSL and SASL_SSL listeners, in Kafka's names."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"],
            "ssl.truststore.type": "PEM", "ssl.truststore.location": certs["ca"],
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{SECRET}";',
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"}


def three_ports(plaintext: int) -> dict[str, int]:
    return {"PLAINTEXT": plaintext, "SSL": free_port(), "SASL_SSL": free_port()}


class SecureLogway(Logway):
    """`logway serve` with PLAINTEXT, SSL and SASL_SSL listeners."""

    def __init__(self, workdir: Path, certs: dict[str, str]) -> None:
        super().__init__(workdir, security_settings(certs))
        self.ports = three_ports(self.port)

    def listeners(self) -> str:
        return ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())


class SecureBaseline(BaselineLogway):
    """The same, from another source tree (--baseline DIR: before and after in the same rounds)."""

    listeners = SecureLogway.listeners

    def __init__(self, workdir: Path, tree: Path, certs: dict[str, str]) -> None:
        super().__init__(workdir, tree, security_settings(certs))
        self.ports = three_ports(self.port)


class SecureKafka(Kafka):
    """Apache Kafka (one KRaft node, kafka-server-start's JVM) with PLAINTEXT, SSL and SASL_SSL listeners."""

    def __init__(self, workdir: Path, certs: dict[str, str]) -> None:
        super().__init__(workdir, security_settings(certs))
        node = self.cluster.nodes[0]
        self.ports = three_ports(node.port)
        advertised = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        self.cluster.config.update({
            "listeners": f"{advertised},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": advertised,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"})


@dataclass
class Endpoint:
    """One listener of a broker, as the load generators reach it (run_load reads the broker's CPU through it)."""

    broker: Broker
    listener: str
    ca: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.ports[self.listener]}"

    @property
    def pid(self) -> int:
        return self.broker.pid

    def cpu_seconds(self) -> float:
        return self.broker.cpu_seconds()

    @property
    def client(self) -> dict[str, str]:
        """librdkafka settings for this listener."""
        conf = {"security.protocol": self.listener}
        if "SSL" in self.listener:
            conf["ssl.ca.location"] = self.ca
        if self.listener.startswith("SASL"):
            conf.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": SECRET})
        return conf


def add_scram_user(broker: Broker) -> None:
    """The SCRAM-SHA-256 user the SASL_SSL clients log in as, made through AlterUserScramCredentials (KIP-554)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          SECRET.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def one_listener(endpoint: Endpoint, name: str, records: int, conn_records: int) -> dict[str, dict]:
    """Produce, consume back and produce from 100 connections on one listener: each case's throughput()."""
    broker = endpoint.broker
    create_topic(broker.bootstrap, name, PARTITIONS)
    client = endpoint.client
    produce = run_load(endpoint, [{"mode": "rdkafka.produce", "topic": name, "count": records, "size": KIB,
                                   "acks": "all", "round_robin": PARTITIONS, "config": client}], timeout=600)
    broker.settle()  # writeback of what was just written does not run during the timed read
    ends = [records // PARTITIONS + (p < records % PARTITIONS) for p in range(PARTITIONS)]
    consume = run_load(endpoint, [{"mode": "rdkafka.consume", "topic": name, "assign": list(range(PARTITIONS)),
                                   "ends": ends, "size": KIB,
                                   "config": {**client, "fetch.queue.backoff.ms": 10}}], timeout=600)
    create_topic(broker.bootstrap, name + "-conns", PARTITIONS)
    connections = run_load(endpoint, [{"mode": "rdkafka.produce", "topic": name + "-conns", "count": conn_records // 2,
                                       "size": KIB, "acks": "1", "producers": 50, "config": client}
                                      for _ in range(2)], timeout=600)
    return {"produce": throughput(produce), "consume": throughput(consume), "connections": throughput(connections)}


def run_rounds(brokers: list[Broker], ca: str, args: argparse.Namespace) -> dict:
    """results[case][listener][broker name] = one throughput() per round; a warm-up round first (not kept)."""
    results: dict = {case: {listener: {b.name: [] for b in brokers} for listener in args.listeners}
                     for case, _ in CASES}
    for broker in brokers:
        for listener in args.listeners:
            log.info("warm-up: %s %s", broker.name, listener)
            one_listener(Endpoint(broker, listener, ca), f"warm-{listener.lower()}", args.warmup_records,
                         args.warmup_records)
    for i in range(args.rounds):
        for broker in brokers[i % len(brokers):] + brokers[:i % len(brokers)]:
            for listener in args.listeners:
                log.info("round %d: %s %s", i, broker.name, listener)
                figures = one_listener(Endpoint(broker, listener, ca), f"tls-{listener.lower()}-{i}", args.records,
                                       args.conn_records)
                for case, result in figures.items():
                    if result["errors"]:
                        log.warning("%s %s %s: %d messages failed", broker.name, listener, case, result["errors"])
                    results[case][listener][broker.name].append(result)
    return results


# --- new SASL_SSL connections per second ------------------------------------------------------------------

def _frame(api_key: int, version: int, body: bytes, correlation: int) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation, 5) + b"bench"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _call(s, api_key: int, version: int, body: bytes) -> bytes:
    s.sendall(_frame(api_key, version, body, 1))
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, size)[4:]


def _authenticate(s, token: bytes) -> bytes:
    body = _call(s, 36, 1, struct.pack(">i", len(token)) + token)
    error, msg_len = struct.unpack_from(">hh", body)
    if error:
        raise RuntimeError(f"authentication failed: {error}")
    pos = 4 + max(msg_len, 0)
    (n,) = struct.unpack_from(">i", body, pos)
    return body[pos + 4: pos + 4 + n]


def sasl_connect(port: int, context: ssl.SSLContext, mechanism: str) -> None:
    """One new connection: TCP, TLS handshake, SaslHandshake, SaslAuthenticate (one or two rounds), close."""
    with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        _call(s, 17, 1, struct.pack(">h", len(mechanism)) + mechanism.encode())
        if mechanism == "PLAIN":
            _authenticate(s, f"\0{USER}\0{SECRET}".encode())
            return
        nonce = secrets.token_urlsafe(18)
        first = f"n={USER},r={nonce}"
        server_first = _authenticate(s, b"n,," + first.encode()).decode()
        attrs = dict(p.split("=", 1) for p in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", SECRET.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{first},{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        _authenticate(s, f"{without_proof},p={proof}".encode())


def handshake_rates(broker: Broker, ca: str, connections: int) -> dict[str, float]:
    """New SASL_SSL connections per second, one after another, per mechanism."""
    context = ssl.create_default_context(cafile=ca)
    rates = {}
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        t0 = time.perf_counter()
        for _ in range(connections):
            sasl_connect(broker.ports["SASL_SSL"], context, mechanism)
        rates[mechanism] = connections / (time.perf_counter() - t0)
    return rates


def tansu_tls(d: Path, certs: dict) -> str:
    """Whether Tansu completes a TLS handshake with its --cert/--key (0.6.0 does not), in one line."""
    pem = Path(certs["server"]).read_text()
    cert, key = d / "tansu-cert.pem", d / "tansu-key.pem"
    cert.write_text(pem.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")
    key.write_text(pem[pem.index("-----BEGIN PRIVATE KEY-----"):])
    try:
        binary = tansu_binary()
    except Exception as exc:  # noqa: BLE001 (no peer: say so)
        return f"no Tansu binary ({exc})"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", "memory://tansu/", "--cert", str(cert), "--key", str(key)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        if proc.poll() is not None:
            return f"`tansu broker --cert --key` exits: {proc.stderr.read().strip().splitlines()[0]}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
                ssl.create_default_context(cafile=certs["ca"]).wrap_socket(raw, server_hostname="127.0.0.1")
        except (OSError, ssl.SSLError) as exc:
            return f"Tansu did not complete a TLS handshake ({exc})"
        return "Tansu completes a TLS handshake: add it to bench.tls's brokers"
    finally:
        proc.terminate()
        proc.wait(30)


# --- the report ---------------------------------------------------------------------------------------------

def spread(values: list[float], digits: int = 1) -> str:
    """Median (min–max)."""
    if not values:
        return "–"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def per_round_ratios(results: dict, case: str, listener: str, key: str, num: str = "logway",
                     den: str = "kafka") -> list[float]:
    """Logway / Kafka for each round (the two measured in the same round)."""
    runs = results[case][listener]
    return [a[key] / b[key] for a, b in zip(runs.get(num, []), runs.get(den, []), strict=False)
            if a.get(key) and b.get(key)]


def goals(results: dict) -> list[str]:
    """Issue 26's TLS goals: produce and consume over SSL and SASL_SSL at >= 1.0x Kafka's throughput and at most
    Kafka's broker CPU-s/GB (medians of the per-round ratios)."""
    lines = ["| goal (issue 26) | verdict | median of per-round Logway/Kafka |", "|---|---|---|"]
    for case in ("produce", "consume"):
        for listener in ("SSL", "SASL_SSL"):
            if listener not in results[case]:
                continue
            speed = per_round_ratios(results, case, listener, "mb_s")
            cost = per_round_ratios(results, case, listener, "cpu_s_per_gb")
            if not speed or not cost:
                continue
            met = statistics.median(speed) >= 1.0 and statistics.median(cost) <= 1.0
            lines.append(f"| {case} over {listener}: >= 1.0x Kafka's MB/s, <= Kafka's CPU-s/GB | "
                         f"{'met' if met else 'missed'} | {statistics.median(speed):.2f}x MB/s, "
                         f"{statistics.median(cost):.2f}x CPU-s/GB |")
    return lines


HEADS = {"logway": "Logway", "baseline": "Logway before", "kafka": "Kafka 4.3.1"}
PAIRS = (("logway", "kafka"), ("logway", "baseline"))


def table(results: dict, names: list[str]) -> list[str]:
    """One row per case and listener: each broker's MB/s and CPU-s/GB, and the per-round ratios of each pair."""
    pairs = [(a, b) for a, b in PAIRS if a in names and b in names]
    columns = ([f"{HEADS[n]} MB/s" for n in names] + [f"{HEADS[a]}/{HEADS[b]} MB/s" for a, b in pairs]
               + [f"{HEADS[n]} CPU-s/GB" for n in names] + [f"{HEADS[a]}/{HEADS[b]} CPU-s/GB" for a, b in pairs])
    lines = ["| case | listener | " + " | ".join(columns) + " | others (cores) |",
             "|---" * (len(columns) + 3) + "|"]
    for case, label in CASES:
        for listener, runs in results[case].items():
            row = [label, listener] + [spread([r["mb_s"] for r in runs.get(n, [])]) for n in names]
            row += [spread(per_round_ratios(results, case, listener, "mb_s", a, b), 2) + "x" for a, b in pairs]
            row += [spread([r["cpu_s_per_gb"] for r in runs.get(n, [])], 2) for n in names]
            row += [spread(per_round_ratios(results, case, listener, "cpu_s_per_gb", a, b), 2) + "x" for a, b in pairs]
            row.append(spread([r["other_cores"] for n in names for r in runs.get(n, [])], 2))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def markdown(results: dict, rates: dict[str, dict[str, float]], tansu: str, args: argparse.Namespace,
             load: tuple[str, str], minutes: float) -> str:
    """The "## TLS" section of LATEST.md."""
    stamp, info = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"), machine()
    names = [n for n in HEADS if any(n in runs for c in results.values() for runs in c.values())]
    lines = [f"## TLS — {stamp} (`python -m bench.tls`, a step of `make bench`)", "",
             f"Command: `python -m bench.tls {' '.join(args.argv)}` · git {git_revision()} · {minutes:.1f} min · "
             f"{args.rounds} rounds after a warm-up round of {args.warmup_records:,} records per listener, the order "
             f"of the brokers rotating every round. Load average at start {load[0]}, at end {load[1]} (the machine "
             f"is shared: `others` is the CPU other processes used meanwhile, in cores).", "",
             f"Machine: {info['cpu']}, {info['cores']} cores, Linux {info['kernel']}, Python {info['python']}, "
             f"OpenSSL {ssl.OPENSSL_VERSION.split()[1]}, librdkafka {info['librdkafka']}.", "",
             f"One process per broker with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256) listeners, the same settings "
             f"(PEM keystore with an EC P-256 certificate, TLS 1.3: TLS_AES_256_GCM_SHA384; Kafka with "
             f"kafka-server-start's JVM). Per listener and round: {args.records:,} x 1 KiB produced into 8 "
             f"partitions (librdkafka, linger.ms=5, batch.size=1 MiB, acks=all), read back from earliest by one "
             f"consumer (fetch.queue.backoff.ms=10), then {args.conn_records:,} x 1 KiB from 100 producer "
             f"connections (acks=1). MB/s and broker CPU-s per GB (utime+stime of the broker process): median "
             f"(min–max) over rounds; a ratio is the median (min–max) of per-round ratios."
             + (f" `Logway before` is Logway from {args.baseline}." if args.baseline else ""), ""]
    lines += table(results, names)
    if "logway" in names and "kafka" in names:
        lines += [""] + goals(results)
    lines += ["", f"New SASL_SSL connections per second, {args.connections} one after another (TCP, TLS handshake, "
              "SaslHandshake, SaslAuthenticate, close): "
              + "; ".join(f"{HEADS[n]} " + ", ".join(f"{m} {r:.0f}/s" for m, r in rates[n].items()) for n in rates)
              + ".", "", f"Tansu 0.6 over TLS: not measured: {tansu}.", "",
              "kTLS (the kernel's TLS record layer, which would let Fetch use sendfile over TLS): not available here. "
              "Python 3.11's ssl has no OP_ENABLE_KTLS (3.12 adds it), and this kernel is built without "
              "CONFIG_TLS (setsockopt TCP_ULP \"tls\" fails with ENOENT). Logway's TLS record layer runs in "
              "user space over memory BIOs (server/tls_socket.py): large reads, one decrypt per record."]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tls", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=300_000, help="1 KiB records per produce/consume run")
    p.add_argument("--conn-records", type=int, default=200_000, help="records of the 100-connection case")
    p.add_argument("--warmup-records", type=int, default=50_000, help="records per listener in the warm-up round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=100, help="new SASL_SSL connections timed per mechanism")
    p.add_argument("--listeners", default=",".join(LISTENERS))
    p.add_argument("--peers", default="kafka", help="kafka, or '' for Logway alone")
    p.add_argument("--baseline", type=Path, help="also run Logway from this source tree (before/after columns)")
    p.add_argument("--latest", action="store_true", help="replace the TLS section of bench/LATEST.md")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.listeners = tuple(x.strip() for x in args.listeners.split(",") if x.strip())
    if set(args.listeners) - set(LISTENERS) or args.rounds < 1:
        raise SystemExit(f"--listeners: a subset of {','.join(LISTENERS)}; --rounds at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    load0, t0 = " ".join(f"{x:.2f}" for x in os.getloadavg()), time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(Path(tmp))
        brokers: list[Broker] = [SecureLogway(scratch_dir("tls-logway"), certs)]
        if args.baseline:
            brokers.append(SecureBaseline(scratch_dir("tls-baseline"), args.baseline, certs))
        if "kafka" in args.peers:
            brokers.append(SecureKafka(scratch_dir("tls-kafka"), certs))
        try:
            for broker in brokers:
                broker.start()
                add_scram_user(broker)
            results = run_rounds(brokers, certs["ca"], args)
            rates = {b.name: handshake_rates(b, certs["ca"], args.connections) for b in brokers}
        finally:
            for broker in brokers:
                broker.cleanup()
        tansu = tansu_tls(Path(tmp), certs)
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    md = markdown(results, rates, tansu, args, (load0, load1), (time.monotonic() - t0) / 60)
    print(md)
    if args.latest:
        write_section(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
