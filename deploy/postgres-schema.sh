#!/bin/sh
# One-shot schema setup for the compose stack (runs in temporalio/admin-tools before the server):
# creates the `temporal` and `temporal_visibility` databases on first start and applies any newer
# schema versions on later starts (so upgrading the images upgrades an existing volume in place).
#
# Env: POSTGRES_SEEDS (host), DB_PORT, POSTGRES_USER, SQL_PASSWORD (read by temporal-sql-tool),
#      DBNAME (default temporal), VISIBILITY_DBNAME (default temporal_visibility).
set -eu

HOST="${POSTGRES_SEEDS:-postgresql}"
PORT="${DB_PORT:-5432}"
USER="${POSTGRES_USER:-temporal}"
SCHEMA_DIR="${SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"

echo "postgres-schema: waiting for $HOST:$PORT"
n=0
until nc -z "$HOST" "$PORT"; do
    n=$((n + 1))
    if [ "$n" -ge 120 ]; then echo "postgres-schema: $HOST:$PORT unreachable" >&2; exit 1; fi
    sleep 1
done

sql() {
    temporal-sql-tool --plugin postgres12 --ep "$HOST" -p "$PORT" -u "$USER" "$@"
}

for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
    db="${pair%%:*}"
    schema="${pair#*:}"
    echo "postgres-schema: $db ($schema schema)"
    sql --db "$db" create || echo "postgres-schema: database $db already exists"
    sql --db "$db" setup-schema -v 0.0
    sql --db "$db" update-schema -d "$SCHEMA_DIR/$schema/versioned"
done
echo "postgres-schema: done"
