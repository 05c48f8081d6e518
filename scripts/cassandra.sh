#!/usr/bin/env bash
# Runs a single-node Apache Cassandra 5.0 on 127.0.0.1, assembled from Maven Central (no tarball
# download is possible here), so the end-to-end suite can be proved right against the real thing:
#
#   scripts/cassandra.sh start     # download (once), configure, start, wait for CQL; prints the port
#   scripts/cassandra.sh status    # running? which PID and port
#   scripts/cassandra.sh stop      # SIGTERM the PID we started, SIGKILL after a deadline
#   scripts/cassandra.sh nodetool ARGS...   # Cassandra's nodetool over local JMX, e.g.
#                                           # `nodetool flush ks t`, `nodetool compact ks t`
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
#   CASSANDRA_HEAP       -Xms/-Xmx, default 1G: the machine (2 cores, 24 GiB) is shared with
#                        Rust builds and the Helenus node under test
#   CASSANDRA_START_TIMEOUT_S  how long `start` waits for the CQL port, default 180
#   CASSANDRA_JVM_EXTRA_OPTS   more JVM options, space-separated, after the ones below
#                        (bench/readamp_cassandra.py passes -XX:+AlwaysPreTouch)
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

# The directory holding this node's conf/, data/, logs/ and pid file, for install directory $1.
instance_dir() {
    local dir="${CASSANDRA_INSTANCE_DIR:-$1}"
    case "$dir" in
        /*) echo "$dir" ;;
        *) echo "$PWD/$dir" ;; # cassandra.config is a file:// URL: it must be absolute
    esac
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

write_config() {
    local inst="$1"
    mkdir -p "$inst/conf" "$inst/logs" "$inst/data"
    # Only what differs from the built-in defaults, plus what 5.0 refuses to start without.
    cat >"$inst/conf/cassandra.yaml" <<EOF
cluster_name: 'Test Cluster'
num_tokens: 16
allocate_tokens_for_local_replication_factor: 1
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
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
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
# A new single-node cluster with no 4.x nodes to stay compatible with: use 5.0's storage format,
# whose deletion times reach 2106. Under the default (CASSANDRA_4) every expiration time is capped
# at 2038-01-19, so the longest legal TTL (20 years) is refused.
storage_compatibility_mode: NONE
EOF
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

# Prints the PID from the pid file if that process is alive and is a java process.
running_pid() {
    local inst="$1" pid
    [ -f "$inst/cassandra.pid" ] || return 1
    pid="$(cat "$inst/cassandra.pid")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    grep -q java "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
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
        -Dcassandra.jmx.local.port="$jmx_port"
        -Dcassandra-foreground=yes
        -Dcassandra.config="file://$inst/conf/cassandra.yaml"
        -Dcassandra.storagedir="$inst/data"
        -Dcassandra.logdir="$inst/logs"
        -Dlogback.configurationFile="$inst/conf/logback.xml"
        # One node, no peers to hear from: don't wait for gossip to settle.
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

    log "starting Cassandra $v (CQL port $port, heap $heap, log $inst/logs/system.log)"
    # setsid: the node must outlive this shell; it execs java, so $! is java's PID.
    setsid java "${java_opts[@]}" -cp "$inst/conf:$home/lib/*" \
        org.apache.cassandra.service.CassandraDaemon \
        >"$inst/logs/stdout.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$inst/cassandra.pid"

    local deadline=$((SECONDS + start_timeout_s))
    until port_open "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 40 "$inst/logs/stdout.log" >&2 || true
            rm -f "$inst/cassandra.pid"
            die "Cassandra exited during startup (see $inst/logs/)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 40 "$inst/logs/system.log" >&2 || true
            die "CQL port $port not open after ${start_timeout_s}s (pid $pid still running; 'stop' ends it)"
        fi
        sleep 0.5 # poll interval, not a readiness wait
    done
    log "Cassandra $v is up (pid $pid)"
    echo "$port"
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
    kill -TERM "$pid"
    local deadline=$((SECONDS + stop_timeout_s))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "pid $pid still alive after ${stop_timeout_s}s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    rm -f "$inst/cassandra.pid"
}

# Cassandra's bin/nodetool, minus the tarball: NodeTool from the assembled lib/, over the local-only
# JMX port the node opens (-Dcassandra.jmx.local.port), with the JPMS exports/opens of
# jvm17-clients.options. Client JVM settings favour a fast start over peak speed.
cmd_nodetool() {
    local v home inst
    v="$(installed_version)"
    [ -n "$v" ] || die "not installed: run '$0 start' first"
    home="$cache_root/cassandra-$v"
    inst="$(instance_dir "$home")"
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
    exec java -Xms128m -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
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
        -cp "$home/lib/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$jmx_port" "$@"
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

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    nodetool) shift; cmd_nodetool "$@" ;;
    *) echo "usage: $0 start|stop|status|nodetool ARGS..." >&2; exit 2 ;;
esac
