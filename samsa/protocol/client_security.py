"""How a Samsa client secures its connections: Kafka's client properties, read once.

Every client of Samsa's own (the tools' raw requests, the Spark data source) takes the
properties a Java client takes, or librdkafka's names for them:

    security.protocol          PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    sasl.mechanism(s)          PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    sasl.jaas.config           PlainLoginModule / ScramLoginModule with username and password
      (or sasl.username and sasl.password)
    ssl.truststore.location    CA certificates, PEM (ssl.truststore.type=PEM); or ssl.ca.location
    ssl.keystore.location      a client certificate: key and chain in one PEM file (mutual TLS);
      (or ssl.certificate.location and ssl.key.location; ssl.key.password)
    ssl.endpoint.identification.algorithm   "" or none: no host name check

`ClientSecurity.from_properties` checks them (ValueError naming the property), `tls_context`
builds the TLS context and `login` runs SaslHandshake and SaslAuthenticate over a connection
given as a blocking `request(api_key, version, body)` function.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.protocol.jaas import JaasError, parse_jaas
from samsa.protocol.scram import SCRAM_HASHES, SaslClientError, ScramClient

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *SCRAM_HASHES)

Request = Callable[[int, int, dict[str, Any]], Any]


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""
    cafile: str | None = None
    cadata: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    def __repr__(self) -> str:  # (never the password)
        return f"ClientSecurity({self.protocol}, {self.mechanism if self.sasl else ''} {self.username!r})"

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"security.protocol={protocol}: expected {', '.join(PROTOCOLS)}")
        out: dict[str, Any] = {"protocol": protocol}
        if protocol.startswith("SASL"):
            mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").upper()
            if mechanism not in MECHANISMS:
                raise ValueError(f"sasl.mechanism={mechanism}: expected {', '.join(MECHANISMS)}")
            login = jaas_login(props)
            if login is None:
                raise ValueError(f"security.protocol={protocol} needs sasl.jaas.config (or sasl.username and "
                                 "sasl.password)")
            out.update(mechanism=mechanism, username=login[0], password=login[1])
        if protocol in ("SSL", "SASL_SSL"):
            trust = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
            if props.get("ssl.truststore.location") and props.get("ssl.truststore.type", "PEM").upper() != "PEM":
                raise ValueError("ssl.truststore.type: give the CA certificates as PEM (ssl.truststore.type=PEM)")
            out["cafile"] = trust or None
            out["cadata"] = props.get("ssl.truststore.certificates") or props.get("ssl.ca.pem") or None
            keystore = props.get("ssl.keystore.location")
            if keystore:
                if props.get("ssl.keystore.type", "PEM").upper() != "PEM":
                    raise ValueError("ssl.keystore.type: give the client key and certificate as PEM "
                                     "(ssl.keystore.type=PEM)")
                out["certfile"] = out["keyfile"] = keystore
            else:
                out["certfile"] = props.get("ssl.certificate.location") or None
                out["keyfile"] = props.get("ssl.key.location") or None
            out["key_password"] = props.get("ssl.key.password") or None
            algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
            out["check_hostname"] = algorithm.lower() not in ("", "none")
        return cls(**out)

    def tls_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.cafile, cadata=self.cadata)
        if self.certfile:
            ctx.load_cert_chain(self.certfile, self.keyfile, self.key_password)
        ctx.check_hostname = self.check_hostname
        return ctx

    def login(self, request: Request) -> None:
        """SaslHandshake v1 and SaslAuthenticate v2 on a fresh connection; SaslClientError."""
        hs = request(17, 1, {"mechanism": self.mechanism})
        if hs.error_code:
            raise SaslClientError(f"the broker does not offer SASL mechanism {self.mechanism} (it offers "
                                  f"{', '.join(hs.mechanisms) or 'none'}): set sasl.mechanism")

        def step(token: bytes) -> bytes:
            r = request(36, 2, {"auth_bytes": token})
            if r.error_code:
                raise SaslClientError(f"SASL {self.mechanism} authentication as {self.username!r} failed: "
                                      f"{r.error_message or 'refused by the broker'}")
            return bytes(r.auth_bytes)

        if self.mechanism == "PLAIN":
            step(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        client = ScramClient(self.mechanism, self.username, self.password)
        client.verify(step(client.final(step(client.first()))))


def jaas_login(props: Mapping[str, str]) -> tuple[str, str] | None:
    """(username, password) of a Java client's sasl.jaas.config (PlainLoginModule or
    ScramLoginModule), or librdkafka's sasl.username / sasl.password; None if neither is set."""
    text = props.get("sasl.jaas.config")
    if text:
        try:
            module, options = parse_jaas(text)
        except JaasError as e:
            raise ValueError(str(e)) from None
        if not module.endswith(("PlainLoginModule", "ScramLoginModule")):
            raise ValueError(f"sasl.jaas.config: {module} is not supported (PlainLoginModule or ScramLoginModule)")
        if "username" not in options or "password" not in options:
            raise ValueError("sasl.jaas.config needs username=\"...\" and password=\"...\"")
        return options["username"], options["password"]
    if "sasl.username" in props:
        return props["sasl.username"], props.get("sasl.password", "")
    return None


# Java client security settings that librdkafka spells differently (or not at all).
SECURITY_KEYS = frozenset({"sasl.jaas.config", "sasl.mechanism", "ssl.truststore.location", "ssl.truststore.type",
                           "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keystore.location",
                           "ssl.keystore.type", "ssl.keystore.password", "ssl.endpoint.identification.algorithm",
                           "sasl.username", "sasl.password"})


def librdkafka_security(props: Mapping[str, str]) -> dict[str, str]:
    """A Java client's TLS and SASL settings as librdkafka names them (PEM and PKCS12 stores);
    the keys of SECURITY_KEYS are translated, every other key is the caller's to pass on.
    ValueError names a setting librdkafka cannot take."""
    out: dict[str, str] = {}
    login = jaas_login(props)
    if login is not None:
        out["sasl.username"], out["sasl.password"] = login
    if "sasl.mechanism" in props:
        out["sasl.mechanisms"] = props["sasl.mechanism"]
    trust = props.get("ssl.truststore.location")
    if trust:
        kind = props.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise ValueError(f"ssl.truststore.type={kind}: give the CA certificates as PEM (ssl.truststore.type=PEM) "
                             "or as ssl.ca.location")
        out["ssl.ca.location"] = trust
    if props.get("ssl.truststore.certificates"):
        out["ssl.ca.pem"] = props["ssl.truststore.certificates"]
    keystore = props.get("ssl.keystore.location")
    if keystore:
        kind = props.get("ssl.keystore.type", "JKS").upper()
        if kind == "PEM":  # key and certificate chain in one file
            out["ssl.certificate.location"] = keystore
            out["ssl.key.location"] = keystore
        elif kind == "PKCS12":
            out["ssl.keystore.location"] = keystore
            if "ssl.keystore.password" in props:
                out["ssl.keystore.password"] = props["ssl.keystore.password"]
        else:
            raise ValueError(f"ssl.keystore.type={kind}: use PEM or PKCS12 (keytool -importkeystore converts JKS)")
    if props.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out


def librdkafka_config(props: Mapping[str, str]) -> dict[str, str]:
    """Client properties for confluent-kafka: security settings translated, the rest as given."""
    return {**{k: v for k, v in props.items() if k not in SECURITY_KEYS}, **librdkafka_security(props)}
