#!/usr/bin/env bash
# Set up Samsa (idempotent) and run the main job: today, one broker on 127.0.0.1:9092 with its
# data in ./data. Extra arguments go to `samsa broker start` (e.g. --override num.partitions=3).
set -euo pipefail
cd "$(dirname "$0")"
SAMSA_SKIP_TEST_DEPS=1 bash scripts/install-deps.sh
mkdir -p data
if [ ! -f config/server.properties ]; then
  echo "error: config/server.properties is missing" >&2
  exit 1
fi
echo "==> starting the Samsa broker (Ctrl-C stops it cleanly)"
exec .venv/bin/samsa broker start config/server.properties "$@"
