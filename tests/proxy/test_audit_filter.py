"""The proxy's audit filter (proxy.filter.<name>.type=audit) as real clients make it: confluent-kafka logs in to
the proxy with SASL/PLAIN, the proxy checks ACLs and forwards to a Logway broker. The same lines as the
broker's own audit log (tests/gateway/audit_scenario.py): the failed login and the denied Produce from the
proxy's own checks, the changes with the outcome the upstream answered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from audit_scenario import check, events, perform  # noqa: E402

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
AUTHORIZER = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_the_proxy_writes_one_line_for_each_audited_operation(processes, tmp_path):
    upstream = processes["gateway"]("data", "--override", AUTHORIZER, "--override", "super.users=User:ANONYMOUS",
                                    "--override", "group.initial.rebalance.delay.ms=0",
                                    "--override", "offsets.topic.num.partitions=1").start()
    audit = tmp_path / "audit" / "proxy-audit.log"
    audit.parent.mkdir()
    proxy = processes["proxy"](
        upstream.bootstrap,
        "--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f'listener.name.plaintext.plain.sasl.jaas.config={PLAIN} user_admin="admin-secret" '
                      'user_bob="bob-secret";',
        "--override", AUTHORIZER, "--override", "super.users=User:admin",
        "--override", "proxy.filters=audit", "--override", "proxy.filter.audit.type=audit",
        "--override", f"proxy.filter.audit.file={audit}")
    # bob may describe the topics at the proxy (CreateAcls through the proxy changes the upstream's ACLs).
    acls = Authorizer()
    acls.add(AclBinding(ResourceType.TOPIC, "audited", PatternType.PREFIXED, "User:bob", "*", Operation.DESCRIBE,
                        Permission.ALLOW))
    (proxy.workdir / "state").mkdir(parents=True)
    acls.save(proxy.workdir / "state" / "logway-acls.json")
    proxy.start().wait_node_port(1)

    def conf(user: str, password: str, **extra) -> dict:
        return {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": password, **extra}
    perform(conf, "audited-proxy", "audited-proxy-group")
    check(audit, "audited-proxy", "audited-proxy-group")


def test_a_virtual_clusters_users_answered_by_the_proxy_are_audited_too(processes, logway_upstream, tmp_path):
    """A tenant's SCRAM users live in its virtual cluster's realm and the proxy answers their APIs itself
    (proxy/filters/realm_users.py): the audit filter still writes the change."""
    audit = tmp_path / "tenant-audit.log"
    proxy = processes["proxy"](
        logway_upstream.bootstrap, "--override", "proxy.virtual.clusters=t",
        "--override", "proxy.virtual.cluster.t.listener=PLAINTEXT",
        "--override", "proxy.virtual.cluster.t.topic.prefix=tenant-t.",
        "--override", "proxy.filters=audit", "--override", "proxy.filter.audit.type=audit",
        "--override", f"proxy.filter.audit.file={audit}").start()
    proxy.wait_node_port(1)
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(15)
    (changed,) = events(audit, lambda e: e.get("action") == "AlterUserScramCredentials")
    assert (changed["outcome"], changed["resource_type"], changed["resource_name"], changed["details"]) == (
        "success", "USER", "carol", {"credentials": [{"upsert": "SCRAM-SHA-256", "iterations": 4096}]})
    assert b"carol-secret" not in audit.read_bytes()


def test_an_audit_file_the_proxy_cannot_open_stops_it_with_one_line(tmp_path):
    missing = tmp_path / "missing" / "audit.log"
    result = subprocess.run([sys.executable, "-m", "logway.cli", "proxy", "--upstream-bootstrap-servers", "127.0.0.1:9",
                             "--listeners", "PLAINTEXT://127.0.0.1:19599", "--override", f"log.dirs={tmp_path}",
                             "--override", "proxy.filters=audit", "--override", "proxy.filter.audit.type=audit",
                             "--override", f"proxy.filter.audit.file={missing}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"logway: configuration error: proxy.filter.audit.file={missing}: cannot open: No such file or directory" \
        in result.stderr
