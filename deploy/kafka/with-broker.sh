#!/usr/bin/env bash
# Run a command with a Kafka broker reachable at $KAFKA_BOOTSTRAP_SERVERS.
# An existing broker named by KAFKA_BOOTSTRAP_SERVERS is used as it is; otherwise the local
# single-node KRaft broker of broker.sh is started for the command and stopped after it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]]; then
  exec "$@"
fi
export KAFKA_PORT="${KAFKA_PORT:-9092}"
bash "$here/broker.sh" start
trap 'bash "$here/broker.sh" stop' EXIT
export KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:${KAFKA_PORT}"
"$@"
