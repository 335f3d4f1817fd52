"""Certificates made by a test, with the openssl command: a CA, a server certificate for
127.0.0.1/localhost and client certificates, as PEM files (key then certificate chain, the
layout of Kafka's ssl.keystore.type=PEM) and PKCS12."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _run(*cmd: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr.strip()}"


@dataclass
class Pki:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def keystore(self, name: str) -> Path:
        """`name`'s private key followed by its certificate: a PEM key store."""
        return self.dir / f"{name}.pem"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    def cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def pkcs12(self, name: str, password: str) -> Path:
        out = self.dir / f"{name}.p12"
        _run("openssl", "pkcs12", "-export", "-inkey", str(self.key(name)), "-in", str(self.cert(name)),
             "-certfile", str(self.ca), "-passout", f"pass:{password}", "-out", str(out))
        return out

    def issue(self, name: str, subject: str, *, server: bool = False) -> None:
        key, csr, crt = self.key(name), self.dir / f"{name}.csr", self.cert(name)
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", subject)
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "extendedKeyUsage=clientAuth\n")
        _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey", str(self.dir / "ca.key"),
             "-CAcreateserial", "-days", "2", "-out", str(crt), "-extfile", str(ext))
        self.keystore(name).write_bytes(key.read_bytes() + crt.read_bytes())


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / "ca.key"),
         "-out", str(pki.ca), "-days", "2", "-subj", "/CN=Samsa Test CA")
    pki.issue("server", "/CN=localhost/O=Samsa", server=True)
    pki.issue("alice", "/C=GB/O=Samsa/OU=eng/CN=alice")
    return pki
