#!/usr/bin/env bash
# franz-go's own kgo integration tests (v1.22.3, as pinned by test/compat/go) against a
# 3-broker tidelog, as franz-go runs them against Kafka: `npm run test:franz-go`.
# Not part of `npm test` (about 10 minutes). Extra arguments go to the test binary, e.g.
#   npm run test:franz-go -- -test.run 'TestGroupETL|TestTxnEtl'
# Skipped by franz-go itself here: the share-group tests (tidelog has no share groups) and
# the SCRAM/OAuth ones (they need KGO_TEST_SCRAM / KGO_TEST_OAUTH_SEEDS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tests="$(scripts/build-go-clients.sh franz-go)"
data="$(mktemp -d /tmp/tidelog-franz-go.XXXXXX)"
log="$data/tidelog.txt"
TIDELOG_LOG_LEVEL="${TIDELOG_LOG_LEVEL:-warn}" node bin/tidelog.js start --brokers 3 --port 0 \
  --http-port -1 --schema-registry-port -1 --data-dir "$data/data" \
  --set default.replication.factor=3 --set offsets.topic.num.partitions=5 \
  --set transaction.state.log.num.partitions=5 --set group.initial.rebalance.delay.ms=0 \
  >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$data"' EXIT
seeds=""
for _ in $(seq 1 300); do
  seeds="$(sed -n 's/^bootstrap servers: //p' "$log")"
  [ -n "$seeds" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$seeds" ] || { echo "tidelog did not start" >&2; cat "$log" >&2; exit 1; }
echo "tidelog at $seeds"
# From the package folder: some tests read its source files (config.go).
cd "$(dirname "$tests")/franz-go-$(basename "$tests" .test | sed 's/^kgo-//')/pkg/kgo"
# KGO_TEST_RECORDS: franz-go's default of 500,000 records per ETL test is sized for a Kafka
# cluster on a bigger machine; 50,000 keeps the run near 10 minutes on 2 cores.
KGO_SEEDS="$seeds" KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-50000}" KGO_LOG_LEVEL="${KGO_LOG_LEVEL:-none}" \
  "$tests" -test.timeout 30m "$@"
