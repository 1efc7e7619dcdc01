"""ssl.principal.mapping.rules (server/security/principal_mapping.py) against the cases of Kafka's
SslPrincipalMapperTest: which rules parse, which are refused, and what each DN maps to."""

from __future__ import annotations

import pytest

from logway.server.security.principal_mapping import NoMatchingRule, PrincipalMapper

KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("rules", "dn", "name"), [
    (KAFKA_RULES, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    (KAFKA_RULES, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    (KAFKA_RULES, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    (KAFKA_RULES, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    (KAFKA_RULES, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ("DEFAULT", "CN=alice,OU=Eng,O=Acme,C=US", "CN=alice,OU=Eng,O=Acme,C=US"),
    ("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT", "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz", "Tkac\\, Adam"),
    # A reference to a group that does not exist is literal text (Kafka's escapeLiteralBackReferences).
    ("RULE:^CN=(.*?),.*$/$1@$4/", "CN=bob,O=Acme", "bob@$4"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1-x/,   DEFAULT  ", "abc", "abc-x"),
    (",,RULE:^CN=([a-z]+)$/u-$1/,,,DEFAULT,,", "CN=eve", "u-eve"),
    ("RULE:^CN=([a-z]+)$/\\/$1\\$/", "CN=eve", "/eve$"),
])
def test_rules_map_the_dn_as_kafka_does(rules, dn, name):
    assert PrincipalMapper(rules).name(dn) == name


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        PrincipalMapper(rules)


def test_no_matching_rule_is_an_error():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=bob"):
        PrincipalMapper("RULE:^CN=alice$/alice/").name("CN=bob")
    assert PrincipalMapper("").rules == []
