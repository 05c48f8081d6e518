#!/usr/bin/env bash
# Runs Apache Cassandra 5.0 on this machine, assembled from Maven Central (no tarball download is
# possible here), so the end-to-end and cluster suites can be proved right against the real
# thing: one node on 127.0.0.1, or a local cluster of N nodes on 127.0.0.1 ... 127.0.0.N as ccm
# runs one.
#
# One node:
#   scripts/cassandra.sh install   # download cassandra-all and its dependencies (once); the version
#   scripts/cassandra.sh start     # download (once), configure, start, wait for CQL; prints the port
#   scripts/cassandra.sh status    # running? which PID and port
#   scripts/cassandra.sh stop      # SIGTERM the PID we started, SIGKILL after a deadline
#   scripts/cassandra.sh nodetool ARGS...   # Cassandra's nodetool over local JMX, e.g.
#                                           # `nodetool flush ks t`, `nodetool compact ks t`
#
# A local cluster (see "Cluster" below):
#   scripts/cassandra.sh cluster start --nodes N [--dir DIR] [--cql-port P] [--storage-port P]
#                                      [--jmx-port P]   # waits until every node sees N nodes UN
#   scripts/cassandra.sh cluster status [--dir DIR]     # node, address, pid, state; 0 if all up
#   scripts/cassandra.sh cluster stop [--dir DIR]       # SIGTERM every node we started, then wait
#   scripts/cassandra.sh cluster kill I [--dir DIR]     # SIGKILL node I (a crash)
#   scripts/cassandra.sh cluster restart I [--dir DIR]  # start node I again; waits until every
#                                                       # running node sees every running node UN
#   scripts/cassandra.sh cluster nodetool I ARGS... [--dir DIR]  # nodetool on node I's JMX port
#   scripts/cassandra.sh cluster pids [--dir DIR]       # the running nodes' PIDs, one a line
#   scripts/cassandra.sh cluster clear [--dir DIR]      # stop, then delete the cluster's directory
#
# Environment:
#   HELENUS_CACHE        cache root (default ~/.cache/helenus); Cassandra lives in
#                        $HELENUS_CACHE/cassandra-<version>/{lib,conf,data,logs}
#   CASSANDRA_INSTANCE_DIR  where this node's conf/, data/, logs/ and pid file live (default:
#                        the install directory above; lib/ is always shared), so a second node
#                        (the benchmark harness's) can run beside the test node: give it its own
#                        directory and ports, and pass the same variables to status/stop/nodetool
#   CASSANDRA_VERSION    cassandra-all version (default: the newest 5.0.x Maven Central served
#                        when this was written; older 5.0.x are tried if it cannot be fetched)
#   CASSANDRA_PORT       native (CQL) port, default 9042
#   CASSANDRA_JMX_PORT   local JMX port, default 7199
#   CASSANDRA_STORAGE_PORT  inter-node port (bound even by a single node), default 7000
#   CASSANDRA_HEAP       -Xms/-Xmx, default 1G for one node, 512M per node of a cluster: the
#                        machine (2 cores, 24 GiB) is shared with Rust builds and the Helenus
#                        node under test
#   CASSANDRA_START_TIMEOUT_S  how long `start` waits for the CQL port, default 180 (a cluster:
#                        per node, and again for the nodes to see each other UN)
#   CASSANDRA_JVM_EXTRA_OPTS   more JVM options, space-separated, after the ones below
#                        (bench/readamp_cassandra.py passes -XX:+AlwaysPreTouch)
#   CASSANDRA_CLUSTER_DIR  the cluster's directory when --dir is not given, default
#                        $HELENUS_CACHE/cassandra-cluster
#
# Cluster. Node I listens on 127.0.0.I with the same CQL and storage ports as every other node
# (storage, native transport and rpc_address all bind 127.0.0.I), seeds 127.0.0.1, num_tokens 16
# with tokens allocated for replication factor min(N, 3), SimpleSnitch, and its own instance
# directory DIR/nodeI/{conf,data,logs,cassandra.pid}. Cassandra binds its local-only JMX to the
# loopback address 127.0.0.1 whatever listen_address is (JMXServerUtils: a local JMX server binds
# InetAddress.getLoopbackAddress()), so each node gets its own JMX port: node I uses
# JMX_PORT + I - 1 (7199, 7200, 7201 by default). `start` writes DIR/cluster.env (node count,
# ports, heap); every later command reads the ports from it, so `--dir` (or
# CASSANDRA_CLUSTER_DIR) is all they need.
#
# A fresh cluster comes up fastest this way (measured here, see bench/README.md): the nodes are
# started one after another, each once the one before answers CQL, with `auto_bootstrap: false`
# (no data to stream, so no bootstrap and none of its waits: RING_DELAY's 30 s sleep and the
# ~2 minutes ccm leaves between bootstrapping nodes) and
# `-Dcassandra.skip_wait_for_gossip_to_settle=0`.
# One after another and not at once, because a node chooses its tokens from the ring it sees
# when it starts: two nodes starting together against the same ring would allocate the same
# tokens. `start` then waits until every node's `nodetool status` lists N nodes UN. `start` on a
# cluster that exists starts the nodes that are down (their tokens and data are kept).
# Only PIDs from this cluster's pid files are ever signalled, and only while their command line
# names that node's cassandra.yaml.
set -euo pipefail

cache_root="${HELENUS_CACHE:-$HOME/.cache/helenus}"
port="${CASSANDRA_PORT:-9042}"
jmx_port="${CASSANDRA_JMX_PORT:-7199}"
storage_port="${CASSANDRA_STORAGE_PORT:-7000}"
heap="${CASSANDRA_HEAP:-1G}"
start_timeout_s="${CASSANDRA_START_TIMEOUT_S:-180}"
stop_timeout_s=60
# Newest first; the first one Maven can resolve wins (and is then reused from the cache).
candidate_versions=("${CASSANDRA_VERSION:-5.0.9}" 5.0.8 5.0.7 5.0.6)
# What `write_config` writes for the node being configured; the cluster commands set them.
listen="127.0.0.1"
alloc_rf=1
auto_bootstrap=""

log() { printf 'cassandra.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The installed version: the newest candidate whose lib/ is complete, else empty.
installed_version() {
    local v
    for v in "${candidate_versions[@]}"; do
        if [ -f "$cache_root/cassandra-$v/lib/.complete" ]; then
            echo "$v"
            return
        fi
    done
}

absolute() {
    case "$1" in
        /*) echo "$1" ;;
        *) echo "$PWD/$1" ;; # cassandra.config is a file:// URL: it must be absolute
    esac
}

# The directory holding this node's conf/, data/, logs/ and pid file, for install directory $1.
instance_dir() {
    absolute "${CASSANDRA_INSTANCE_DIR:-$1}"
}

# Downloads cassandra-all and its runtime dependencies into $home/lib through a generated pom.
install_version() {
    local v="$1" home="$cache_root/cassandra-$1"
    mkdir -p "$home/lib"
    cat >"$home/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>helenus.local</groupId>
  <artifactId>cassandra-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$v</version>
    </dependency>
  </dependencies>
</project>
EOF
    log "downloading cassandra-all $v and its runtime dependencies into $home/lib"
    if (cd "$home" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$home/lib" >"$home/mvn.log" 2>&1); then
        touch "$home/lib/.complete"
        return 0
    fi
    log "could not fetch cassandra-all $v (see $home/mvn.log)"
    return 1
}

ensure_installed() {
    local v
    v="$(installed_version)"
    if [ -n "$v" ]; then
        echo "$v"
        return
    fi
    for v in "${candidate_versions[@]}"; do
        if install_version "$v"; then
            echo "$v"
            return
        fi
    done
    die "no Cassandra 5.0.x could be fetched from Maven Central"
}

# Writes $1/conf/cassandra.yaml and logback.xml for a node on $listen with the current ports.
write_config() {
    local inst="$1"
    mkdir -p "$inst/conf" "$inst/logs" "$inst/data"
    # Only what differs from the built-in defaults, plus what 5.0 refuses to start without.
    cat >"$inst/conf/cassandra.yaml" <<EOF
cluster_name: 'Test Cluster'
num_tokens: 16
allocate_tokens_for_local_replication_factor: $alloc_rf
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
data_file_directories:
  - $inst/data/data
commitlog_directory: $inst/data/commitlog
hints_directory: $inst/data/hints
saved_caches_directory: $inst/data/saved_caches
cdc_raw_directory: $inst/data/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage_port"
listen_address: $listen
rpc_address: $listen
storage_port: $storage_port
native_transport_port: $port
start_native_transport: true
endpoint_snitch: SimpleSnitch
user_defined_functions_enabled: false
materialized_views_enabled: false
sasi_indexes_enabled: false
# Tests create and drop hundreds of tables: don't snapshot each one.
auto_snapshot: false
disk_failure_policy: stop
commit_failure_policy: stop
# A new cluster with no 4.x nodes to stay compatible with: use 5.0's storage format,
# whose deletion times reach 2106. Under the default (CASSANDRA_4) every expiration time is capped
# at 2038-01-19, so the longest legal TTL (20 years) is refused.
storage_compatibility_mode: NONE
EOF
    if [ -n "$auto_bootstrap" ]; then
        printf 'auto_bootstrap: %s\n' "$auto_bootstrap" >>"$inst/conf/cassandra.yaml"
    fi
    cat >"$inst/conf/logback.xml" <<EOF
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$inst/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter"><level>WARN</level></filter>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="FILE"/>
    <appender-ref ref="STDOUT"/>
  </root>
</configuration>
EOF
}

# Prints the PID from the pid file if that process is alive and is the java process of this
# instance (its command line names the instance's cassandra.yaml), so a stale pid file never
# gets another process signalled.
running_pid() {
    local inst="$1" pid
    [ -f "$inst/cassandra.pid" ] || return 1
    pid="$(cat "$inst/cassandra.pid")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null \
        | grep -qxF -- "-Dcassandra.config=file://$inst/conf/cassandra.yaml" || return 1
    echo "$pid"
}

# port_open PORT [ADDRESS]
port_open() {
    (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null
}

# launch INSTANCE_DIR HOME JMX_PORT: starts the node configured in INSTANCE_DIR in the
# background (its own session: it must outlive this shell) and writes its pid file.
launch() {
    local inst="$1" home="$2" jmx="$3" pid
    local java_opts=(
        -Xms"$heap" -Xmx"$heap"
        # jvm-server.options (general settings)
        -ea -da:net.openhft... -XX:+UseThreadPriorities -XX:+HeapDumpOnOutOfMemoryError
        -Xss256k -XX:+UseTLAB -XX:+ResizeTLAB -XX:+PerfDisableSharedMem
        -Djava.net.preferIPv4Stack=true
        # jvm17-server.options: G1 and the JPMS exports/opens Cassandra needs on Java 17
        -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
        -XX:G1HeapRegionSize=16m -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300
        -XX:InitiatingHeapOccupancyPercent=70
        -Djdk.attach.allowAttachSelf=true
        --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
        --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
        --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
        --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
        --add-exports java.sql/java.sql=ALL-UNNAMED
        --add-exports java.base/java.lang.ref=ALL-UNNAMED
        --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
        --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
        --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
        --add-opens java.base/java.lang.module=ALL-UNNAMED
        --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
        --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
        --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
        --add-opens java.base/jdk.internal.math=ALL-UNNAMED
        --add-opens java.base/jdk.internal.module=ALL-UNNAMED
        --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
        --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
        --add-opens java.base/sun.nio.ch=ALL-UNNAMED
        --add-opens java.base/java.io=ALL-UNNAMED
        --add-opens java.base/java.lang.reflect=ALL-UNNAMED
        --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
        --add-opens java.base/java.lang=ALL-UNNAMED
        --add-opens java.base/java.util=ALL-UNNAMED
        -Dio.netty.tryReflectionSetAccessible=true
        -Dio.netty.allocator.useCacheForAllThreads=true
        -Dio.netty.allocator.maxOrder=11
        # cassandra-env.sh / bin/cassandra
        -Dcassandra.jmx.local.port="$jmx"
        -Dcassandra-foreground=yes
        -Dcassandra.config="file://$inst/conf/cassandra.yaml"
        -Dcassandra.storagedir="$inst/data"
        -Dcassandra.logdir="$inst/logs"
        -Dlogback.configurationFile="$inst/conf/logback.xml"
        # One node has no peers to hear from; a fresh local cluster's nodes are started one
        # after another and waited for (see the header): don't wait for gossip to settle.
        -Dcassandra.skip_wait_for_gossip_to_settle=0
    )
    # cassandra-env.sh loads jamm as an agent to measure object sizes; use it when present.
    local jamm
    jamm="$(ls "$home"/lib/jamm-*.jar 2>/dev/null | head -n1 || true)"
    if [ -n "$jamm" ]; then
        java_opts+=("-javaagent:$jamm")
    fi

    if [ -n "${CASSANDRA_JVM_EXTRA_OPTS:-}" ]; then
        local extra
        read -r -a extra <<<"$CASSANDRA_JVM_EXTRA_OPTS"
        java_opts+=("${extra[@]}")
    fi

    # setsid: the node must outlive this shell; it execs java, so $! is java's PID.
    setsid java "${java_opts[@]}" -cp "$inst/conf:$home/lib/*" \
        org.apache.cassandra.service.CassandraDaemon \
        >>"$inst/logs/stdout.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$inst/cassandra.pid"
}

# wait_cql INSTANCE_DIR ADDRESS: waits until the node of INSTANCE_DIR (running under the PID in
# its pid file) opens its CQL port on ADDRESS; fails if it exits or the deadline passes.
wait_cql() {
    local inst="$1" address="$2" pid
    pid="$(cat "$inst/cassandra.pid")"
    local deadline=$((SECONDS + start_timeout_s))
    until port_open "$port" "$address"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 40 "$inst/logs/stdout.log" >&2 || true
            rm -f "$inst/cassandra.pid"
            die "Cassandra exited during startup (see $inst/logs/)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 40 "$inst/logs/system.log" >&2 || true
            die "CQL port $address:$port not open after ${start_timeout_s}s (pid $pid still running; 'stop' ends it)"
        fi
        sleep 0.5 # poll interval, not a readiness wait
    done
}

cmd_start() {
    local v home inst pid
    v="$(ensure_installed)"
    home="$cache_root/cassandra-$v"
    inst="$(instance_dir "$home")"
    if pid="$(running_pid "$inst")"; then
        log "already running (pid $pid)"
        echo "$port"
        return
    fi
    if port_open "$port"; then
        die "port $port is already in use by another process"
    fi
    if port_open "$storage_port"; then
        die "storage port $storage_port is already in use (another node? set CASSANDRA_STORAGE_PORT)"
    fi
    write_config "$inst"
    log "starting Cassandra $v (CQL port $port, heap $heap, log $inst/logs/system.log)"
    launch "$inst" "$home" "$jmx_port"
    wait_cql "$inst" 127.0.0.1
    log "Cassandra $v is up (pid $(cat "$inst/cassandra.pid"))"
    echo "$port"
}

# stop_pids PID...: SIGTERM to each, then waits for all; SIGKILL to those alive at the deadline.
stop_pids() {
    local pid
    for pid in "$@"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    local deadline=$((SECONDS + stop_timeout_s))
    for pid in "$@"; do
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$SECONDS" -ge "$deadline" ]; then
                log "pid $pid still alive after ${stop_timeout_s}s: SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
        done
    done
}

cmd_stop() {
    local v home inst pid
    v="$(installed_version)"
    [ -n "$v" ] || { log "not installed"; return; }
    home="$cache_root/cassandra-$v"
    inst="$(instance_dir "$home")"
    if ! pid="$(running_pid "$inst")"; then
        log "not running"
        rm -f "$inst/cassandra.pid"
        return
    fi
    log "stopping pid $pid"
    stop_pids "$pid"
    rm -f "$inst/cassandra.pid"
}

# Cassandra's bin/nodetool, minus the tarball: NodeTool from the assembled lib/, over the local-only
# JMX port $2 a node opens (-Dcassandra.jmx.local.port), with the JPMS exports/opens of
# jvm17-clients.options. Client JVM settings favour a fast start over peak speed.
# run_nodetool INSTANCE_DIR JMX_PORT ARGS...
run_nodetool() {
    local inst="$1" jmx="$2" v home
    shift 2
    v="$(installed_version)"
    [ -n "$v" ] || die "not installed: run '$0 start' first"
    home="$cache_root/cassandra-$v"
    mkdir -p "$inst/conf"
    # The tool's own logging: warnings and errors to stderr, nothing else.
    cat >"$inst/conf/logback-tools.xml" <<EOF
<configuration scan="false">
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
EOF
    java -Xms128m -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Djava.net.preferIPv4Stack=true -Djdk.attach.allowAttachSelf=true \
        --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
        --add-exports java.base/jdk.internal.ref=ALL-UNNAMED \
        --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
        --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED \
        --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED \
        --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED \
        --add-exports java.sql/java.sql=ALL-UNNAMED \
        --add-opens java.base/java.lang.module=ALL-UNNAMED \
        --add-opens java.base/jdk.internal.loader=ALL-UNNAMED \
        --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
        --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED \
        --add-opens java.base/jdk.internal.math=ALL-UNNAMED \
        --add-opens java.base/jdk.internal.module=ALL-UNNAMED \
        --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED \
        --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
        -Dcassandra.storagedir="$inst/data" \
        -Dlogback.configurationFile="$inst/conf/logback-tools.xml" \
        -cp "$home/lib/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$jmx" "$@"
}

cmd_nodetool() {
    local v home
    v="$(installed_version)"
    [ -n "$v" ] || die "not installed: run '$0 start' first"
    home="$cache_root/cassandra-$v"
    run_nodetool "$(instance_dir "$home")" "$jmx_port" "$@"
}

cmd_status() {
    local v home inst pid
    v="$(installed_version)"
    [ -n "$v" ] || { echo "not installed"; return 1; }
    home="$cache_root/cassandra-$v"
    inst="$(instance_dir "$home")"
    if pid="$(running_pid "$inst")"; then
        if port_open "$port"; then
            echo "running: Cassandra $v, pid $pid, CQL port $port"
        else
            echo "starting: Cassandra $v, pid $pid, CQL port $port not open yet"
        fi
        return 0
    fi
    echo "stopped: Cassandra $v installed in $home"
    return 1
}

# -- cluster ---------------------------------------------------------------------------------

cluster_usage="usage: $0 cluster start --nodes N [--dir DIR] [--cql-port P] [--storage-port P] [--jmx-port P]
       $0 cluster stop|status|pids|clear [--dir DIR]
       $0 cluster kill|restart I [--dir DIR]
       $0 cluster nodetool I ARGS... [--dir DIR]"
cluster_dir=""
nodes=0

# Node I's instance directory, address and JMX port.
node_dir() { echo "$cluster_dir/node$1"; }
node_address() { echo "127.0.0.$1"; }
node_jmx() { echo $((jmx_port + $1 - 1)); }

# Reads the cluster's cluster.env (written by `cluster start`): its node count, ports and heap.
load_cluster() {
    [ -f "$cluster_dir/cluster.env" ] \
        || die "no cluster in $cluster_dir (create one with: $0 cluster start --nodes N --dir $cluster_dir)"
    # shellcheck disable=SC1091 # written by save_cluster below
    . "$cluster_dir/cluster.env"
    nodes="$CLUSTER_NODES"
    port="$CLUSTER_CQL_PORT"
    storage_port="$CLUSTER_STORAGE_PORT"
    jmx_port="$CLUSTER_JMX_PORT"
    heap="$CLUSTER_HEAP"
}

save_cluster() {
    cat >"$cluster_dir/cluster.env" <<EOF
# A local Cassandra cluster, written by scripts/cassandra.sh cluster start.
CLUSTER_NODES=$nodes
CLUSTER_CQL_PORT=$port
CLUSTER_STORAGE_PORT=$storage_port
CLUSTER_JMX_PORT=$jmx_port
CLUSTER_HEAP=$heap
EOF
}

# Prints how many nodes `nodetool status` on node I lists as UN (up, normal); nothing (and
# status 1) if nodetool fails, e.g. while the node's JMX is not up yet.
un_count() {
    local out
    out="$(run_nodetool "$(node_dir "$1")" "$(node_jmx "$1")" status 2>/dev/null)" || return 1
    grep -c '^UN ' <<<"$out" || true
}

# Waits until every running node lists every running node as UN.
wait_all_up() {
    local deadline=$((SECONDS + start_timeout_s)) i running=() seen
    for i in $(seq 1 "$nodes"); do
        if running_pid "$(node_dir "$i")" >/dev/null; then
            running+=("$i")
        fi
    done
    for i in "${running[@]}"; do
        while true; do
            seen="$(un_count "$i" || true)"
            [ "${seen:-0}" -ge "${#running[@]}" ] && break
            if [ "$SECONDS" -ge "$deadline" ]; then
                run_nodetool "$(node_dir "$i")" "$(node_jmx "$i")" status >&2 || true
                die "node$i sees ${seen:-no} of ${#running[@]} running nodes UN after ${start_timeout_s}s"
            fi
            sleep 1 # poll interval: each poll is a nodetool JVM
        done
    done
    log "every running node (${running[*]}) sees ${#running[@]} nodes UN"
}

# Starts node I of the cluster (configured already) and waits for its CQL port.
start_node() {
    local i="$1" home="$2" inst address
    inst="$(node_dir "$i")"
    address="$(node_address "$i")"
    if port_open "$port" "$address"; then
        die "$address:$port is already in use by another process"
    fi
    if port_open "$(node_jmx "$i")"; then
        die "JMX port $(node_jmx "$i") (node$i) is already in use by another process"
    fi
    log "starting node$i on $address (CQL $port, storage $storage_port, JMX $(node_jmx "$i"), heap $heap)"
    launch "$inst" "$home" "$(node_jmx "$i")"
    wait_cql "$inst" "$address"
    log "node$i is up (pid $(cat "$inst/cassandra.pid"))"
}

cluster_start() {
    local want="$1" v home i inst fresh=0 started
    if [ -f "$cluster_dir/cluster.env" ]; then
        load_cluster
        [ "$want" = 0 ] || [ "$want" = "$nodes" ] \
            || die "$cluster_dir already holds a cluster of $nodes nodes, not $want"
    else
        [ "$want" -ge 1 ] 2>/dev/null && [ "$want" -le 254 ] \
            || die "no cluster in $cluster_dir: give --nodes N (1 to 254) to create one"
    fi
    v="$(ensure_installed)"
    home="$cache_root/cassandra-$v"
    if [ ! -f "$cluster_dir/cluster.env" ]; then
        nodes="$want"
        heap="${CASSANDRA_HEAP:-512M}"
        mkdir -p "$cluster_dir"
        save_cluster
        fresh=1
    fi
    alloc_rf=$((nodes < 3 ? nodes : 3))
    started=$SECONDS
    for i in $(seq 1 "$nodes"); do
        inst="$(node_dir "$i")"
        if running_pid "$inst" >/dev/null; then
            log "node$i is already running (pid $(cat "$inst/cassandra.pid"))"
            continue
        fi
        listen="$(node_address "$i")"
        # A fresh cluster has no data to stream: each node joins with the tokens it allocates.
        # A node with data keeps its saved tokens; auto_bootstrap does not matter for it.
        auto_bootstrap=false
        if [ ! -f "$inst/conf/cassandra.yaml" ] || [ "$fresh" = 1 ]; then
            write_config "$inst"
        fi
        start_node "$i" "$home"
    done
    wait_all_up
    log "cluster of $nodes nodes up in $((SECONDS - started)) s ($cluster_dir)"
}

cluster_stop() {
    local i inst pid pids=()
    load_cluster
    for i in $(seq 1 "$nodes"); do
        inst="$(node_dir "$i")"
        if pid="$(running_pid "$inst")"; then
            log "stopping node$i (pid $pid)"
            pids+=("$pid")
        fi
    done
    [ "${#pids[@]}" -gt 0 ] || { log "no node running"; return; }
    stop_pids "${pids[@]}"
    for i in $(seq 1 "$nodes"); do
        inst="$(node_dir "$i")"
        running_pid "$inst" >/dev/null || rm -f "$inst/cassandra.pid"
    done
}

cluster_status() {
    local i inst pid all=0
    load_cluster
    for i in $(seq 1 "$nodes"); do
        inst="$(node_dir "$i")"
        if pid="$(running_pid "$inst")"; then
            if port_open "$port" "$(node_address "$i")"; then
                echo "node$i $(node_address "$i") pid $pid up (CQL $port, JMX $(node_jmx "$i"))"
            else
                echo "node$i $(node_address "$i") pid $pid starting (CQL $port not open yet)"
                all=1
            fi
        else
            echo "node$i $(node_address "$i") down"
            all=1
        fi
    done
    return "$all"
}

cluster_pids() {
    local i
    load_cluster
    for i in $(seq 1 "$nodes"); do
        running_pid "$(node_dir "$i")" || true
    done
}

check_node() {
    [ -n "$1" ] && [ "$1" -ge 1 ] 2>/dev/null && [ "$1" -le "$nodes" ] \
        || die "no node '$1' in the cluster of $nodes nodes in $cluster_dir"
}

cluster_kill() {
    local i="$1" pid
    load_cluster
    check_node "$i"
    pid="$(running_pid "$(node_dir "$i")")" || die "node$i is not running"
    log "killing node$i (pid $pid)"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
    done
    rm -f "$(node_dir "$i")/cassandra.pid"
}

cluster_restart() {
    local i="$1" v pid
    load_cluster
    check_node "$i"
    v="$(ensure_installed)"
    if pid="$(running_pid "$(node_dir "$i")")"; then
        die "node$i is running (pid $pid): kill or stop it first"
    fi
    start_node "$i" "$cache_root/cassandra-$v"
    wait_all_up
}

cluster_clear() {
    if [ -f "$cluster_dir/cluster.env" ]; then
        cluster_stop
        rm -rf "$cluster_dir"
        log "removed $cluster_dir"
    elif [ -e "$cluster_dir" ]; then
        die "$cluster_dir holds no cluster.env: not removing it"
    fi
}

cmd_cluster() {
    local command="${1:-}" want=0 node="" args=()
    [ -n "$command" ] || die "$cluster_usage"
    shift
    cluster_dir="${CASSANDRA_CLUSTER_DIR:-$cache_root/cassandra-cluster}"
    # Options anywhere; for nodetool everything after the node number but --dir is nodetool's.
    while [ $# -gt 0 ]; do
        case "$1" in
            --dir) cluster_dir="${2:?--dir needs a value}"; shift 2 ;;
            --nodes | --cql-port | --storage-port | --jmx-port)
                if [ "$command" = nodetool ] && [ -n "$node" ]; then
                    args+=("$1")
                    shift
                    continue
                fi
                case "$1" in
                    --nodes) want="${2:?--nodes needs a value}" ;;
                    --cql-port) port="${2:?--cql-port needs a value}" ;;
                    --storage-port) storage_port="${2:?--storage-port needs a value}" ;;
                    --jmx-port) jmx_port="${2:?--jmx-port needs a value}" ;;
                esac
                shift 2
                ;;
            *)
                if [ -z "$node" ] && [[ "$command" =~ ^(kill|restart|nodetool)$ ]]; then
                    node="$1"
                elif [ "$command" = nodetool ]; then
                    args+=("$1")
                else
                    die "unknown argument '$1'
$cluster_usage"
                fi
                shift
                ;;
        esac
    done
    cluster_dir="$(absolute "$cluster_dir")"
    case "$command" in
        start) cluster_start "$want" ;;
        stop) cluster_stop ;;
        status) cluster_status ;;
        pids) cluster_pids ;;
        clear) cluster_clear ;;
        kill) cluster_kill "$node" ;;
        restart) cluster_restart "$node" ;;
        nodetool)
            load_cluster
            check_node "$node"
            run_nodetool "$(node_dir "$node")" "$(node_jmx "$node")" "${args[@]}"
            ;;
        *) die "unknown cluster command '$command'
$cluster_usage" ;;
    esac
}

case "${1:-}" in
    install) ensure_installed ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    nodetool) shift; cmd_nodetool "$@" ;;
    cluster) shift; cmd_cluster "$@" ;;
    *) echo "usage: $0 install|start|stop|status|nodetool ARGS...|cluster ..." >&2; exit 2 ;;
esac
