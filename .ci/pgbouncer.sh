#!/usr/bin/env bash
# PgBouncer in transaction mode in front of the test PostgreSQL server (issue #22, case B57):
# installs Debian's package if missing (1.18: no prepared-statement support in transaction
# mode), writes a configuration of its own under a temporary folder (pool_mode=transaction,
# trust auth, a free port on 127.0.0.1 in front of 127.0.0.1:5432), starts pgbouncer as a
# process this script owns (its pid is in the env file), and prints the line to export:
#
#   export COUNTERSIGN_TEST_PGBOUNCER_URL=postgres://USER@127.0.0.1:PORT/DATABASE?pooler=transaction
#
# Usage: .ci/pgbouncer.sh ENV_FILE   (needs COUNTERSIGN_TEST_POSTGRES_URL from .ci/postgres.sh;
# the export lines, with COUNTERSIGN_TEST_PGBOUNCER_PID, are written to ENV_FILE for `source`).
# Stop it with `kill "$COUNTERSIGN_TEST_PGBOUNCER_PID"`.
set -euo pipefail

env_file="${1:-}"
direct="${COUNTERSIGN_TEST_POSTGRES_URL:-}"
if [ -z "${direct}" ]; then
    echo "pgbouncer: COUNTERSIGN_TEST_POSTGRES_URL is not set: run .ci/postgres.sh first and source its env file" >&2
    exit 1
fi

if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
    echo "pgbouncer: installing PgBouncer" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq pgbouncer >&2
fi
binary="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"

# postgres://USER@127.0.0.1:5432/DATABASE[?...]
rest="${direct#*://}"
user="${rest%%@*}"
user="${user%%:*}"
database="${rest#*/}"
database="${database%%\?*}"

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=""
for candidate in $(seq 6432 6531); do
    if ! in_use "${candidate}"; then
        port="${candidate}"
        break
    fi
done
[ -n "${port}" ] || { echo "pgbouncer: no free port in 6432..6531 on 127.0.0.1" >&2; exit 1; }

dir="$(mktemp -d /tmp/countersign-pgbouncer.XXXXXX)"
cat >"${dir}/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${dir}/userlist.txt
pool_mode = transaction
max_client_conn = 400
default_pool_size = 20
; sqlx sends extra_float_digits unless told not to; the store's pooled mode does not.
ignore_startup_parameters = extra_float_digits
server_reset_query =
logfile = ${dir}/pgbouncer.log
pidfile = ${dir}/pgbouncer.pid
EOF
printf '"%s" ""\n' "${user}" >"${dir}/userlist.txt"

# PgBouncer refuses to run as root: run it as the server's owner when started by root.
run_as=()
if [ "$(id -u)" = "0" ]; then
    chown -R postgres "${dir}"
    run_as=(-u postgres)
fi
"${binary}" -d "${run_as[@]}" "${dir}/pgbouncer.ini" >&2

pid=""
for _ in $(seq 1 50); do
    if [ -s "${dir}/pgbouncer.pid" ] && in_use "${port}"; then
        pid="$(cat "${dir}/pgbouncer.pid")"
        break
    fi
    sleep 0.1
done
if [ -z "${pid}" ]; then
    echo "pgbouncer: did not come up on 127.0.0.1:${port}; its log:" >&2
    cat "${dir}/pgbouncer.log" >&2 || true
    exit 1
fi
# The pooler really is in front of the server: one statement through it.
if ! psql "postgres://${user}@127.0.0.1:${port}/${database}" -Atqc 'SELECT 1' >/dev/null; then
    echo "pgbouncer: a query through 127.0.0.1:${port} failed; its log (${dir}/pgbouncer.log):" >&2
    tail -n 20 "${dir}/pgbouncer.log" >&2 || true
    kill "${pid}" || true
    exit 1
fi

url_line="export COUNTERSIGN_TEST_PGBOUNCER_URL=postgres://${user}@127.0.0.1:${port}/${database}?pooler=transaction"
pid_line="export COUNTERSIGN_TEST_PGBOUNCER_PID=${pid}"
if [ -n "${env_file}" ]; then
    printf '%s\n%s\n' "${url_line}" "${pid_line}" >"${env_file}"
fi
echo "${url_line}"
echo "${pid_line}"
