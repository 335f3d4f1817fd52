#!/usr/bin/env bash
# Make a test certificate authority and a broker certificate for 127.0.0.1 / localhost, as the
# README's "Security" walkthrough uses them (not for production: keep a real CA's key safe).
#   bash scripts/make-certs.sh [DIR]      (default: secrets/; existing files are kept)
set -euo pipefail
dir="${1:-secrets}"
mkdir -p "$dir"
cd "$dir"
say() { echo "==> $*"; }
if [ ! -f ca.crt ]; then
    say "certificates: a CA in $dir/ca.crt (key $dir/ca.key)"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 365 -subj "/CN=Samsa Example CA" \
        2>/dev/null
else
    say "certificates: $dir/ca.crt already exists"
fi
if [ ! -f broker.pem ]; then
    say "certificates: the brokers' key and certificate for 127.0.0.1/localhost in $dir/broker.pem"
    openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=localhost/O=Samsa" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > broker.ext
    openssl x509 -req -in broker.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile broker.ext \
        -out broker.crt 2>/dev/null
    cat broker.key broker.crt > broker.pem
    chmod 600 ca.key broker.key broker.pem
else
    say "certificates: $dir/broker.pem already exists"
fi
