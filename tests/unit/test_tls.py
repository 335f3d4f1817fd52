"""Principals from client certificates (samsa/server/tls.py): the RFC 2253 subject as Java's
X500Principal writes it, and Kafka's ssl.principal.mapping.rules."""

from __future__ import annotations

import pytest

from samsa.server.tls import apply_mapping_rules, parse_mapping_rules, principal_of, subject_dn

CERT = {"subject": ((("countryName", "GB"),), (("organizationName", "Samsa, Ltd"),),
                    (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}


def test_the_subject_is_written_last_rdn_first_with_escapes() -> None:
    assert subject_dn(CERT) == "CN=alice,OU=eng,O=Samsa\\, Ltd,C=GB"


@pytest.mark.parametrize(("rules", "principal"), [
    ("DEFAULT", "User:CN=alice,OU=eng,O=Samsa\\, Ltd,C=GB"),
    ("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/,DEFAULT", "User:alice@eng"),
    ("RULE:^CN=(.*?),OU=ops,.*$/$1/,DEFAULT", "User:CN=alice,OU=eng,O=Samsa\\, Ltd,C=GB"),  # no match: next rule
    ("RULE:^CN=(.*?),.*$/$1/U", "User:ALICE"),
    ("RULE:^CN=([a-z]+),OU=.*$/Svc-$1/L, DEFAULT", "User:svc-alice"),
])
def test_mapping_rules_as_kafka_applies_them(rules: str, principal: str) -> None:
    assert principal_of(CERT, parse_mapping_rules(rules)) == principal


def test_no_certificate_is_no_principal() -> None:
    assert principal_of(None, [None]) is None and principal_of({}, [None]) is None


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*)$/$1", "NOPE", "DEFAULT;RULE:a/b/"])
def test_a_malformed_rule_says_what_it_could_not_read(bad: str) -> None:
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        parse_mapping_rules(bad)


def test_a_rule_matching_nothing_keeps_the_dn() -> None:
    assert apply_mapping_rules("CN=x", parse_mapping_rules("RULE:^O=(.*)$/$1/")) == "CN=x"
