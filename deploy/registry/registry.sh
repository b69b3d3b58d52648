#!/usr/bin/env bash
# A Confluent-compatible Schema Registry for development and CI (no Docker): Apicurio Registry
# 2.4.2, built from its Maven Central artifacts (pom.xml), in-memory storage, Confluent API under
# /apis/ccompat/v7. The first start builds it (Maven + Quarkus: about 300 MB of artifacts into
# ~/.m2, a few minutes); the application is cached in $REGISTRY_LIB_DIR.
#
#   bash deploy/registry/registry.sh start|stop|status|url
#
# start  : build the application once with Maven (cached in deploy/registry/.lib/<pom checksum>),
#          start it in the background on 127.0.0.1:$REGISTRY_PORT and return only once its
#          Confluent API answers. Already running: says so, exit 0.
# stop   : SIGTERM, wait, SIGKILL if needed (the schemas are in memory: they go with it).
# status : exit 0 if running, 3 if not.
# url    : print the Confluent API's URL (what --schema-registry-url takes).
#
# Environment: REGISTRY_PORT (8081), REGISTRY_LIB_DIR (deploy/registry/.lib),
# REGISTRY_RUN_DIR (/tmp/uss-stream-registry-$REGISTRY_PORT), REGISTRY_LOG_DIR
# (deploy/registry/.logs/$REGISTRY_PORT), REGISTRY_JAVA (JDK >= 11 java binary; the JDK also builds),
# REGISTRY_HEAP_OPTS (-Xms64m -Xmx384m), REGISTRY_START_TIMEOUT (240 seconds).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REGISTRY_PORT=${REGISTRY_PORT:-8081}
REGISTRY_LIB_DIR=${REGISTRY_LIB_DIR:-$HERE/.lib}
REGISTRY_RUN_DIR=${REGISTRY_RUN_DIR:-${TMPDIR:-/tmp}/uss-stream-registry-$REGISTRY_PORT}
REGISTRY_LOG_DIR=${REGISTRY_LOG_DIR:-$HERE/.logs/$REGISTRY_PORT}
REGISTRY_HEAP_OPTS=${REGISTRY_HEAP_OPTS:--Xms64m -Xmx384m}
REGISTRY_START_TIMEOUT=${REGISTRY_START_TIMEOUT:-240}
PIDFILE="$REGISTRY_RUN_DIR/registry.pid"
URL="http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"

log() { echo "[registry:$REGISTRY_PORT] $*" >&2; }
die() { echo "[registry:$REGISTRY_PORT] ERROR: $*" >&2; exit 1; }

for v in REGISTRY_PORT REGISTRY_START_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
done

find_java() {  # java >= 11: $REGISTRY_JAVA, else the Debian JDK 17, else $JAVA_HOME, else PATH
  local c major
  for c in "${REGISTRY_JAVA:-}" /usr/lib/jvm/java-17-openjdk-amd64/bin/java \
           "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null || true)"; do
    [[ -n $c && -x $c ]] || continue
    major=$("$c" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' | head -n1)
    major=${major%%.*}
    if [[ $major =~ ^[0-9]+$ ]] && (( major >= 11 )); then JAVA=$c; return 0; fi
  done
  die "no Java >= 11 found (set REGISTRY_JAVA=/path/to/bin/java)"
}

running_pid() {  # our registry alive? (guards against a recycled pid)
  local pid
  [[ -f $PIDFILE ]] || return 1
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "uss-stream-registry=$REGISTRY_PORT" || return 1
  echo "$pid"
}

answers() {  # the Confluent API lists its subjects
  python3 - "$URL/subjects" <<'PY' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=3) as response:
    sys.exit(0 if response.status == 200 else 1)
PY
}

# Build the application once per pom and sources (Quarkus packages the Apicurio jars into a runner
# jar and lib/); later starts reuse it.
ensure_app() {
  local want stamp
  want=$(cat "$HERE/pom.xml" "$HERE"/src/main/java/uss/registry/*.java | cksum | cut -d' ' -f1)
  APP="$REGISTRY_LIB_DIR/$want/registry-1-runner.jar"
  stamp="$REGISTRY_LIB_DIR/$want/.complete"
  [[ -f $stamp && -f $APP ]] && return 0
  command -v mvn >/dev/null 2>&1 || die "mvn not found (apt-get install -y maven)"
  mkdir -p "$REGISTRY_LIB_DIR"
  (
    if command -v flock >/dev/null 2>&1; then exec 8>"$REGISTRY_LIB_DIR/.build.lock"; flock -w 1200 8; fi
    [[ -f $stamp ]] && exit 0
    local build="$REGISTRY_LIB_DIR/build.$$" t0=$SECONDS
    rm -rf "$build"
    mkdir -p "$build"
    cp -r "$HERE/pom.xml" "$HERE/src" "$build/"
    log "building Apicurio Registry from Maven Central into $REGISTRY_LIB_DIR/$want (once) ..."
    if ! JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$JAVA")")") mvn -B -q -ntp -Dstyle.color=never \
          -f "$build/pom.xml" package -DskipTests </dev/null >"$build/mvn.log" 2>&1; then
      tail -n 60 "$build/mvn.log" >&2
      die "Maven could not build the registry (log: $build/mvn.log)"
    fi
    rm -rf "${REGISTRY_LIB_DIR:?}/$want"
    mkdir -p "$REGISTRY_LIB_DIR/$want"
    mv "$build/target/registry-1-runner.jar" "$build/target/lib" "$REGISTRY_LIB_DIR/$want/"
    rm -rf "$build"
    touch "$stamp"
    log "built in $((SECONDS - t0))s"
  ) || exit 1
}

cmd_start() {
  local pid t0=$SECONDS
  if pid=$(running_pid); then log "already running (pid $pid, $URL)"; return 0; fi
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$REGISTRY_PORT" 2>/dev/null \
    && die "port 127.0.0.1:$REGISTRY_PORT is already in use (set REGISTRY_PORT)"
  find_java
  ensure_app
  mkdir -p "$REGISTRY_RUN_DIR" "$REGISTRY_LOG_DIR"
  rm -f "$PIDFILE"
  local heap launcher=()
  read -r -a heap <<< "$REGISTRY_HEAP_OPTS"
  command -v setsid >/dev/null 2>&1 && launcher=(setsid)
  log "starting Apicurio Registry on 127.0.0.1:$REGISTRY_PORT"
  # shellcheck disable=SC2016
  "${launcher[@]}" bash -c 'echo $$ > "$0"; exec "$@"' "$PIDFILE" \
    nohup "$JAVA" "${heap[@]}" -XX:+ExitOnOutOfMemoryError -Duss-stream-registry="$REGISTRY_PORT" \
      -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" -Dquarkus.log.level=WARN \
      -Dregistry.auth.enabled=false -jar "$APP" </dev/null >"$REGISTRY_LOG_DIR/registry.out" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $PIDFILE ]] && break; sleep 0.1; done
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [[ -n $pid ]] || die "registry process did not start"
  until answers; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$REGISTRY_LOG_DIR/registry.out" >&2
      die "the registry exited during startup (log $REGISTRY_LOG_DIR/registry.out)"
    fi
    if (( SECONDS - t0 > REGISTRY_START_TIMEOUT )); then
      tail -n 40 "$REGISTRY_LOG_DIR/registry.out" >&2
      kill -KILL "$pid" 2>/dev/null || true
      die "the registry did not answer within ${REGISTRY_START_TIMEOUT}s"
    fi
    sleep 0.5
  done
  log "ready in $((SECONDS - t0))s: $URL (pid $pid, log $REGISTRY_LOG_DIR/registry.out)"
}

cmd_stop() {
  local pid i
  if pid=$(running_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    log "stopped"
  else
    log "not running"
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) if pid=$(running_pid); then echo "registry running: pid $pid, $URL"; else echo "registry not running"; exit 3; fi ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
