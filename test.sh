#!/usr/bin/env bash
# Set up everything the tests need (idempotent: Debian packages, the venv, kafkajs) and run
# the whole suite against real brokers and real clients. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install-deps.sh
# the Java client tests fail, not skip, when the JDK or Kafka's jars are missing
export SAMSA_REQUIRE_JAVA="${SAMSA_REQUIRE_JAVA:-1}"
echo "==> running the test suite"
exec .venv/bin/python -m pytest -q "$@"
