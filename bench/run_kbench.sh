#!/usr/bin/env bash
# Run the team's yardstick (../shared/bench/kbench.py, confluent-kafka) against a fresh Samsa
# broker: start-up time, throughput A (1M x 100 B, acks=1) and B (200k x 1 KiB, acks=all) with
# read-back, latency C at 1k and 10k msg/s, and the 4-partition correctness run D.
# Usage: bench/run_kbench.sh [RESULTS_DIR] [REPEAT]   (results as JSON lines + a log per step)
set -euo pipefail
cd "$(dirname "$0")/.."
KBENCH=${KBENCH:-../shared/bench/kbench.py}
OUT=${1:-bench/results/$(date +%Y%m%d-%H%M%S)}
REPEAT=${2:-3}
PORT=${PORT:-29094}
mkdir -p "$OUT"
DATA=$(mktemp -d)
cat > "$DATA/server.properties" <<PROPS
broker.id=0
listeners=PLAINTEXT://127.0.0.1:$PORT
log.dirs=$DATA/data
num.partitions=1
PROPS
K=".venv/bin/python $KBENCH"
B=127.0.0.1:$PORT
echo "==> starting Samsa on $B (data in $DATA)"
$K startup --bootstrap "$B" --label samsa --pid-file "$OUT/samsa.pid" --log "$OUT/samsa.log" -- \
  .venv/bin/python -m samsa broker start "$DATA/server.properties" | tee "$OUT/startup.jsonl"
PID=$(cat "$OUT/samsa.pid")
trap 'kill -TERM $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
echo "==> idle RSS: $(grep VmRSS /proc/$PID/status)"
for i in $(seq "$REPEAT"); do
  echo "==> A: 1M x 100 B acks=1 (run $i)"
  $K throughput --bootstrap "$B" --label samsa --broker-pid "$PID" --num 1000000 --size 100 --acks 1 --linger-ms 5 --partitions 1 --repeat 1 | tee -a "$OUT/A.jsonl"
  echo "==> B: 200k x 1 KiB acks=all (run $i)"
  $K throughput --bootstrap "$B" --label samsa --broker-pid "$PID" --num 200000 --size 1024 --acks all --linger-ms 5 --partitions 1 --repeat 1 | tee -a "$OUT/B.jsonl"
done
echo "==> C: latency"
$K latency --bootstrap "$B" --label samsa --broker-pid "$PID" --rate 1000 --rate 10000 --duration 20 --warmup 2 --linger-ms 5 --acks 1 | tee "$OUT/C5.jsonl"
$K latency --bootstrap "$B" --label samsa --broker-pid "$PID" --rate 1000 --rate 10000 --duration 20 --warmup 2 --linger-ms 0 --acks 1 | tee "$OUT/C0.jsonl"
echo "==> D: 4 partitions"
$K throughput --bootstrap "$B" --label samsa-p4 --broker-pid "$PID" --partitions 4 --num 200000 --repeat 1 | tee "$OUT/D.jsonl"
echo "==> results in $OUT"
