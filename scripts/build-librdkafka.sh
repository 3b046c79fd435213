#!/usr/bin/env bash
# Builds a modern librdkafka (2.15.1, the first client side of KIP-848's consumer protocol
# we can test against) for the compatibility tests. Debian ships 2.0.2, which has no
# `group.protocol=consumer`. The source comes from the npm package
# @confluentinc/kafka-javascript, which vendors it in deps/librdkafka; its own install script
# downloads zlib/OpenSSL/zstd/curl and fails offline, so we build only the C library against
# Debian's dev packages (libssl-dev zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev).
#
# Idempotent: once .build/librdkafka/lib/librdkafka.so.1 exists it does nothing, so CI and the
# tests can call it every time. Prints the directory to put in LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

version="1.10.1"
expected_librdkafka="2.15.1"
cache=".build/librdkafka"
lib_dir="$cache/lib"

if [ -f "$lib_dir/librdkafka.so.1" ]; then
  echo "$(pwd)/$lib_dir"
  exit 0
fi

mkdir -p "$cache"
work="$cache/src-$version"
if [ ! -f "$work/package/deps/librdkafka/configure" ]; then
  rm -rf "$work"
  mkdir -p "$work"
  (cd "$work" && npm pack --silent "@confluentinc/kafka-javascript@$version" >/dev/null)
  tar -xzf "$work"/confluentinc-kafka-javascript-"$version".tgz -C "$work"
fi

src="$work/package/deps/librdkafka"
found_version="$(sed -n 's/^#define RD_KAFKA_VERSION *0x\([0-9a-f]*\).*/\1/p' "$src/src/rdkafka.h")"
expected_hex="$(printf '%02x%02x%02x' $(echo "$expected_librdkafka" | tr . ' '))"
if [ "${found_version:0:6}" != "$expected_hex" ]; then
  echo "kafka-javascript $version vendors librdkafka 0x$found_version, expected $expected_librdkafka" >&2
  exit 1
fi

# Curl is only for OIDC token fetching, which no test uses.
# The logs stay outside the source tree: mklove loads every ./configure.* file as a module.
log_dir="$(pwd)/$cache"
(cd "$src" && ./configure --disable-curl >"$log_dir/configure.txt" 2>&1) || {
  echo "librdkafka configure failed; see $log_dir/configure.txt" >&2
  tail -20 "$log_dir/configure.txt" >&2
  exit 1
}
(cd "$src" && make -j2 libs >"$log_dir/make.txt" 2>&1) || {
  echo "librdkafka build failed; see $log_dir/make.txt" >&2
  tail -20 "$log_dir/make.txt" >&2
  exit 1
}

# Copy to a temporary name first so an interrupted build never leaves a half-written .so that
# the idempotence check above would accept.
mkdir -p "$lib_dir"
cp "$src/src/librdkafka.so.1" "$lib_dir/librdkafka.so.1.tmp"
mv "$lib_dir/librdkafka.so.1.tmp" "$lib_dir/librdkafka.so.1"
echo "$(pwd)/$lib_dir"
