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


def test_the_scram_client_matches_rfc_7677s_example() -> None:
    """SCRAM-SHA-256's worked example in RFC 7677 (user "user", password "pencil")."""
    from samsa.server.sasl_client import ScramClient

    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    import pytest

    from samsa.server.sasl_client import SaslClientError

    with pytest.raises(SaslClientError):
        c.verify(b"v=" + b"A" * 44)


def test_the_inter_broker_login_is_kafkas_rule_and_its_mistakes_are_named() -> None:
    import pytest

    from samsa.config import BrokerConfig, ConfigError
    from samsa.server.broker import inter_broker_login

    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="pw-xyz" '
            'user_b="pw-xyz";')
    base = {"listeners": "SASL_SSL://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas}
    login = inter_broker_login(BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"}), "SASL_SSL")
    assert (login.mechanism, login.username, login.password) == ("PLAIN", "b", "pw-xyz")
    assert "pw-xyz" not in repr(login)
    with pytest.raises(ConfigError, match="GSSAPI"):
        inter_broker_login(BrokerConfig(base), "SASL_SSL")  # Kafka's default mechanism
    with pytest.raises(ConfigError, match="not enabled on the inter-broker listener"):
        inter_broker_login(BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}),
                           "SASL_SSL")
    no_login = {**base, "listener.name.sasl_ssl.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_b="s";'}
    with pytest.raises(ConfigError, match="needs username"):
        inter_broker_login(BrokerConfig({**no_login, "sasl.mechanism.inter.broker.protocol": "PLAIN"}), "SASL_SSL")
