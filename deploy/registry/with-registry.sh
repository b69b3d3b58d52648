#!/usr/bin/env bash
# Run a command with a Schema Registry reachable at $SCHEMA_REGISTRY_URL (the Confluent API).
# An existing registry named by SCHEMA_REGISTRY_URL is used as it is; otherwise registry.sh's
# Apicurio Registry is started for the command and stopped after it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n "${SCHEMA_REGISTRY_URL:-}" ]]; then
  exec "$@"
fi
export REGISTRY_PORT="${REGISTRY_PORT:-8081}"
bash "$here/registry.sh" start
trap 'bash "$here/registry.sh" stop' EXIT
SCHEMA_REGISTRY_URL="$(bash "$here/registry.sh" url)"
export SCHEMA_REGISTRY_URL
"$@"
