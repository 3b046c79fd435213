#!/usr/bin/env bash
# Writes a small tidelog data directory as a fixture of its on-disk formats (issue 35 item 4):
#
#   scripts/make-logdir-fixture.sh OUT_DIR [TIDELOG_CHECKOUT]
#
# Starts one broker of TIDELOG_CHECKOUT (default: this repository, built; an older commit
# checked out in a worktree and built gives that commit's formats) on a temporary data
# directory, writes the mix of test/compat/java/LogDirInterop.java into topic `fixture`
# (every codec, keys, headers, idempotent and transactional producers, an aborted
# transaction, a group's committed offsets), saves what the Java client reads back as
# OUT_DIR/served.txt, stops the broker with SIGTERM (a clean shutdown) and copies the data
# directory, without its lock files, to OUT_DIR/data. test/storage/logdir-fixtures.test.ts
# starts the current tidelog on a copy of it and compares.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: $0 OUT_DIR [TIDELOG_CHECKOUT]}"
checkout="$(cd "${2:-$root}" && pwd)"
[ -e "$out" ] && { echo "$out exists" >&2; exit 2; }
cache="$("$root/scripts/kafka-reference.sh" install | tail -1)"
classes="$root/.build/java-LogDirInterop"
mkdir -p "$classes"
javac --release 17 -Xlint:-options -d "$classes" -cp "$cache/clients/*" "$root/test/compat/java/LogDirInterop.java"
java_run() {
  java -Xmx384m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$classes:$cache/clients/*" LogDirInterop "$@"
}

work="$(mktemp -d "${TMPDIR:-/tmp}/logdir-fixture-XXXXXX")"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Older releases have no schema registry (nor its flag).
registry=()
if node "$checkout/bin/tidelog.js" start --help | grep -q -- --schema-registry-port; then
  registry=(--schema-registry-port=-1)
fi
TIDELOG_LOG_LEVEL=warn node "$checkout/bin/tidelog.js" start --data-dir "$work/data" --port 0 \
  --http-port=-1 "${registry[@]}" \
  --set offsets.topic.num.partitions=5 --set transaction.state.log.num.partitions=5 \
  --set group.initial.rebalance.delay.ms=0 >"$work/broker.txt" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  bootstrap="$(sed -n 's/^bootstrap servers: //p' "$work/broker.txt")"
  [ -n "$bootstrap" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/broker.txt" >&2; exit 1; }
  sleep 0.2
done
[ -n "$bootstrap" ] || { echo "the broker did not start" >&2; exit 1; }
java_run write "$bootstrap" fixture | grep -qx DONE
mkdir -p "$out"
java_run dump "$bootstrap" fixture >"$out/served.txt"
grep -qx DONE "$out/served.txt"
kill -TERM "$pid"
wait "$pid" || true
pid=""
(cd "$checkout" && git rev-parse HEAD) >"$out/commit.txt"
cp -a "$work/data" "$out/data"
find "$out/data" -name '*.lock' -delete -o -name '.lock' -delete
du -sh "$out"
