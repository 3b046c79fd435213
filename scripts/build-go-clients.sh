#!/usr/bin/env bash
# Builds the Go clients' conformance program (test/compat/go: franz-go 1.22.3 with kadm
# 1.20.0, and sarama 1.61.1, pinned in go.mod and go.sum) into .build/go/bin/goconf, with the
# module cache and build cache under .build/go, so nothing is downloaded twice.
#
#   scripts/build-go-clients.sh            build unless the binary is newer than every source;
#                                          prints its path
#   scripts/build-go-clients.sh franz-go   also build franz-go's own kgo integration tests
#                                          (.build/go/kgo.test, from the module cache) and
#                                          print that path instead
#
# Uses the machine's Go (1.26); GOTOOLCHAIN=local so that it never fetches another.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/test/compat/go"
out="$root/.build/go"
bin="$out/bin/goconf"

export GOMODCACHE="$out/mod" GOCACHE="$out/cache" GOTOOLCHAIN=local
# -modcacherw: the module cache stays deletable with rm -rf.
export GOFLAGS="-modcacherw -mod=readonly"

newest_source="$(ls -t "$src"/*.go "$src"/go.mod "$src"/go.sum | head -1)"
if [ ! -x "$bin" ] || [ "$newest_source" -nt "$bin" ]; then
  mkdir -p "$out/bin"
  (cd "$src" && go build -o "$bin.tmp" .) || {
    echo "building $src failed" >&2
    exit 1
  }
  mv "$bin.tmp" "$bin"
fi

if [ "${1:-}" = "franz-go" ]; then
  version="$(cd "$src" && go list -m -f '{{.Version}}' github.com/twmb/franz-go)"
  tests="$out/kgo-$version.test"
  if [ ! -x "$tests" ]; then
    # The module cache is read-only to go test's writes; franz-go's own go.mod and go.sum
    # resolve its test dependencies.
    copy="$out/franz-go-$version"
    rm -rf "$copy"
    cp -r "$(cd "$src" && go list -m -f '{{.Dir}}' github.com/twmb/franz-go)" "$copy"
    chmod -R u+w "$copy"
    (cd "$copy" && GOFLAGS=-modcacherw go test -c -o "$tests.tmp" ./pkg/kgo) || {
      echo "building franz-go's kgo tests failed" >&2
      exit 1
    }
    mv "$tests.tmp" "$tests"
  fi
  echo "$tests"
  exit 0
fi
echo "$bin"
