"""TLS for the SSL listeners and the broker's own connections to other brokers: Kafka's ssl.*
keys made into Python `ssl.SSLContext`s.

Each key may be set per listener as `listener.name.<name>.<key>` (BrokerConfig.for_listener).

    ssl.keystore.type            PEM or PKCS12. JKS (Kafka's default) is Java's own format:
                                 refused with the keytool command that converts it.
    ssl.keystore.location        PEM: the private key and the certificate chain in one file
                                 (`ssl.key.password` if the key is encrypted). PKCS12:
                                 `ssl.keystore.password` opens it.
    ssl.keystore.key /           the same PEM inline (Kafka's KIP-651)
      ssl.keystore.certificate.chain
    ssl.truststore.*             the CAs a peer's certificate must chain to: a PEM file,
                                 PKCS12, or `ssl.truststore.certificates` inline
    ssl.client.auth              none, requested, required (mutual TLS)
    ssl.enabled.protocols        TLSv1.2 and/or TLSv1.3
    ssl.cipher.suites            TLS 1.2 suites, OpenSSL names
    ssl.endpoint.identification.algorithm
                                 between brokers: https checks the host name, empty does not

Python's ssl module loads keys only from files: PKCS12 and inline PEM are written to a private
temporary file (mode 0600, in a directory only this process can read), loaded, and removed at
once.

`principal_of(cert, rules)` turns a client certificate's subject into Kafka's principal
(`User:CN=...,OU=...`, RFC 2253 order), shaped by `ssl.principal.mapping.rules`.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from samsa.config import BrokerConfig, ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ConfigError):
    pass


def _get(cfg: BrokerConfig, listener: str, key: str) -> Any:
    return cfg.for_listener(listener, key)


def _key_name(listener: str, key: str) -> str:
    return f"{key} (listener {listener})"


@contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="samsa-tls-") as d:  # (created 0700)
        path = os.path.join(d, "key.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path


def _pkcs12(path: str, password: str | None, what: str) -> tuple[bytes, bytes, list[bytes]]:
    """(PEM key or b"", PEM certificate or b"", [PEM CA certificates]) of a PKCS12 file."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:  # pragma: no cover - a dependency of samsa
        raise TlsConfigError(f"{what}: PKCS12 needs the 'cryptography' package") from None
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise TlsConfigError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(raw, password.encode() if password else None)
    except ValueError as e:
        raise TlsConfigError(f"{what}: cannot open PKCS12 {path} (wrong password?): {e}") from None
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) if key is not None else b""
    cert_pem = cert.public_bytes(Encoding.PEM) if cert is not None else b""
    return key_pem, cert_pem, [c.public_bytes(Encoding.PEM) for c in extra or []]


def _load_keystore(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str, required: bool) -> bool:
    """Load this listener's key and certificate chain into `ctx`; False when none is configured."""
    kind = str(_get(cfg, listener, "ssl.keystore.type")).upper()
    location = _get(cfg, listener, "ssl.keystore.location")
    inline_key = _get(cfg, listener, "ssl.keystore.key")
    inline_chain = _get(cfg, listener, "ssl.keystore.certificate.chain")
    what = _key_name(listener, "ssl.keystore")
    if not location and not inline_key:
        if required:
            raise TlsConfigError(f"{what}: an SSL listener needs a key and certificate: set ssl.keystore.location "
                                 "(PEM or PKCS12, with ssl.keystore.type) or ssl.keystore.key and "
                                 "ssl.keystore.certificate.chain")
        return False
    if inline_key:
        if not inline_chain:
            raise TlsConfigError(f"{what}: ssl.keystore.key needs ssl.keystore.certificate.chain")
        pem = (str(inline_key).strip() + "\n" + str(inline_chain).strip() + "\n").encode()
        password = _get(cfg, listener, "ssl.key.password")
    elif kind == "JKS":
        raise TlsConfigError(f"{what}: ssl.keystore.type=JKS (Java's format) is not supported: convert it with "
                             f"`keytool -importkeystore -srckeystore {location} -destkeystore store.p12 "
                             "-deststoretype PKCS12` and set ssl.keystore.type=PKCS12, or use PEM")
    elif kind == "PKCS12":
        key, cert, chain = _pkcs12(str(location), _get(cfg, listener, "ssl.keystore.password"), what)
        if not key or not cert:
            raise TlsConfigError(f"{what}: {location} holds no private key and certificate")
        pem = key + cert + b"".join(chain)
        password = None
    else:  # PEM file
        try:
            with open(str(location), "rb") as f:
                pem = f.read()
        except OSError as e:
            raise TlsConfigError(f"{what}: cannot read {location}: {e.strerror or e}") from None
        password = _get(cfg, listener, "ssl.key.password")
    try:
        with _private_file(pem) as path:
            ctx.load_cert_chain(path, password=password or None)
    except ssl.SSLError as e:
        raise TlsConfigError(f"{what}: the key and certificate do not load (a wrong ssl.key.password, or not "
                             f"a PEM key followed by its certificate chain?): {e}") from None
    return True


def _load_truststore(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str) -> bool:
    kind = str(_get(cfg, listener, "ssl.truststore.type")).upper()
    location = _get(cfg, listener, "ssl.truststore.location")
    inline = _get(cfg, listener, "ssl.truststore.certificates")
    what = _key_name(listener, "ssl.truststore")
    try:
        if inline:
            ctx.load_verify_locations(cadata=str(inline))
        elif location:
            if kind == "JKS":
                raise TlsConfigError(f"{what}: ssl.truststore.type=JKS (Java's format) is not supported: convert it "
                                     "to PKCS12 with keytool -importkeystore, or use PEM")
            if kind == "PKCS12":
                _, cert, chain = _pkcs12(str(location), _get(cfg, listener, "ssl.truststore.password"), what)
                certs = [c for c in [cert, *chain] if c]
                if not certs:
                    raise TlsConfigError(f"{what}: {location} holds no certificate")
                ctx.load_verify_locations(cadata=b"".join(certs).decode())
            else:
                ctx.load_verify_locations(cafile=str(location))
        else:
            return False
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(f"{what}: the trusted certificates do not load: {e}") from None
    return True


def _common(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str) -> None:
    enabled = [str(v) for v in _get(cfg, listener, "ssl.enabled.protocols")]
    unknown = [v for v in enabled if v not in _VERSIONS]
    if unknown or not enabled:
        raise TlsConfigError(f"{_key_name(listener, 'ssl.enabled.protocols')}: {','.join(enabled) or '(empty)'}: "
                             "Samsa speaks TLSv1.2 and TLSv1.3 (older versions are insecure)")
    versions = sorted(_VERSIONS[v] for v in enabled)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    suites = [str(v) for v in _get(cfg, listener, "ssl.cipher.suites")]
    if suites:
        try:
            ctx.set_ciphers(":".join(suites))
        except ssl.SSLError:
            raise TlsConfigError(f"{_key_name(listener, 'ssl.cipher.suites')}: none of {','.join(suites)} is a "
                                 "cipher suite OpenSSL knows (use OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-SHA256)"
                                 ) from None


def server_context(cfg: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of an SSL (or SASL_SSL) listener; TlsConfigError says what is wrong."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(ctx, cfg, listener)
    _load_keystore(ctx, cfg, listener, required=True)
    auth = str(_get(cfg, listener, "ssl.client.auth"))
    if auth != "none":
        if not _load_truststore(ctx, cfg, listener):
            raise TlsConfigError(f"{_key_name(listener, 'ssl.client.auth')}={auth} needs a trust store to check "
                                 "client certificates: set ssl.truststore.location or ssl.truststore.certificates")
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(cfg: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context this broker connects to another broker's `listener` with (replication)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(ctx, cfg, listener)
    if not _load_truststore(ctx, cfg, listener):
        ctx.load_default_certs()
    _load_keystore(ctx, cfg, listener, required=False)  # for brokers that require client certificates
    ctx.check_hostname = str(_get(cfg, listener, "ssl.endpoint.identification.algorithm")).lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# -- principals ----------------------------------------------------------------------------------

# X.500 attribute names as Java's X500Principal writes them in RFC 2253 form.
_ATTRS = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
          "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET", "domainComponent": "DC",
          "userId": "UID"}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def subject_dn(cert: dict[str, Any]) -> str:
    """RFC 2253 form of a peer certificate's subject (`SSLObject.getpeercert()`): the last RDN
    first, as Java's X500Principal.getName() gives it."""
    rdns = []
    for rdn in cert.get("subject", ()):
        rdns.append("+".join(f"{_ATTRS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(reversed(rdns))


_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(,|$)")


def parse_mapping_rules(text: str) -> list[tuple[re.Pattern[str], str, str] | None]:
    """Kafka's ssl.principal.mapping.rules: `RULE:pattern/replacement/[LU]` entries and
    `DEFAULT`, comma-separated; None stands for DEFAULT. ValueError for anything else."""
    rules: list[tuple[re.Pattern[str], str, str] | None] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None:
            raise ValueError(f"ssl.principal.mapping.rules: cannot read {text[pos:]!r} (expected DEFAULT or "
                             "RULE:pattern/replacement/[LU])")
        if m.group(1) == "DEFAULT":
            rules.append(None)
        else:
            # Java's $1 in the replacement is Python's \1
            repl = re.sub(r"\$(\d+)", r"\\\1", m.group(3))
            rules.append((re.compile(m.group(2)), repl, m.group(4)))
        pos = m.end()
    return rules


def apply_mapping_rules(dn: str, rules: list[tuple[re.Pattern[str], str, str] | None]) -> str:
    """The principal name of `dn`: the first rule whose pattern matches the whole DN; DEFAULT
    (or no rule matching) keeps the DN itself."""
    for rule in rules:
        if rule is None:
            return dn
        pattern, repl, case = rule
        if pattern.fullmatch(dn):
            out = pattern.sub(repl, dn)
            return out.lower() if case == "L" else out.upper() if case == "U" else out
    return dn


def principal_of(cert: dict[str, Any] | None, rules: list[tuple[re.Pattern[str], str, str] | None]) -> str | None:
    """`User:<name>` of a verified client certificate, None without one (the client stays
    User:ANONYMOUS)."""
    if not cert:
        return None
    return "User:" + apply_mapping_rules(subject_dn(cert), rules)
