#!/usr/bin/env bash
# PostgreSQL for the store tests: starts the server if it is not running (installing it first on
# a machine without it), makes sure 127.0.0.1 accepts trust auth, creates a fresh database for
# this run, and prints the line to export:
#
#   export COUNTERSIGN_TEST_POSTGRES_URL=postgres://USER@127.0.0.1:5432/countersign_ci_...
#
# Usage: .ci/postgres.sh [ENV_FILE]   (with ENV_FILE, the export line is also written there, for
# `source ENV_FILE`).
set -euo pipefail

env_file="${1:-}"

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "postgres: installing PostgreSQL" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

version="$(ls /etc/postgresql | sort -V | tail -n 1)"
hba="/etc/postgresql/${version}/main/pg_hba.conf"

ready() { pg_isready -h 127.0.0.1 -p 5432 -q; }

if ! ready; then
    echo "postgres: starting cluster ${version}/main" >&2
    pg_ctlcluster --skip-systemctl-redirect "${version}" main start >&2
fi
for _ in $(seq 1 30); do ready && break; sleep 1; done
ready || { echo "postgres: the server did not come up on 127.0.0.1:5432" >&2; exit 1; }

# Trust auth on the loopback address (a throwaway CI server only).
user=""
for candidate in postgres root; do
    if psql -h 127.0.0.1 -U "${candidate}" -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1; then
        user="${candidate}"
        break
    fi
done
if [ -z "${user}" ]; then
    echo "postgres: enabling trust auth for 127.0.0.1 in ${hba}" >&2
    sed -i '1i host all all 127.0.0.1/32 trust' "${hba}"
    pg_ctlcluster --skip-systemctl-redirect "${version}" main reload >&2
    sleep 1
    user="postgres"
    psql -h 127.0.0.1 -U "${user}" -d postgres -Atqc 'SELECT 1' >/dev/null
fi

database="countersign_ci_$(date +%Y%m%d%H%M%S)_$$"
psql -h 127.0.0.1 -U "${user}" -d postgres -Atqc "CREATE DATABASE ${database}" >/dev/null
line="export COUNTERSIGN_TEST_POSTGRES_URL=postgres://${user}@127.0.0.1:5432/${database}"
if [ -n "${env_file}" ]; then
    echo "${line}" > "${env_file}"
fi
echo "${line}"
