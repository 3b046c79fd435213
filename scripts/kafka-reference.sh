#!/usr/bin/env bash
# Apache Kafka 4.4.0, the reference broker of the conformance suite (issue 32): the jars come
# from Maven Central, the broker runs in KRaft combined mode (broker and controller in one
# JVM) on free loopback ports with temporary data.
#
#   scripts/kafka-reference.sh install            fetch once into .build/kafka-4.4.0, print it
#   scripts/kafka-reference.sh start [--nodes N] [--property KEY=VALUE]... [--feature NAME=LEVEL]...
#     [--sasl-listener]   (also a SASL_PLAINTEXT listener with SCRAM; its bootstrap in DIR/bootstrap-sasl)
#     [--owner-pid PID]   (stop the nodes and remove DIR once process PID is gone: a test
#                          process killed by its runner cannot stop them itself)
#                                                 start N nodes (default 1; 3 gives RF 3) with
#                                                 extra server properties and features set at
#                                                 format time (e.g. transaction.version=1; the
#                                                 default is 4.4's latest of each), print the
#                                                 bootstrap servers, then the state dir
#   scripts/kafka-reference.sh archive            record the broker's class-data-sharing
#                                                 archive once (see below), print its path
#   scripts/kafka-reference.sh stop DIR           stop the nodes started in DIR and remove it
#   scripts/kafka-reference.sh stop-node DIR N    stop node N (SIGTERM: a controlled shutdown)
#   scripts/kafka-reference.sh start-node DIR N   start node N again on its ports and data
#
# The cache holds one folder of jars per use, each with its runtime dependencies:
#   server/   org.apache.kafka:kafka_2.13 (the broker; kafka.Kafka, kafka.tools.StorageTool)
#   clients/  org.apache.kafka:kafka-clients (the conformance checks' producer/consumer/admin)
#   streams/  org.apache.kafka:kafka-streams
#   connect/  org.apache.kafka:connect-runtime (connect-file 4.4.0 is not served here)
#   mirror/   org.apache.kafka:connect-mirror 4.3.1 with its own Connect runtime and clients
#             4.3.1 (MirrorMaker 2): connect-mirror and connect-mirror-client 4.4.0 are not
#             served here, and 4.3's MirrorMaker driver is kept on the runtime it was built for
# A folder is complete once its `.complete` marker exists; nothing is fetched twice (Maven
# keeps its own copy in ~/.m2 as well). The broker needs Java 17 or newer.
#
# Each node's heap is small (KAFKA_HEAP_OPTS, default -Xmx512m) and its JVM runs the serial
# GC and C1 only (KAFKA_JVM_PERFORMANCE_OPTS replaces those flags) because tests share the
# machine; the benchmarks set both as Kafka's own scripts do (-Xmx1G -Xms1G, G1).
#
# A test run starts some 50 broker and format JVMs, each loading thousands of Kafka's classes
# from the jars. `archive` records the classes a broker loads while it starts and stops into
# a class-data-sharing archive (Java 17's dynamic AppCDS, -XX:ArchiveClassesAtExit), and
# `start` maps it (-XX:SharedArchiveFile) when it exists and KAFKA_JVM_PERFORMANCE_OPTS is
# unset: a broker JVM then starts on about 40% less CPU (1.2 s instead of 2.1 here). The benchmarks keep Kafka's own
# settings and run without it. A JVM that finds the archive stale (other jars or another
# JDK) ignores it and loads from the jars; fetching the server jars again removes it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

version="4.4.0"
# MirrorMaker 2's jars: the newest connect-mirror the registry here serves (4.4.0 is refused).
mirror_version="4.3.1"
log4j_version="2.25.5"
slf4j_version="1.7.36"
cache="$root/.build/kafka-$version"
server_archive="$cache/server.jsa"

# fetch NAME COORDINATE...: copies the runtime dependencies of the coordinates into $cache/NAME.
fetch() {
  local name="$1"
  shift
  local dir="$cache/$name"
  [ -f "$dir/.complete" ] && return 0
  local work="$cache/pom-$name"
  rm -rf "$dir" "$work"
  if [ "$name" = server ]; then rm -f "$server_archive"; fi
  mkdir -p "$work"
  {
    echo '<project xmlns="http://maven.apache.org/POM/4.0.0">'
    echo '  <modelVersion>4.0.0</modelVersion>'
    echo "  <groupId>tidelog.reference</groupId><artifactId>$name</artifactId><version>1</version>"
    echo '  <packaging>pom</packaging>'
    echo '  <dependencies>'
    local coordinate group artifact ver
    for coordinate in "$@"; do
      IFS=: read -r group artifact ver <<<"$coordinate"
      echo "    <dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$ver</version></dependency>"
    done
    echo '  </dependencies>'
    echo '</project>'
  } >"$work/pom.xml"
  if ! (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$dir.tmp" >"$work/mvn.txt" 2>&1); then
    echo "fetching $name ($*) with Maven failed; see $work/mvn.txt" >&2
    tail -20 "$work/mvn.txt" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
}

install() {
  command -v mvn >/dev/null 2>&1 || { echo "mvn (Maven) is needed to fetch Kafka $version" >&2; exit 1; }
  mkdir -p "$cache"
  fetch server "org.apache.kafka:kafka_2.13:$version" \
    "org.apache.logging.log4j:log4j-slf4j-impl:$log4j_version"
  fetch clients "org.apache.kafka:kafka-clients:$version" "org.slf4j:slf4j-simple:$slf4j_version"
  fetch streams "org.apache.kafka:kafka-streams:$version" "org.slf4j:slf4j-simple:$slf4j_version"
  # connect-file (the FileStream connectors) 4.4.0 is not served by the registry here.
  fetch connect "org.apache.kafka:connect-runtime:$version" \
    "org.apache.logging.log4j:log4j-slf4j-impl:$log4j_version"
  fetch mirror "org.apache.kafka:connect-mirror:$mirror_version" \
    "org.apache.kafka:connect-mirror-client:$mirror_version" \
    "org.apache.logging.log4j:log4j-slf4j-impl:$log4j_version"
}

# java_bin: a java of version 17 or newer (JAVA_HOME first).
java_bin() {
  local candidate
  for candidate in "${JAVA_HOME:-}/bin/java" "$(command -v java || true)" /usr/lib/jvm/*/bin/java; do
    [ -x "$candidate" ] || continue
    local major
    major="$("$candidate" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
    if [ -n "$major" ] && [ "${major%%.*}" -ge 17 ] 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "Kafka $version needs Java 17 or newer" >&2
  exit 1
}

# free_ports N: N distinct free loopback ports, all held open together while chosen.
free_ports() {
  node -e '
    const net = require("node:net")
    const n = Number(process.argv[1])
    const servers = []
    let left = n
    for (let i = 0; i < n; i++) {
      const s = net.createServer()
      servers.push(s)
      s.listen(0, "127.0.0.1", () => {
        if (--left === 0) {
          console.log(servers.map((x) => x.address().port).join(" "))
          for (const x of servers) x.close()
        }
      })
    }' "$1"
}

stop_dir() {
  local dir="$1"
  [ -d "$dir" ] || return 0
  local pidfile pid
  for pidfile in "$dir"/node-*/pid; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || true
  done
  # A controlled shutdown takes a few seconds; then SIGKILL what is left.
  local deadline=$((SECONDS + 20))
  for pidfile in "$dir"/node-*/pid; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # Only a directory this script made (it holds the marker) is removed.
  if [ -f "$dir/kafka-reference" ]; then rm -rf "$dir"; fi
}

# launch_node NODE_DIR: runs the node's run.sh in the background, its pid in NODE_DIR/pid.
launch_node() {
  local node_dir="$1"
  nohup bash "$node_dir/run.sh" >"$node_dir/server.log" 2>&1 </dev/null &
  echo $! >"$node_dir/pid"
}

# watch_owner PID DIR: in the background, stops DIR's nodes once PID has exited; ends by
# itself when DIR is gone (stopped the usual way). Its output goes nowhere, so whoever reads
# this script's stdout is not kept waiting.
watch_owner() {
  local owner="$1" dir="$2"
  nohup bash -c 'while kill -0 "$1" 2>/dev/null && [ -d "$3" ]; do sleep 2; done
    if [ -d "$3" ]; then "$2" stop "$3"; fi' watch-owner "$owner" "$root/scripts/kafka-reference.sh" "$dir" \
    >/dev/null 2>&1 </dev/null &
}

# await_started NODE_DIR DEADLINE_SECONDS: until the node logs that it started (or exits).
await_started() {
  local node_dir="$1" deadline="$2"
  until grep -qs 'Kafka Server started' "$node_dir/server.log"; do
    if ! kill -0 "$(cat "$node_dir/pid")" 2>/dev/null; then
      echo "Kafka node in $node_dir exited while starting:" >&2
      tail -40 "$node_dir/server.log" >&2
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "Kafka node in $node_dir did not start in time:" >&2
      tail -40 "$node_dir/server.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

stop_node() {
  local node_dir="$1/node-$2"
  [ -f "$node_dir/pid" ] || { echo "no node $2 in $1" >&2; exit 2; }
  local pid deadline=$((SECONDS + 120))
  pid="$(cat "$node_dir/pid")"
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
}

start_node() {
  local node_dir="$1/node-$2"
  [ -f "$node_dir/run.sh" ] || { echo "no node $2 in $1" >&2; exit 2; }
  launch_node "$node_dir"
  await_started "$node_dir" $((SECONDS + ${KAFKA_REFERENCE_START_TIMEOUT:-240}))
}

start() {
  local nodes=1 sasl_listener=0 owner_pid="" dump_archive=""
  local -a extra=() features=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes) nodes="$2"; shift 2 ;;
      --owner-pid) owner_pid="$2"; shift 2 ;;
      --property) extra+=("$2"); shift 2 ;;
      --feature) features+=(--feature "$2"); shift 2 ;;
      --sasl-listener) sasl_listener=1; shift ;;
      # archive's own: the broker JVMs write the classes they loaded to FILE when they exit.
      --dump-archive) dump_archive="$2"; shift 2 ;;
      *) echo "unknown option $1" >&2; exit 2 ;;
    esac
  done
  [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || { echo "--nodes must be a positive integer" >&2; exit 2; }
  install
  local java
  java="$(java_bin)"
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/kafka-reference-XXXXXX")"
  touch "$dir/kafka-reference"
  # From here on a failure stops whatever was started and removes the directory.
  trap 'stop_dir "$dir"' ERR INT TERM

  local -a ports sasl_ports=()
  if [ "$sasl_listener" = 1 ]; then
    read -r -a ports <<<"$(free_ports $((3 * nodes)))"
    sasl_ports=("${ports[@]:$((2 * nodes))}")
  else
    read -r -a ports <<<"$(free_ports $((2 * nodes)))"
  fi
  local voters="" bootstrap="" sasl_bootstrap="" i
  for ((i = 0; i < nodes; i++)); do
    voters+="${voters:+,}$((i + 1))@127.0.0.1:${ports[$((2 * i + 1))]}"
    bootstrap+="${bootstrap:+,}127.0.0.1:${ports[$((2 * i))]}"
    if [ "$sasl_listener" = 1 ]; then sasl_bootstrap+="${sasl_bootstrap:+,}127.0.0.1:${sasl_ports[$i]}"; fi
  done
  local rf=$((nodes < 3 ? nodes : 3))
  local min_isr=$((rf < 2 ? 1 : 2))

  cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
EOF

  local classpath="$cache/server/*"
  # JIT tiers past C1 and a parallel GC only cost CPU on this shared 2-core machine.
  local -a jvm_flags
  read -r -a jvm_flags <<<"${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true}"
  jvm_flags+=(-Dlog4j2.configurationFile="$dir/log4j2.properties")
  # The archive maps into the format JVMs too: they load a part of the broker's classes.
  if [ -z "${KAFKA_JVM_PERFORMANCE_OPTS:-}" ] && [ -z "$dump_archive" ] && [ -f "$server_archive" ]; then
    jvm_flags+=(-XX:SharedArchiveFile="$server_archive")
  fi
  local -a broker_flags=()
  if [ -n "$dump_archive" ]; then broker_flags+=(-XX:ArchiveClassesAtExit="$dump_archive"); fi
  # A Kafka Uuid as `kafka-storage random-uuid` prints it (16 random bytes in URL-safe
  # base64, never starting with '-'), without a JVM start for it.
  local cluster_id
  cluster_id="$(node -e '
    const { randomBytes } = require("node:crypto")
    let id
    do id = randomBytes(16).toString("base64url"); while (id.startsWith("-"))
    console.log(id)')"
  local -a formats=()
  for ((i = 0; i < nodes; i++)); do
    local node_dir="$dir/node-$((i + 1))"
    mkdir -p "$node_dir/data"
    cat >"$node_dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$((i + 1))
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${ports[$((2 * i))]},CONTROLLER://127.0.0.1:${ports[$((2 * i + 1))]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[$((2 * i))]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$node_dir/data
num.partitions=1
default.replication.factor=$rf
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
    if [ "$sasl_listener" = 1 ]; then
      # Later lines win in a properties file: the listeners again, with SASL_PLAINTEXT (SCRAM).
      cat >>"$node_dir/server.properties" <<SASL
listeners=PLAINTEXT://127.0.0.1:${ports[$((2 * i))]},CONTROLLER://127.0.0.1:${ports[$((2 * i + 1))]},SASL_PLAINTEXT://127.0.0.1:${sasl_ports[$i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[$((2 * i))]},SASL_PLAINTEXT://127.0.0.1:${sasl_ports[$i]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
SASL
    fi
    local property
    for property in "${extra[@]}"; do echo "$property" >>"$node_dir/server.properties"; done
    "$java" "${jvm_flags[@]}" -cp "$classpath" \
      kafka.tools.StorageTool format --cluster-id "$cluster_id" \
      --config "$node_dir/server.properties" --ignore-formatted "${features[@]}" \
      >"$node_dir/format.txt" 2>&1 &
    formats+=($!)
  done
  # The nodes are formatted side by side: each is a JVM start of a few seconds.
  for ((i = 0; i < nodes; i++)); do
    wait "${formats[$i]}" || {
      echo "formatting node $((i + 1)) failed:" >&2
      cat "$dir/node-$((i + 1))/format.txt" >&2
      false
    }
  done

  local heap="${KAFKA_HEAP_OPTS:--Xmx512m -Xms64m}"
  for ((i = 0; i < nodes; i++)); do
    local node_dir="$dir/node-$((i + 1))"
    # The command is kept so that start-node can run the node again as it first ran.
    {
      echo '#!/usr/bin/env bash'
      printf 'exec'
      # shellcheck disable=SC2086 # the heap options are words
      printf ' %q' "$java" $heap "${jvm_flags[@]}" "${broker_flags[@]}" -cp "$classpath" kafka.Kafka "$node_dir/server.properties"
      echo
    } >"$node_dir/run.sh"
    launch_node "$node_dir"
  done

  # Ready when every node says it started (after KRaft elected a leader and the broker was
  # unfenced); a node that exits first fails the start.
  local deadline=$((SECONDS + ${KAFKA_REFERENCE_START_TIMEOUT:-240}))
  for ((i = 0; i < nodes; i++)); do
    await_started "$dir/node-$((i + 1))" "$deadline"
  done
  trap - ERR INT TERM
  if [ -n "$owner_pid" ]; then watch_owner "$owner_pid" "$dir"; fi
  echo "$bootstrap" >"$dir/bootstrap"
  if [ "$sasl_listener" = 1 ]; then echo "$sasl_bootstrap" >"$dir/bootstrap-sasl"; fi
  echo "$bootstrap"
  echo "$dir"
}

# archive: records $server_archive unless it exists, from one node that starts and stops (a
# controlled shutdown: the JVM writes the archive as it exits). Written under a temporary
# name first, so that no start maps a half-written one.
archive() {
  install
  if [ ! -f "$server_archive" ]; then
    local tmp="$server_archive.$$" out dir
    rm -f "$tmp"
    out="$(start --nodes 1 --dump-archive "$tmp" --owner-pid $$)"
    dir="$(tail -1 <<<"$out")"
    stop_node "$dir" 1
    stop_dir "$dir"
    [ -s "$tmp" ] || { echo "the broker wrote no class-data-sharing archive" >&2; exit 1; }
    mv "$tmp" "$server_archive"
  fi
  echo "$server_archive"
}

case "${1:-}" in
  install) install; echo "$cache" ;;
  archive) archive ;;
  start) shift; start "$@" ;;
  stop)
    [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
    stop_dir "$2"
    ;;
  stop-node)
    [ $# -eq 3 ] || { echo "usage: $0 stop-node DIR N" >&2; exit 2; }
    stop_node "$2" "$3"
    ;;
  start-node)
    [ $# -eq 3 ] || { echo "usage: $0 start-node DIR N" >&2; exit 2; }
    start_node "$2" "$3"
    ;;
  *)
    echo "usage: $0 install | archive | start [--nodes N] | stop DIR | stop-node DIR N | start-node DIR N" >&2
    exit 2
    ;;
esac
