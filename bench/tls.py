"""TLS and SASL cost, measured against a `logway serve` process: produce and consume MB/s with confluent-kafka
over PLAINTEXT, SSL and SASL_SSL (and the SSL/PLAINTEXT ratios), new SASL_SSL connections per second (TLS
handshake + SASL PLAIN or SCRAM-SHA-256, then close), and Tansu over TLS when its --cert/--key work. `make
bench` runs it after the main bench. Bounded: a fixed record count and connection count.

    .venv/bin/python -m bench.tls [--records 50000] [--size 1024] [--connections 200]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import secrets
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench.peer import tansu_binary
from bench.procs import REPO, free_port, recv_exact

sys.path.insert(0, str(REPO / "tests" / "gateway"))
from tls_certs import make_certs  # noqa: E402

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


def start(d: Path, certs: dict) -> tuple[subprocess.Popen, dict[str, int]]:
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL")}
    subprocess.run([sys.executable, "-m", "logway.cli", "users", "add", "--log-dirs", str(d / "data"),
                    "--user", "bench", "--password", "bench-secret"], check=True)
    props = d / "server.properties"
    props.write_text("\n".join([
        "listeners=" + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        f"log.dirs={d / 'data'}", "ssl.keystore.type=PEM", f"ssl.keystore.location={certs['server']}",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={certs['ca']}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "group.initial.rebalance.delay.ms=0", ""]))
    proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "serve", "--config", str(props),
                             "--log-level", "WARNING"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", ports["SASL_SSL"]), timeout=1).close()
            return proc, ports
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gateway did not start")


def client_conf(name: str, port: int, certs: dict) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": name}
    if "SSL" in name:
        conf["ssl.ca.location"] = certs["ca"]
    if name.startswith("SASL"):
        conf.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bench", "sasl.password": "bench-secret"})
    return conf


def throughput(conf: dict, topic: str, records: int, size: int) -> tuple[float, float]:
    value = os.urandom(size)
    producer = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000})
    producer.list_topics(topic, timeout=20)
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produce_s = time.perf_counter() - t0
    consumer = Consumer({**conf, "group.id": "bench-tls", "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    # Timed from the first records received, so the consumer's start-up (connections, metadata) is not in it.
    got, first, start, t0 = 0, 0, time.perf_counter(), 0.0
    while got < records and time.perf_counter() - start < 120:
        batch = sum(1 for m in consumer.consume(500, 1.0) if m.error() is None)
        if batch and not t0:
            t0, first = time.perf_counter(), batch
        got += batch
    consume_s = time.perf_counter() - t0
    consumer.close()
    return records * size / 1e6 / produce_s, (got - first) * size / 1e6 / consume_s


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
    with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        _call(s, 17, 1, struct.pack(">h", len(mechanism)) + mechanism.encode())
        if mechanism == "PLAIN":
            _authenticate(s, b"\0bench\0bench-secret")
            return
        nonce = secrets.token_urlsafe(18)
        first = f"n=bench,r={nonce}"
        server_first = _authenticate(s, b"n,," + first.encode()).decode()
        attrs = dict(p.split("=", 1) for p in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", b"bench-secret", base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{first},{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        _authenticate(s, f"{without_proof},p={proof}".encode())


def tansu_tls(d: Path, certs: dict, records: int, size: int) -> tuple[float, float, float, float] | str:
    """Tansu's produce/consume MB/s over TLS and over plaintext, or why they could not be measured."""
    pem = Path(certs["server"]).read_text()
    cert, key = d / "tansu-cert.pem", d / "tansu-key.pem"
    cert.write_text(pem.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")
    key.write_text(pem[pem.index("-----BEGIN PRIVATE KEY-----"):])
    try:
        binary = tansu_binary()
    except Exception as exc:  # noqa: BLE001 (no peer: say so, measure Logway anyway)
        return f"no Tansu binary ({exc})"
    figures = []
    for tls in (True, False):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"] + (["--cert", str(cert), "--key", str(key)] if tls else [])
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)
            if proc.poll() is not None:
                return f"tansu {' '.join(cmd[1:2] + cmd[-4:])} exited: " + proc.stderr.read().strip().splitlines()[0]
            if tls:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
                        ssl.create_default_context(cafile=certs["ca"]).wrap_socket(raw, server_hostname="127.0.0.1")
                except (OSError, ssl.SSLError) as exc:
                    return f"Tansu did not complete a TLS handshake ({exc})"
            conf = client_conf("SSL" if tls else "PLAINTEXT", port, certs)
            figures += throughput(conf, "t-tansu", records, size)
        finally:
            proc.terminate()
            proc.wait(30)
    return tuple(figures)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--connections", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        certs = make_certs(d)
        proc, ports = start(d, certs)
        figures: dict[str, tuple[float, float]] = {}
        try:
            print(f"## TLS ({args.records} x {args.size} B records, confluent-kafka, one producer then one consumer)\n")
            print("| broker, listener | produce MB/s | consume MB/s | produce vs PLAINTEXT | consume vs PLAINTEXT |")
            print("|---|---|---|---|---|")
            for name, port in ports.items():
                figures[name] = throughput(client_conf(name, port, certs), f"t-{name.lower()}", args.records, args.size)
                base = figures["PLAINTEXT"]
                print(f"| Logway {name} | {figures[name][0]:.1f} | {figures[name][1]:.1f} | "
                      f"{figures[name][0] / base[0]:.2f} | {figures[name][1] / base[1]:.2f} |")
            context = ssl.create_default_context(cafile=certs["ca"])
            rates = {}
            for mechanism in ("PLAIN", "SCRAM-SHA-256"):
                t0 = time.perf_counter()
                for _ in range(args.connections):
                    sasl_connect(ports["SASL_SSL"], context, mechanism)
                rates[mechanism] = args.connections / (time.perf_counter() - t0)
        finally:
            proc.terminate()
            proc.wait(30)
        tansu = tansu_tls(d, certs, args.records, args.size)
        if isinstance(tansu, tuple):
            ssl_figs = figures["SSL"]
            print(f"| Tansu SSL | {tansu[0]:.1f} | {tansu[1]:.1f} | {tansu[0] / tansu[2]:.2f} | {tansu[1] / tansu[3]:.2f} |")
            print(f"\nLogway/Tansu over TLS: produce {ssl_figs[0] / tansu[0]:.2f}, consume {ssl_figs[1] / tansu[1]:.2f}")
        else:
            print(f"\nTansu over TLS: not measured: {tansu}")
        print(f"\nNew SASL_SSL connections/s ({args.connections} one after another, TLS handshake + SASL + close): "
              + ", ".join(f"{m} {r:.0f}/s" for m, r in rates.items()))


if __name__ == "__main__":
    main()
