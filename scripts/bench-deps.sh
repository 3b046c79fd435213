#!/usr/bin/env bash
# What the benchmarks need beyond the test command's installs (scripts/test.sh), on a fresh
# Debian machine: librdkafka's headers for the native load generator (bench/native/
# rdkafka-perf.c, compiled by the benches with cc), GNU time for client.bench's CPU figures,
# and NATS JetStream with Go and its NATS client for bench:report's peer
# (bench/native/nats-perf.go). No test needs them, so `npm test` does not install them.
set -euo pipefail
missing=()
for pkg in gcc librdkafka-dev time nats-server golang-go golang-github-nats-io-go-nats-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bench dependencies: all installed"
  exit 0
fi
echo "installing Debian packages: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
