#!/usr/bin/env bash
# Fetch Apache Kafka's reference jars with Maven into build/jars/<set>/ (gitignored), once:
# a set is fetched again only when its pom (scripts/jars/<set>/pom.xml) or its version
# properties change. Only the tests and later benchmarks use them; running Samsa never does.
#
#   scripts/kafka-jars.sh [SET...]                 fetch the sets (default: clients)
#   scripts/kafka-jars.sh --print-classpath SET    fetch if needed, then print the set's jars as
#                                                  a classpath (':'-joined) and nothing else on
#                                                  stdout (the progress lines go to stderr)
#
# Sets:
#   clients       org.apache.kafka:kafka-clients 4.4.0 and its codecs (zstd-jni, lz4, snappy),
#                 slf4j-api + slf4j-simple: the Java client tests (compat/java/)
#   tools         org.apache.kafka:kafka-tools 4.4.0 and kafka_2.13 4.4.0 (Kafka's CLI tools and
#                 a KRaft broker), log4j-slf4j-impl (their logging: run them with
#                 -Dlog4j2.configurationFile=scripts/jars/tools/log4j2.xml, WARN to stderr); the
#                 tools tests (tests/compat/kafkatools.py)
#   kafka39       kafka_2.13 + kafka-tools 3.9.2, the newest 3.9 (the last with ZooKeeper mode)
#   spark-kafka   org.apache.spark:spark-sql-kafka-0-10_2.13 at the installed PySpark's version
#                 (or at $SAMSA_SPARK_VERSION) and what it adds to PySpark's own jars:
#                 kafka-clients, spark-token-provider-kafka-0-10, commons-pool2 (4 jars, for
#                 spark.jars: tests/spark/test_kafka_connector.py, `samsa pipeline run --connector kafka`)
#
# Maven runs with -q -B, offline first (-o: no network when ~/.m2 already holds the set), then
# online. SAMSA_M2_REPO=DIR uses DIR as Maven's local repository (e.g. to measure a cold fetch).
# Exit status 1 with one line on stderr when Maven fails; its output is in build/jars/<set>.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POMS="$ROOT/scripts/jars"
OUT="$ROOT/build/jars"
SETS="clients tools kafka39 spark-kafka"

PRINT=0
if [ "${1:-}" = "--print-classpath" ]; then
    PRINT=1
    shift
    [ "$#" -eq 1 ] || { echo "usage: $0 --print-classpath SET" >&2; exit 2; }
fi
[ "$#" -gt 0 ] || set -- clients

step() {
    if [ "$PRINT" = 1 ]; then printf '==> %s\n' "$*" >&2; else printf '==> %s\n' "$*"; fi
}
die() { echo "kafka-jars: $*" >&2; exit 1; }

# set_props SET: the -D properties a set's pom takes (its versions that are not in the pom)
set_props() {
    case "$1" in
        spark-kafka)
            local py="$ROOT/.venv/bin/python" v
            [ -x "$py" ] || die "spark-kafka: no .venv/bin/python to read PySpark's version from (run scripts/install-deps.sh)"
            v="${SAMSA_SPARK_VERSION:-}"
            [ -n "$v" ] || v="$("$py" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)" \
                || die "spark-kafka: PySpark is not installed in .venv"
            echo "-Dspark.version=$v"
            ;;
    esac
}

fetch_set() {
    local set="$1" pom="$POMS/$1/pom.xml" dir="$OUT/$1" props key
    [ -f "$pom" ] || die "unknown set '$set' (sets: $SETS)"
    props="$(set_props "$set")"
    key="$( { cat "$pom"; echo "$props"; } | sha256sum | cut -d' ' -f1)"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$key" ]; then
        step "jars: $set already in build/jars/$set ($(ls "$dir" | grep -c '\.jar$') jars)"
        return
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn not found: run scripts/install-deps.sh (Debian package maven)"
    mkdir -p "$OUT"
    local tmp="$OUT/.$set.tmp" log="$OUT/$set.log" t0=$SECONDS
    local -a args=(-q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies
                   -DincludeScope=runtime "-DoutputDirectory=$tmp")
    [ -n "$props" ] && args+=($props)
    [ -n "${SAMSA_M2_REPO:-}" ] && args+=("-Dmaven.repo.local=$SAMSA_M2_REPO")
    rm -rf "$tmp"
    step "jars: fetching $set with Maven (scripts/jars/$set/pom.xml${props:+, $props})"
    if ! mvn -o "${args[@]}" >"$log" 2>&1; then
        rm -rf "$tmp"
        if ! mvn "${args[@]}" >"$log" 2>&1; then
            rm -rf "$tmp"
            local why
            why="$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -m1 '^\[ERROR\]' | sed 's/^\[ERROR\] *//; s/ -> \[Help 1\]//' \
                   | cut -c1-300)"
            die "Maven failed to fetch set '$set'${props:+ ($props)}: ${why:-no error line} (output in build/jars/$set.log)"
        fi
    fi
    rm -rf "$dir"
    mv "$tmp" "$dir"
    echo "$key" > "$dir/.stamp"
    step "jars: $set fetched in $((SECONDS - t0)) s: $(ls "$dir" | grep -c '\.jar$') jars, $(du -sh "$dir" | cut -f1) in build/jars/$set"
}

# One fetch at a time (parallel test sessions may call this together).
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9

for set in "$@"; do
    fetch_set "$set"
done

if [ "$PRINT" = 1 ]; then
    ls "$OUT/$1"/*.jar | paste -sd:
else
    for set in "$@"; do
        step "classpath dir: $OUT/$set (or: $0 --print-classpath $set)"
    done
fi
