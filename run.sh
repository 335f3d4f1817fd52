#!/usr/bin/env bash
# Set up Samsa (idempotent) and run the main job: the realtime data pipeline demo — a Samsa
# broker, simulated air-quality sensors, the Spark Structured Streaming job and the live
# dashboard on http://127.0.0.1:8050/, with its data in ./samsa-demo. Ctrl-C stops it all.
# Extra arguments go to `samsa demo` (e.g. --rate 5000 --duration 120); see `samsa demo --help`.
set -euo pipefail
cd "$(dirname "$0")"
SAMSA_SKIP_TEST_DEPS=1 bash scripts/install-deps.sh
echo "==> starting the demo (samsa demo $*)"
exec .venv/bin/samsa demo "$@"
