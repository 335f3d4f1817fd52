#!/usr/bin/env bash
# Install what Samsa's build and tests need on a fresh Debian 12 machine. Safe to run again:
# each step checks first and skips what is already there.
#
#   Debian packages: openjdk-17-jre-headless (Spark, and ZooKeeper), and for the tests: kcat
#                    (librdkafka 2.0.x, for tests/compat), zookeeper (3.8, for the cluster tests),
#                    chromium (the dashboard's browser test), e2fsprogs + mount (mkfs.ext4 and
#                    losetup: the failing-disk tests), nodejs + npm (only if `node` is
#                    missing), python3-venv (only if a venv must be made with Debian's python),
#                    libjemalloc2 (bench/vs_kafka.py runs librdkafka's consumer on it too),
#                    prometheus (its promtool lints the broker's /metrics in a test)
#   C:               gcc, libc6-dev (and python3-dev for Debian's python): the compiled record walker
#                    and the log cleaner's offset map
#   Python:          .venv with python >= 3.11, then `pip install -e '.[pipeline]'` (the demo:
#                    PySpark, DuckDB) or, for the tests, `pip install -e '.[test,pipeline]'`
#   Java:            maven + openjdk-17-jdk-headless (only if mvn or javac is missing), then
#                    Kafka's kafka-clients jars into build/jars/clients, its CLI tools and
#                    broker (kafka-tools, kafka_2.13: ~92 jars, 54 MB) into build/jars/tools, and
#                    Spark's Kafka connector into build/jars/spark-kafka (scripts/kafka-jars.sh;
#                    about two minutes the first time, instant after)
#   Node:            compat/kafkajs/node_modules from package-lock.json (kafkajs and codecs);
#                    compat/node-rdkafka/node_modules (node-rdkafka, which compiles its bundled
#                    librdkafka with g++: about 2-3 minutes, once)
#
# Runs as root, or through sudo when not root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

step() { printf '==> %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-deps: not root and no sudo; cannot install Debian packages" >&2
        exit 1
    fi
fi

APT_UPDATED=0
apt_install() {
    # apt_install PKG...: install the given Debian packages that are not installed yet.
    local missing=()
    local p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        step "apt: $* already installed"
        return
    fi
    if [ "$APT_UPDATED" -eq 0 ]; then
        step "apt: updating package lists"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    step "apt: installing ${missing[*]}"
    # (debconf's "delaying package configuration" notice on minimal images is noise)
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null 2> >(grep -v '^debconf: delaying package configuration' >&2)
}

# SAMSA_SKIP_TEST_DEPS=1 (run.sh): only what running Samsa needs, none of the test clients.
TEST_DEPS=1
[ "${SAMSA_SKIP_TEST_DEPS:-0}" = "1" ] && TEST_DEPS=0

# --- Debian packages ---------------------------------------------------------------------
if [ "$TEST_DEPS" = 1 ]; then
    # Java 17: ZooKeeper and the local Spark; Chromium renders the dashboard in its test
    apt_install kcat zookeeper openjdk-17-jre-headless chromium fonts-dejavu-core
    # the failing-disk tests: an ext4 file system on a loop device (tests/failing_disk.py)
    apt_install e2fsprogs mount
    # ss: the socket buffer test reads the broker's sockets' sizes (tests/broker/test_socket_buffers.py)
    apt_install iproute2
    # bench/vs_kafka.py: the consume rows again with the C client on jemalloc (see there)
    apt_install libjemalloc2
    # promtool (tests/broker/test_metrics.py lints /metrics with it; the server is not started)
    apt_install prometheus
    # a JDK and Maven: Kafka's own Java client and tools for tests/compat (jars below)
    if command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then
        step "java: $(javac -version 2>&1) and mvn already present"
    else
        apt_install maven openjdk-17-jdk-headless
    fi
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
        step "node: $(node --version) and npm $(npm --version 2>/dev/null) already present"
    else
        apt_install nodejs npm
    fi
else
    apt_install openjdk-17-jre-headless  # the demo's Spark job runs on a local JVM
fi

# --- Python venv -------------------------------------------------------------------------
python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; }

if [ -x .venv/bin/python ] && python_ok .venv/bin/python; then
    step "venv: .venv already exists ($(.venv/bin/python --version))"
else
    PY=""
    for cand in python3.13 python3.12 python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 && python_ok "$cand"; then
            PY="$(command -v "$cand")"
            break
        fi
    done
    if [ -z "$PY" ]; then
        apt_install python3 python3-venv
        PY=/usr/bin/python3
        python_ok "$PY" || { echo "install-deps: no python >= 3.11 found" >&2; exit 1; }
    fi
    if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
        apt_install python3-venv
    fi
    step "venv: creating .venv with $PY ($("$PY" --version))"
    rm -rf .venv
    "$PY" -m venv .venv
fi

# The Produce validator's record walker and the cleaner's offset map are C (samsa/protocol/_recwalk.c,
# samsa/storage/_cleaner.c), compiled by pip below:
# a compiler, the C library's headers and Python's.
apt_install gcc libc6-dev
PYINC="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [ ! -f "$PYINC/Python.h" ]; then
    apt_install python3-dev
fi

if [ "$TEST_DEPS" = 1 ]; then
    step "pip: installing samsa (editable) with the test and pipeline extras (PySpark is ~320 MB the first time)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,pipeline]'
else
    step "pip: installing samsa (editable) with the pipeline extra (PySpark is ~320 MB the first time)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[pipeline]'
fi
if .venv/bin/python -c 'import samsa.protocol._recwalk' 2>/dev/null; then
    step "native: the record walker is compiled"
else
    echo "install-deps: samsa/protocol/_recwalk.c did not compile; Produce validation will run in Python (slower)" >&2
fi
if .venv/bin/python -c 'import samsa.storage._cleaner' 2>/dev/null; then
    step "native: the log cleaner's offset map is compiled"
else
    echo "install-deps: samsa/storage/_cleaner.c did not compile; compaction will run in Python (slower)" >&2
fi
# Byte-compile now: start-up time matters and PYTHONDONTWRITEBYTECODE may be set.
step "python: byte-compiling samsa"
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q samsa >/dev/null
if [ "$TEST_DEPS" = 0 ]; then
    step "done: $(.venv/bin/python --version)"
    exit 0
fi

# --- kafkajs runner ----------------------------------------------------------------------
step "npm: installing compat/kafkajs dependencies"
if [ -f compat/kafkajs/package-lock.json ]; then
    (cd compat/kafkajs && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
else
    (cd compat/kafkajs && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

# --- Kafka's Java client, CLI tools and broker (tests/compat/test_java_client*.py,
# test_kafka_tools.py, test_vs_kafka.py, tests/cluster/test_kafka_tools_cluster.py) and Spark's own
# Kafka connector at PySpark's version (tests/spark/test_kafka_connector.py, `--connector kafka`):
# jars from Maven, cached in build/jars ---
bash scripts/kafka-jars.sh clients tools spark-kafka

# --- node-rdkafka (the transaction tests): compiled once, kept while its lock file is unchanged ---
NRD=compat/node-rdkafka
NRD_STAMP="$(sha256sum "$NRD/package-lock.json" | cut -d' ' -f1)"
if [ -f "$NRD/node_modules/node-rdkafka/build/Release/node-librdkafka.node" ] \
        && [ "$(cat "$NRD/node_modules/.samsa-built" 2>/dev/null)" = "$NRD_STAMP" ]; then
    step "npm: compat/node-rdkafka already built"
else
    if ! command -v g++ >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
        apt_install g++ make
    fi
    step "npm: building compat/node-rdkafka (librdkafka from source, a few minutes)"
    (cd "$NRD" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$NRD_STAMP" > "$NRD/node_modules/.samsa-built"
fi

KCAT_VERSION="$(kcat -V 2>/dev/null | sed -n 's/^Version \([^ ]*\) .*librdkafka \([0-9.]*\).*/\1 (librdkafka \2)/p')"
step "done: kcat ${KCAT_VERSION:-?}, node $(node --version), $(.venv/bin/python --version)"
