#!/usr/bin/env bash
# Single-node KRaft Apache Kafka 4.x broker for development and CI (no Docker).
#
#   bash deploy/kafka/broker.sh start|stop|status|restart
#
# start  : fetch the jars with Maven (cached in deploy/kafka/.lib/<version>), format a fresh
#          KRaft data dir, start the broker in the background on 127.0.0.1:$KAFKA_PORT and
#          return only once it answers (AdminClient probe). Already running: says so, exit 0.
# stop   : SIGTERM (controlled shutdown), wait, SIGKILL if needed; removes the data dir.
#          With KAFKA_KEEP_DATA=1, stop keeps the data dir and start reuses it (same cluster,
#          topics, offsets and transactions): a broker restart, e.g. for fault tests.
# status : exit 0 if running, 3 if not.
#
# Environment (see README.md): KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (KAFKA_PORT+1),
# KAFKA_VERSION (4.3.1), KAFKA_DATA_DIR (/tmp/uss-stream-kafka-$KAFKA_PORT),
# KAFKA_LOG_DIR (deploy/kafka/.logs/$KAFKA_PORT), KAFKA_LIB_DIR (deploy/kafka/.lib),
# KAFKA_JAVA (JDK >= 17 java binary), KAFKA_HEAP_OPTS (-Xms128m -Xmx512m),
# KAFKA_START_TIMEOUT (120 seconds), KAFKA_STOP_TIMEOUT (30 seconds), KAFKA_KEEP_DATA (0).
#
# Secured listener (opt-in): KAFKA_SASL_SSL_PORT=<port> adds SASL_SSL://127.0.0.1:<port>
# (SCRAM-SHA-512 over TLS) beside the plaintext one. The TLS material is made at the first start
# with the JDK's keytool: a test CA ($KAFKA_DATA_DIR/tls/ca.pem, what clients trust) and a broker
# certificate for 127.0.0.1/localhost signed by it. KAFKA_SCRAM_USERS (uss-stream:uss-stream-secret)
# lists user:password pairs, comma-separated, created at format time (kafka-storage --add-scram).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

KAFKA_VERSION=${KAFKA_VERSION:-4.3.1}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
KAFKA_DATA_DIR=${KAFKA_DATA_DIR:-${TMPDIR:-/tmp}/uss-stream-kafka-$KAFKA_PORT}
KAFKA_LOG_DIR=${KAFKA_LOG_DIR:-$HERE/.logs/$KAFKA_PORT}
KAFKA_LIB_DIR=${KAFKA_LIB_DIR:-$HERE/.lib}
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}
KAFKA_STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
KAFKA_KEEP_DATA=${KAFKA_KEEP_DATA:-0}
KAFKA_SASL_SSL_PORT=${KAFKA_SASL_SSL_PORT:-}
KAFKA_SCRAM_USERS=${KAFKA_SCRAM_USERS:-uss-stream:uss-stream-secret}

LIB="$KAFKA_LIB_DIR/$KAFKA_VERSION"       # jars + compiled probe (lib/*.jar, classes/)
PIDFILE="$KAFKA_DATA_DIR/broker.pid"
CONFIG="$KAFKA_DATA_DIR/server.properties"
MARKER="$KAFKA_DATA_DIR/.uss-stream-kafka"   # only dirs carrying it are ever rm -rf'ed
LOCKFILE="${KAFKA_DATA_DIR%/}.lock"
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"

log() { echo "[kafka:$KAFKA_PORT] $*" >&2; }
die() { echo "[kafka:$KAFKA_PORT] ERROR: $*" >&2; exit 1; }

for v in KAFKA_PORT KAFKA_CONTROLLER_PORT KAFKA_START_TIMEOUT KAFKA_STOP_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
done
[[ $KAFKA_PORT != "$KAFKA_CONTROLLER_PORT" ]] || die "KAFKA_PORT and KAFKA_CONTROLLER_PORT must differ"
if [[ -n $KAFKA_SASL_SSL_PORT ]]; then
  [[ $KAFKA_SASL_SSL_PORT =~ ^[0-9]+$ ]] || die "KAFKA_SASL_SSL_PORT must be a number, got '$KAFKA_SASL_SSL_PORT'"
  [[ $KAFKA_SASL_SSL_PORT != "$KAFKA_PORT" && $KAFKA_SASL_SSL_PORT != "$KAFKA_CONTROLLER_PORT" ]] \
    || die "KAFKA_SASL_SSL_PORT must differ from KAFKA_PORT and KAFKA_CONTROLLER_PORT"
  [[ $KAFKA_SCRAM_USERS =~ ^[A-Za-z0-9._-]+:[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+:[A-Za-z0-9._-]+)*$ ]] \
    || die "KAFKA_SCRAM_USERS must be user:password[,user:password...] of letters, digits, '.', '_', '-'"
fi
TLS_DIR="$KAFKA_DATA_DIR/tls"
[[ $KAFKA_VERSION =~ ^4\.[0-9]+\.[0-9]+ ]] || die "KAFKA_VERSION must be a 4.x version, got '$KAFKA_VERSION'"
case "$KAFKA_DATA_DIR" in /|/tmp|/tmp/|"$HOME"|"$HOME"/|"$HERE"|"$HERE"/) die "refusing KAFKA_DATA_DIR=$KAFKA_DATA_DIR";; esac

# ---------------------------------------------------------------- helpers

# java >= 17: $KAFKA_JAVA, else the Debian JDK 17, else $JAVA_HOME, else PATH.
find_java() {
  local c
  for c in "${KAFKA_JAVA:-}" /usr/lib/jvm/java-17-openjdk-amd64/bin/java \
           "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null || true)"; do
    [[ -n $c && -x $c ]] || continue
    local major
    major=$("$c" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' | head -n1)
    major=${major%%.*}
    if [[ $major =~ ^[0-9]+$ ]] && (( major >= 17 )); then JAVA=$c; return 0; fi
    [[ -n ${KAFKA_JAVA:-} && $c == "$KAFKA_JAVA" ]] && die "KAFKA_JAVA=$c is Java ${major:-?}; Kafka 4.x brokers need Java >= 17"
  done
  die "no Java >= 17 found (set KAFKA_JAVA=/path/to/bin/java)"
}

pid_alive() {  # our broker process alive? (guards against a recycled pid)
  local pid=$1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ -r /proc/$pid/cmdline ]] || return 0
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "kafka.Kafka $CONFIG"
}

running_pid() {
  local pid
  [[ -f $PIDFILE ]] || return 1
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  pid_alive "$pid" || return 1
  echo "$pid"
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

show_logs() {
  local f
  for f in "$KAFKA_LOG_DIR/broker.out" "$KAFKA_LOG_DIR/server.log" "$KAFKA_LOG_DIR/probe.log"; do
    [[ -s $f ]] || continue
    echo "----- last lines of $f" >&2
    tail -n "${1:-40}" "$f" >&2
  done
}

remove_data_dir() {
  [[ -d $KAFKA_DATA_DIR ]] || return 0
  if [[ -f $MARKER ]]; then
    rm -rf "$KAFKA_DATA_DIR"
  else
    log "not removing $KAFKA_DATA_DIR: it was not created by broker.sh (no $(basename "$MARKER"))"
  fi
}

take_lock() {  # serialise start/stop for one data dir
  if command -v flock >/dev/null 2>&1; then
    mkdir -p "$(dirname "$LOCKFILE")"
    exec 9>"$LOCKFILE"
    if ! flock -n 9; then
      log "waiting for another broker.sh start/stop on this data dir (lock $LOCKFILE) ..."
      flock -w 300 9 || die "could not lock $LOCKFILE within 300s"
    fi
  fi
}

# Resolve the jar set once per version (and pom content); later starts reuse it.
ensure_libs() {
  local stamp want
  want="$KAFKA_VERSION $(cksum < "$HERE/pom.xml" | cut -d' ' -f1) $(cksum < "$HERE/KafkaReady.java" | cut -d' ' -f1)"
  stamp="$LIB/.complete"
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && compgen -G "$LIB/lib/kafka_2.13-*.jar" >/dev/null; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found (apt-get install -y maven)"
  mkdir -p "$KAFKA_LIB_DIR"
  (
    # another checkout/port may be resolving the same version: one at a time
    if command -v flock >/dev/null 2>&1; then exec 8>"$KAFKA_LIB_DIR/.$KAFKA_VERSION.lock"; flock -w 900 8; fi
    if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then exit 0; fi
    log "resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION with Maven into $LIB ..."
    local tmp="$LIB.tmp.$$" t0=$SECONDS
    rm -rf "$tmp" "$LIB"
    mkdir -p "$tmp/lib" "$tmp/classes"
    if ! mvn -B -q -ntp -Dstyle.color=never -f "$HERE/pom.xml" \
          -Dkafka.version="$KAFKA_VERSION" \
          dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/lib" \
          </dev/null >"$tmp/mvn.log" 2>&1; then
      cat "$tmp/mvn.log" >&2
      rm -rf "$tmp"
      die "Maven could not resolve kafka_2.13:$KAFKA_VERSION (is the version on Maven Central?)"
    fi
    compgen -G "$tmp/lib/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null || { rm -rf "$tmp"; die "Maven did not copy kafka_2.13-$KAFKA_VERSION.jar"; }
    local javac
    javac="$(dirname "$JAVA")/javac"
    if [[ -x $javac ]]; then
      "$javac" -nowarn -d "$tmp/classes" -cp "$tmp/lib/*" "$HERE/KafkaReady.java" >"$tmp/javac.log" 2>&1 \
        || { cat "$tmp/javac.log" >&2; rm -rf "$tmp"; die "could not compile KafkaReady.java"; }
    fi
    echo "$want" > "$tmp/.complete"
    mv "$tmp" "$LIB"
    log "$(find "$LIB/lib" -name '*.jar' | wc -l) jars ($(du -sh "$LIB/lib" | cut -f1)) ready in $((SECONDS - t0))s"
  ) || exit 1
}

new_cluster_id() {  # Kafka Uuid: 16 random bytes, base64url without padding, not starting with '-'
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ ${#id} == 22 && $id != -* && $id != AAAAAAAAAAAAAAAAAAAAA[AQ] ]] && { echo "$id"; return; }
  done
}

JVM_COMMON=(-Djava.awt.headless=true -Djava.net.preferIPv4Stack=true
            "-Dlog4j2.configurationFile=$HERE/log4j2.properties" "-Dkafka.logs.dir=$KAFKA_LOG_DIR")

# A failed start leaves nothing running: print the log tails, kill the JVM, drop the data dir
# (the logs in $KAFKA_LOG_DIR are kept).
fail_start() {
  local pid=$1 msg=$2 i
  show_logs 60
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  remove_data_dir
  die "$msg (Kafka $KAFKA_VERSION, java $JAVA; full logs in $KAFKA_LOG_DIR)"
}

# The secured listener's TLS material, made with keytool: a CA, and a broker key pair whose
# certificate (SAN 127.0.0.1, localhost) the CA signs. Kept with the data (KAFKA_KEEP_DATA=1
# restarts keep the same CA, so clients keep trusting the broker).
make_tls() {
  local keytool pass
  keytool="$(dirname "$JAVA")/keytool"
  [[ -x $keytool ]] || keytool=$(command -v keytool 2>/dev/null) || die "no keytool next to $JAVA nor on the PATH"
  if [[ -f $TLS_DIR/broker.p12 && -f $TLS_DIR/ca.pem && -f $TLS_DIR/password ]]; then return 0; fi
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  pass=$(head -c 18 /dev/urandom | base64 | tr -d '+/=\n')
  echo "$pass" > "$TLS_DIR/password"
  chmod 600 "$TLS_DIR/password"
  local kt=("$keytool" -noprompt -storetype PKCS12 -storepass "$pass" -keypass "$pass")
  {
    "${kt[@]}" -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity 30 \
      -dname "CN=uss-stream test CA" -ext bc:c -keystore "$TLS_DIR/ca.p12"
    "${kt[@]}" -exportcert -rfc -alias ca -keystore "$TLS_DIR/ca.p12" -file "$TLS_DIR/ca.pem"
    "${kt[@]}" -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 30 \
      -dname "CN=localhost" -keystore "$TLS_DIR/broker.p12"
    "${kt[@]}" -certreq -alias broker -keystore "$TLS_DIR/broker.p12" -file "$TLS_DIR/broker.csr"
    "${kt[@]}" -gencert -alias ca -keystore "$TLS_DIR/ca.p12" -infile "$TLS_DIR/broker.csr" -rfc \
      -validity 30 -ext SAN=ip:127.0.0.1,dns:localhost -ext KU=digitalSignature,keyEncipherment \
      -ext EKU=serverAuth -outfile "$TLS_DIR/broker.pem"
    "${kt[@]}" -importcert -alias ca -file "$TLS_DIR/ca.pem" -keystore "$TLS_DIR/broker.p12"
    "${kt[@]}" -importcert -alias broker -file "$TLS_DIR/broker.pem" -keystore "$TLS_DIR/broker.p12"
  } >"$KAFKA_LOG_DIR/keytool.log" 2>&1 || { cat "$KAFKA_LOG_DIR/keytool.log" >&2; die "keytool could not make the TLS material"; }
  rm -f "$TLS_DIR/broker.csr"
}

# Adds the SASL_SSL listener to the generated server.properties.
secure_config() {
  local pass
  pass=$(cat "$TLS_DIR/password")
  sed -i -e "s|^listeners=.*|&,SASL_SSL://127.0.0.1:$KAFKA_SASL_SSL_PORT|" \
         -e "s|^advertised.listeners=.*|&,SASL_SSL://127.0.0.1:$KAFKA_SASL_SSL_PORT|" \
         -e "s|^listener.security.protocol.map=.*|&,SASL_SSL:SASL_SSL|" "$CONFIG"
  cat >> "$CONFIG" <<PROPERTIES

# Secured listener (KAFKA_SASL_SSL_PORT): SCRAM-SHA-512 over TLS; the broker itself uses PLAINTEXT.
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$TLS_DIR/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$pass
listener.name.sasl_ssl.ssl.key.password=$pass
PROPERTIES
}

scram_args() {  # --add-scram for every KAFKA_SCRAM_USERS pair
  local pair
  local -a pairs
  IFS=',' read -r -a pairs <<< "$KAFKA_SCRAM_USERS"
  for pair in "${pairs[@]}"; do
    printf '%s\n' --add-scram "SCRAM-SHA-512=[name=${pair%%:*},password=${pair#*:}]"
  done
}

# ---------------------------------------------------------------- commands

cmd_status() {
  local pid
  if pid=$(running_pid); then
    echo "kafka $KAFKA_VERSION running: pid $pid, bootstrap $BOOTSTRAP, data $KAFKA_DATA_DIR, logs $KAFKA_LOG_DIR"
    return 0
  fi
  echo "kafka not running (port $KAFKA_PORT, data dir $KAFKA_DATA_DIR)"
  return 3
}

cmd_start() {
  local pid t0=$SECONDS
  take_lock
  if pid=$(running_pid); then
    log "already running (pid $pid, bootstrap $BOOTSTRAP)"
    return 0
  fi
  local reuse=0
  if [[ $KAFKA_KEEP_DATA == 1 && -f $MARKER && -f $KAFKA_DATA_DIR/kraft/meta.properties ]]; then
    reuse=1
    log "KAFKA_KEEP_DATA=1: restarting on the data in $KAFKA_DATA_DIR"
  else
    # stale state from a killed run
    if [[ -f $PIDFILE ]]; then log "removing stale state of a dead broker in $KAFKA_DATA_DIR"; fi
    remove_data_dir
    if [[ -d $KAFKA_DATA_DIR ]] && [[ -n $(ls -A "$KAFKA_DATA_DIR") ]]; then
      die "KAFKA_DATA_DIR=$KAFKA_DATA_DIR exists, is not empty and was not made by broker.sh"
    fi
  fi
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" ${KAFKA_SASL_SSL_PORT:+"$KAFKA_SASL_SSL_PORT"}; do
    port_open "$p" && die "port 127.0.0.1:$p is already in use by another process (set KAFKA_PORT / KAFKA_CONTROLLER_PORT)"
  done

  find_java
  ensure_libs

  mkdir -p "$KAFKA_DATA_DIR/kraft" "$KAFKA_LOG_DIR"
  : > "$MARKER"
  rm -f "$PIDFILE"   # a kept data dir still holds the previous broker's pid
  rm -rf "$KAFKA_LOG_DIR"/server.log* "$KAFKA_LOG_DIR"/broker.out "$KAFKA_LOG_DIR"/probe.log \
         "$KAFKA_LOG_DIR"/format.log "$KAFKA_LOG_DIR"/probe
  sed -e "s|@KAFKA_PORT@|$KAFKA_PORT|g" \
      -e "s|@KAFKA_CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" \
      -e "s|@LOG_DIRS@|$KAFKA_DATA_DIR/kraft|g" \
      "$HERE/server.properties" > "$CONFIG"
  local -a scram=()
  if [[ -n $KAFKA_SASL_SSL_PORT ]]; then
    make_tls
    secure_config
    mapfile -t scram < <(scram_args)
  fi

  local cp="$LIB/lib/*" cluster_id
  cluster_id=$(new_cluster_id)
  if (( ! reuse )) && ! "$JAVA" -Xmx256m "${JVM_COMMON[@]}" -cp "$cp" kafka.tools.StorageTool \
        format --cluster-id "$cluster_id" --config "$CONFIG" "${scram[@]}" \
        </dev/null >"$KAFKA_LOG_DIR/format.log" 2>&1; then
    cat "$KAFKA_LOG_DIR/format.log" >&2
    die "kafka-storage format failed"
  fi

  log "starting Kafka $KAFKA_VERSION on $BOOTSTRAP (controller 127.0.0.1:$KAFKA_CONTROLLER_PORT, data $KAFKA_DATA_DIR)"
  # Own session (setsid) and no tty/stdin: survives the calling shell, gets no SIGINT/SIGHUP
  # meant for it. The inner shell records its pid and execs java, so the pid file is java's.
  local launcher=()
  command -v setsid >/dev/null 2>&1 && launcher=(setsid)
  local heap
  read -r -a heap <<< "$KAFKA_HEAP_OPTS"
  # shellcheck disable=SC2016
  "${launcher[@]}" bash -c 'echo $$ > "$0"; exec "$@"' "$PIDFILE" \
    nohup "$JAVA" "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
      -XX:+ExitOnOutOfMemoryError "${JVM_COMMON[@]}" \
      -cp "$cp" kafka.Kafka "$CONFIG" \
      </dev/null >"$KAFKA_LOG_DIR/broker.out" 2>&1 9>&- &   # 9>&-: the broker must not inherit the lock
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $PIDFILE ]] && break; sleep 0.1; done
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [[ -n $pid ]] || die "broker process did not start"

  # 1) the broker logs "Kafka Server started" (fail fast if the JVM dies)
  local deadline=$((t0 + KAFKA_START_TIMEOUT))
  until grep -qs "Kafka Server started" "$KAFKA_LOG_DIR/server.log"; do
    kill -0 "$pid" 2>/dev/null || fail_start "$pid" "broker process exited during startup"
    (( SECONDS < deadline )) || fail_start "$pid" "broker did not log 'Kafka Server started' within ${KAFKA_START_TIMEOUT}s"
    sleep 0.3
  done
  # 2) it answers clients: AdminClient describeCluster/listTopics + group and txn coordinators
  local left=$((deadline - SECONDS)); (( left > 5 )) || left=5
  local probe_cp="$LIB/classes:$cp" probe=(KafkaReady)
  [[ -f $LIB/classes/KafkaReady.class ]] || probe=("$HERE/KafkaReady.java")  # no javac: source launcher
  if ! "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
        -Dlog4j2.configurationFile="$HERE/log4j2.properties" -Dkafka.logs.dir="$KAFKA_LOG_DIR/probe" \
        -cp "$probe_cp" "${probe[@]}" "$BOOTSTRAP" "$left" </dev/null >"$KAFKA_LOG_DIR/probe.log" 2>&1; then
    kill -0 "$pid" 2>/dev/null || fail_start "$pid" "broker process exited during startup"
    fail_start "$pid" "broker does not answer clients on $BOOTSTRAP within ${KAFKA_START_TIMEOUT}s"
  fi
  log "ready in $((SECONDS - t0))s: $(grep '^ready:' "$KAFKA_LOG_DIR/probe.log" || true)"
  log "bootstrap $BOOTSTRAP, pid $pid, logs $KAFKA_LOG_DIR/server.log"
  if [[ -n $KAFKA_SASL_SSL_PORT ]]; then
    port_open "$KAFKA_SASL_SSL_PORT" || fail_start "$pid" "the SASL_SSL listener on 127.0.0.1:$KAFKA_SASL_SSL_PORT is not open"
    log "SASL_SSL (SCRAM-SHA-512) on 127.0.0.1:$KAFKA_SASL_SSL_PORT, CA $TLS_DIR/ca.pem, users $(sed "s/:[^,]*//g" <<< "$KAFKA_SCRAM_USERS")"
  fi
}

cmd_stop() {
  local pid
  take_lock
  if pid=$(running_pid); then
    log "stopping pid $pid (SIGTERM) ..."
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "still alive after ${KAFKA_STOP_TIMEOUT}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    log "stopped"
  else
    log "not running"
  fi
  if [[ $KAFKA_KEEP_DATA == 1 ]]; then
    log "KAFKA_KEEP_DATA=1: keeping $KAFKA_DATA_DIR"
  else
    remove_data_dir
  fi
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  restart) cmd_stop; cmd_start ;;
  *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
