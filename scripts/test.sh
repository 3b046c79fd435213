#!/usr/bin/env bash
# The project's one test command (`npm test`): installs what the tests need on a fresh
# machine, builds, checks that generated code is current, lints, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real Kafka clients from Debian for the compatibility tests (librdkafka via kcat and
# confluent-kafka, kafka-python), etcd for multi-process clusters, chromium for the console,
# iproute2 and iptables for the network-namespace fault suite, and the reference lz4 and
# zstd tools whose frames the compression tests decode. A test never skips for a missing
# tool: it fails, so the tools are installed here.
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || missing+=(python3-confluent-kafka)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || missing+=(python3-kafka)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
# openssl makes the throwaway CA and certificates of the TLS tests (test/helpers/certs.ts).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# Headless Chromium for the web console test (test/ops/console.test.ts, via playwright-core).
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/lz4 ] || missing+=(lz4)
[ -x /usr/bin/zstd ] || missing+=(zstd)
# Java 17 and Maven for Apache Kafka 4.4, the reference broker, and its Java clients
# (scripts/kafka-reference.sh, test/compat/java-clients.test.ts).
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# Debian's venv module, for the virtualenv of the PyPI Python clients
# (scripts/install-python-clients.sh, test/compat/python-pypi-clients.test.ts).
dpkg -s python3-venv >/dev/null 2>&1 || missing+=(python3-venv)
# jemalloc, which bin/tidelog.js runs node on when installed (test/cli/launcher.test.ts): every
# broker process of the tests then runs as a deployed one does.
dpkg -s libjemalloc2 >/dev/null 2>&1 || missing+=(libjemalloc2)
# Network namespaces, veths, bridges, qdiscs and DROP rules for test/netfault.
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
# A compiler and headers for the modern librdkafka (2.15) the KIP-848 tests run on
# (scripts/build-librdkafka.sh): Debian's librdkafka 2.0.2 has no group.protocol=consumer.
for pkg in gcc make libssl-dev zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm ci on a fresh clone (or when the lock changed); it also runs `prepare` (the build).
# From a clean dist/: a test file deleted or renamed in src would otherwise still run from
# its stale compiled copy. npm ci's build (`prepare`) starts from an empty dist/ on a fresh
# clone, so it is not built twice there.
rm -rf dist
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm run --silent build
fi
[ -f dist/src/cli/main.js ] || { echo "the build left no dist/src/cli/main.js" >&2; exit 1; }
# librdkafka 2.15.1 from @confluentinc/kafka-javascript's vendored source, built once
# (about 1.5 minutes on 2 cores) into .build/librdkafka.
scripts/build-librdkafka.sh >/dev/null
# Apache Kafka 4.4.0 (the reference broker) with its Java clients, Streams and Connect, and
# MirrorMaker 2 (connect-mirror 4.3.1), from Maven Central, fetched once into
# .build/kafka-4.4.0 (about 40 s): test/compat/java-*.test.ts run the same Java client,
# Streams, Connect and MirrorMaker checks against tidelog and against it.
scripts/kafka-reference.sh install >/dev/null
# The Java programs the conformance tests run (test/compat/java), compiled in the background
# while the steps below fetch, build and lint, mostly on one core (javac takes about 40 s of
# CPU for them all); the tests find them compiled instead of compiling each in turn.
java_log="$(mktemp)"
node scripts/compile-java.mjs >"$java_log" 2>&1 &
java_pid=$!
# Beside it, the reference broker's class-data-sharing archive (scripts/kafka-reference.sh
# archive; a broker start and stop, once), which takes about 40% off the CPU of each of the
# tests' 50-odd broker and format JVM starts.
archive_log="$(mktemp)"
scripts/kafka-reference.sh archive >"$archive_log" 2>&1 &
archive_pid=$!
# confluent-kafka 2.16.1 (bundling librdkafka 2.16) and aiokafka 0.14.0 from PyPI, pinned with
# hashes in test/compat/python/requirements.txt, into the virtualenv .build/pyenv once (about
# 25 s; the wheels are kept in .build/python-wheels): test/compat/python-pypi-clients.test.ts,
# and confluent-kafka's schema registry extras: test/schema-registry/python-client.test.ts.
scripts/install-python-clients.sh >/dev/null
# The Go clients (franz-go 1.22.3 with kadm, sarama 1.61.1) from the Go module proxy, built
# once into .build/go (about 1.5 minutes the first time): test/compat/go-clients.test.ts.
command -v go >/dev/null 2>&1 || { echo "Go is needed for test/compat/go-clients.test.ts" >&2; exit 1; }
scripts/build-go-clients.sh >/dev/null

# Generated protocol code must match its generator and the vendored schemas.
npm run --silent gen:protocol >/dev/null
if ! git diff --quiet -- src/protocol/generated; then
  echo "src/protocol/generated is out of date: run 'npm run gen:protocol' and commit" >&2
  git diff --stat -- src/protocol/generated >&2
  exit 1
fi
# The configuration and error reference pages must match the code that defines them.
node scripts/gen-docs.mjs
if ! git diff --quiet -- docs/configuration.md docs/errors.md; then
  echo "docs/configuration.md or docs/errors.md is out of date: run 'npm run gen:docs' and commit" >&2
  exit 1
fi
npx biome check src test scripts bench
# Layering and import cycles (.dependency-cruiser.cjs): fails on a cycle or a forbidden import.
node scripts/lint-deps.mjs
# File and function length (scripts/lint-size.mjs): what was over the limits may only shrink.
node scripts/lint-size.mjs

if ! wait "$java_pid"; then
  # The tests compile them again and fail with the same errors, where they belong.
  echo "compiling the Java programs failed:" >&2
  cat "$java_log" >&2
fi
rm -f "$java_log"
if ! wait "$archive_pid"; then
  # Not a check: the brokers start without it, only slower.
  echo "making the Kafka class-data-sharing archive failed; the reference brokers start without it:" >&2
  cat "$archive_log" >&2
fi
rm -f "$archive_log"

export TIDELOG_LOG_LEVEL="${TIDELOG_LOG_LEVEL:-warn}"
shopt -s globstar nullglob
tests=(dist/test/**/*.test.js)
[ ${#tests[@]} -gt 0 ] || { echo "no test files found under dist/test" >&2; exit 1; }

# Test files that share one Apache Kafka 4.4 reference cluster (test/helpers/kafka-reference.ts,
# `shared: true`; docs/kafka-reference.md): each group runs as a node --test run of its own
# after the others, with the pool of TIDELOG_KAFKA_REFERENCE_POOL, whose clusters are stopped
# once the group is done (an idle 3-node cluster costs about 7% of a core). A file's checks
# must not depend on a fresh cluster to be listed here. Each group saves the JVM starts and
# KRaft formats of all but its first file.
reference_groups=(
  # 3 nodes with the StandardAuthorizer, User:ANONYMOUS a super user
  "compat/go-clients compat/java-clients compat/python-pypi-clients"
  # 3 nodes
  "compat/java-connect compat/java-streams"
)
declare -A grouped=()
for group in "${reference_groups[@]}"; do
  for name in $group; do
    [ -f "dist/test/$name.test.js" ] || { echo "scripts/test.sh groups dist/test/$name.test.js, which is gone" >&2; exit 1; }
    grouped["dist/test/$name.test.js"]=1
  done
done
# Files that start no broker, server or client process of their own (scripts/isolated-tests.mjs
# reads that from their imports) run two at a time, each on a core: the simulator's and the
# storage models' runs are CPU-bound, and the many small files' Node starts overlap.
declare -A isolated=()
while IFS= read -r file; do isolated["$file"]=1; done < <(node scripts/isolated-tests.mjs "${tests[@]}")
side_by_side=()
ungrouped=()
for file in "${tests[@]}"; do
  [ -z "${grouped[$file]:-}" ] || continue
  if [ -n "${isolated[$file]:-}" ]; then side_by_side+=("$file"); else ungrouped+=("$file"); fi
done

# The other files one at a time: many start several brokers, etcd and client processes, and
# two such files side by side on this 2-core machine starve each other's timers.
# The TAP stream is kept so that, when something fails, the failures are printed again at
# the end, after the summary: a CI log shown by its tail then names them with their errors.
tap_log="$(mktemp)"
pool="$(mktemp -d "${TMPDIR:-/tmp}/kafka-reference-pool-XXXXXX")"
# stop_pool: stops the pool's clusters, whose state directories the pool holds (listed in
# POOL/*.json or not: a test process killed while starting one could not list it). SIGKILL
# first, as startKafkaReference's stop() does: the data is thrown away, and a controlled
# shutdown of 3 nodes takes seconds; the script then removes the directory.
stop_pool() {
  local dir pidfile
  for dir in "$pool"/kafka-reference-*/; do
    for pidfile in "$dir"node-*/pid; do kill -9 "$(cat "$pidfile")" 2>/dev/null || true; done
    scripts/kafka-reference.sh stop "${dir%/}" || true
  done
  rm -f "$pool"/*.json "$pool"/*.lease
}
trap 'stop_pool; rm -rf "$pool" "$tap_log"' EXIT
status=0
# run_tests CONCURRENCY FILE...: one node --test run, its TAP output kept; remembers a failure.
# The timeout bounds each file's whole run (a hung file fails instead of stalling CI); files
# side by side share the cores, so theirs is twice as long.
run_tests() {
  local concurrency="$1" run_status
  shift
  set +e
  node --test --test-concurrency="$concurrency" --test-timeout=$((300000 * concurrency)) "$@" 2>&1 | tee -a "$tap_log"
  run_status=${PIPESTATUS[0]}
  set -e
  [ "$run_status" -eq 0 ] || status="$run_status"
}
echo "# ${#side_by_side[@]} files that start nothing of their own, two at a time"
run_tests 2 "${side_by_side[@]}"
run_tests 1 "${ungrouped[@]}"
for group in "${reference_groups[@]}"; do
  files=()
  for name in $group; do files+=("dist/test/$name.test.js"); done
  echo "# the files sharing one Kafka 4.4 reference cluster: ${files[*]}"
  # The script started by the first file stops the cluster if this script dies first.
  TIDELOG_KAFKA_REFERENCE_POOL="$pool" TIDELOG_KAFKA_REFERENCE_POOL_OWNER=$$ run_tests 1 "${files[@]}"
  stop_pool
done
# The runs' counts together (each run printed its own summary above).
awk '/^# (tests|pass|fail|cancelled|skipped|todo) [0-9]+$/ { n[$2] += $3 }
  END { printf "# all runs: tests %d, pass %d, fail %d, cancelled %d, skipped %d, todo %d\n",
    n["tests"], n["pass"], n["fail"], n["cancelled"], n["skipped"], n["todo"] }' "$tap_log"
if [ "$status" -ne 0 ]; then
  node scripts/tap-failures.mjs "$tap_log"
fi
exit "$status"
