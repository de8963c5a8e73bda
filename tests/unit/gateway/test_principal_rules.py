"""Kafka's ssl.principal.mapping.rules (gateway/principal_rules.py), with the examples of
Kafka's documentation and its refusals."""

import pytest

from martlet.gateway.principal_rules import NoMatchingRule, mapped, parse_rules
from martlet.gateway.tls import principal

RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/ , "
         "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
         "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L, DEFAULT")


@pytest.mark.parametrize(("name", "expected"), [
    ("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US", "kafka-server1"),
    ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US", "duke@javasoft"),
    ("OU=Unit,cN=Svc.One,O=Org", "svc.one"),
    ("OU=Unit,O=Org", "OU=Unit,O=Org"),  # DEFAULT: as it is
])
def test_the_first_rule_that_matches_the_whole_name_maps_it(name, expected):
    assert mapped(parse_rules(RULES), name) == expected


def test_upper_case_escapes_and_named_groups():
    rules = parse_rules(r"RULE:^CN=(?P<user>[^,]*),O=a\/b$/${user}\/$1\$/U")
    assert mapped(rules, "CN=bob,O=a/b") == "BOB/BOB$"


def test_a_name_no_rule_maps_has_no_principal():
    rules = parse_rules("RULE:^CN=(.*),OU=ops$/$1/")
    assert mapped(rules, "CN=eve,OU=ops") == "eve"
    with pytest.raises(NoMatchingRule):
        mapped(rules, "CN=eve,OU=dev")
    with pytest.raises(NoMatchingRule):
        principal({"subject": ((("commonName", "eve"),), (("organizationalUnitName", "dev"),))[::-1]}, rules)
    assert principal({}, rules) == "User:ANONYMOUS"  # no certificate: nothing to map


@pytest.mark.parametrize("text", ["", "RULE:^CN=(.*)$/$1", "RULE:^CN=(.*)$/$1/X", "NOPE", "RULE:(/$1/",
                                  "RULE:^CN=(.*)$/$x/"])
def test_rules_kafka_refuses_are_refused(text):
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        parse_rules(text)
