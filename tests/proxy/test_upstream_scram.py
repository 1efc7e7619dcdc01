"""The proxy authenticates to its upstream with SCRAM-SHA-256/512 (proxy.upstream.sasl.mechanism), as a Kafka
client does: the client math against the broker's own SCRAM server, then a real Logway broker with SCRAM
users behind the proxy; a wrong password is one clear log line and closed client connections, never a hang."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError as KpError

from logway.proxy.config import ProxyConfig
from logway.server.config import ConfigError
from logway.server.security.credentials import CredentialStore
from logway.server.security.scram import ScramClient, ScramError, ScramServer, make_credential

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_brokers_scram_server(mechanism):
    credential = make_credential(mechanism, "pw-1")
    server = ScramServer(mechanism, {"proxy": credential}.get)
    client = ScramClient(mechanism, "proxy", "pw-1")
    client.verify(server.respond(client.final(server.respond(client.first()))))
    assert server.complete and server.username == "proxy"

    wrong = ScramClient(mechanism, "proxy", "nope")
    server = ScramServer(mechanism, {"proxy": credential}.get)
    with pytest.raises(ScramError):
        server.respond(wrong.final(server.respond(wrong.first())))


def test_scram_client_matches_rfc7677():
    """RFC 7677 section 3's SCRAM-SHA-256 exchange, byte for byte."""
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_client_refuses_a_server_that_does_not_know_the_password():
    """The server's signature proves it holds the credential: an impostor's final message is refused."""
    server = ScramServer("SCRAM-SHA-256", {"proxy": make_credential("SCRAM-SHA-256", "pw")}.get)
    client = ScramClient("SCRAM-SHA-256", "proxy", "pw")
    client.final(server.respond(client.first()))
    with pytest.raises(ScramError, match="server signature"):
        client.verify(b"v=" + b"A" * 44)
    with pytest.raises(ScramError, match="nonce"):
        ScramClient("SCRAM-SHA-256", "proxy", "pw").final(b"r=other,s=AAAA,i=4096")


def test_upstream_scram_config_is_read_like_a_kafka_clients():
    props = {"proxy.upstream.bootstrap.servers": "127.0.0.1:9092", "listeners": "PLAINTEXT://127.0.0.1:9192",
             "proxy.upstream.security.protocol": "SASL_PLAINTEXT", "proxy.upstream.sasl.mechanism": "SCRAM-SHA-512",
             "proxy.upstream.sasl.jaas.config": f'{SCRAM} username="proxy" password="p w";'}
    upstream = ProxyConfig(props).upstream
    assert (upstream.mechanism, upstream.username, upstream.password) == ("SCRAM-SHA-512", "proxy", "p w")
    with pytest.raises(ConfigError, match="GSSAPI"):
        ProxyConfig({**props, "proxy.upstream.sasl.mechanism": "GSSAPI"})
    with pytest.raises(ConfigError, match="ScramLoginModule"):
        ProxyConfig({**props, "proxy.upstream.sasl.jaas.config": f"{SCRAM};"})


def test_proxy_authenticates_upstream_with_scram_sha_512(processes, topic_name):
    """A SCRAM-only Logway upstream: the proxy logs in as its own SCRAM user and a plaintext client produces,
    consumes in a group and commits through it. With a wrong password the proxy logs one clear line and
    clients get closed connections (a retriable error) at once, not a hang."""
    upstream = processes["gateway"]("data", "--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
                                    "--override", "sasl.enabled.mechanisms=SCRAM-SHA-512",
                                    "--override", "group.initial.rebalance.delay.ms=0", "--override", "node.id=1")
    store = CredentialStore(upstream.data_dir)
    store.set("proxy", "SCRAM-SHA-512", "up-secret")
    upstream.start()
    proxy = processes["proxy"](upstream.bootstrap, "--override", "proxy.upstream.security.protocol=SASL_PLAINTEXT",
                               "--override", "proxy.upstream.sasl.mechanism=SCRAM-SHA-512",
                               "--override", f'proxy.upstream.sasl.jaas.config={SCRAM} username="proxy" '
                                             'password="up-secret";').start()
    proxy.wait_node_port(1)
    admin = KafkaAdminClient(bootstrap_servers=proxy.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, acks="all")
    for i in range(10):
        producer.send(topic_name, f"s{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=proxy.bootstrap, group_id=f"{topic_name}-g",
                             auto_offset_reset="earliest", consumer_timeout_ms=10000, enable_auto_commit=False)
    values = [m.value for _, m in zip(range(10), consumer, strict=False)]
    consumer.commit()
    consumer.close()
    assert sorted(values) == sorted(f"s{i}".encode() for i in range(10))

    wrong = processes["proxy"](upstream.bootstrap, "--override", "proxy.upstream.security.protocol=SASL_PLAINTEXT",
                               "--override", "proxy.upstream.sasl.mechanism=SCRAM-SHA-512",
                               "--override", f'proxy.upstream.sasl.jaas.config={SCRAM} username="proxy" '
                                             'password="nope";').start()
    started = time.monotonic()
    with pytest.raises(KpError):
        KafkaAdminClient(bootstrap_servers=wrong.bootstrap, request_timeout_ms=5000, api_version_auto_timeout_ms=5000)
    assert time.monotonic() - started < 8
    time.sleep(1.5)  # a refresh of the cluster watcher or two: still one line
    refused = [line for line in wrong.log().splitlines() if "refused the proxy's credentials" in line]
    assert len(refused) == 1 and "SCRAM-SHA-512 authentication as proxy failed" in refused[0], wrong.log()
    assert "Traceback" not in wrong.log()
