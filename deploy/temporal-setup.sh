#!/bin/sh
# One-shot setup for the compose stack (runs in temporalio/admin-tools, after the server is up):
#   1. wait until the Temporal frontend is healthy,
#   2. create the namespace if it does not exist,
#   3. register the custom search attributes the agent's workflows upsert.
# Idempotent: safe to run on every `docker compose up`. Exits non-zero if anything is still missing.
#
# Env: TEMPORAL_ADDRESS (default temporal:7233), TEMPORAL_NAMESPACE (default "default"),
#      TEMPORAL_RETENTION (default 7d), SEARCH_ATTRIBUTES ("Name=Type ..."; default: the agent's three).
set -eu

ADDRESS="${TEMPORAL_ADDRESS:-temporal:7233}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
RETENTION="${TEMPORAL_RETENTION:-7d}"
SEARCH_ATTRIBUTES="${SEARCH_ATTRIBUTES:-PromptState=Keyword UserId=Keyword ConversationId=Keyword ParentPromptId=Keyword}"
TEMPORAL="${TEMPORAL_CLI:-temporal}"

# The server binds IPv4 only; resolve the host to an IPv4 address so the CLI does not try IPv6 first.
HOST="${ADDRESS%:*}"
PORT="${ADDRESS##*:}"
if command -v getent >/dev/null 2>&1; then
    IP="$(getent ahostsv4 "$HOST" 2>/dev/null | awk 'NR == 1 { print $1 }')"
    if [ -n "$IP" ]; then ADDRESS="$IP:$PORT"; fi
fi
export TEMPORAL_ADDRESS="$ADDRESS"

# retry <attempts> <command...>: run the command once a second until it succeeds.
retry() {
    attempts="$1"; shift
    n=0
    until "$@" >/dev/null 2>&1; do
        n=$((n + 1))
        if [ "$n" -ge "$attempts" ]; then
            echo "temporal-setup: giving up after $attempts attempts: $*" >&2
            "$@" >&2 || true   # show the last error
            return 1
        fi
        sleep 1
    done
}

echo "temporal-setup: waiting for Temporal at $ADDRESS"
retry 180 "$TEMPORAL" operator cluster health

if "$TEMPORAL" operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
    echo "temporal-setup: namespace $NAMESPACE exists"
else
    echo "temporal-setup: creating namespace $NAMESPACE (retention $RETENTION)"
    "$TEMPORAL" operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION" \
        || "$TEMPORAL" operator namespace describe --namespace "$NAMESPACE" >/dev/null  # lost a race: fine
fi
# A new namespace takes a few seconds to reach every service's namespace cache.
retry 60 "$TEMPORAL" operator search-attribute list --namespace "$NAMESPACE"

# One attribute per call: `search-attribute create` with several --name flags skips the remaining
# names when the first one already exists. A single create is idempotent for the same type and fails
# (good) when the name exists with another type.
before="$("$TEMPORAL" operator search-attribute list --namespace "$NAMESPACE" --output json)"
created=0
for pair in $SEARCH_ATTRIBUTES; do
    name="${pair%%=*}"
    type="${pair#*=}"
    if printf '%s' "$before" | grep -q "\"$name\""; then
        echo "temporal-setup: search attribute $name exists"
    else
        echo "temporal-setup: creating search attribute $name ($type)"
        created=1
    fi
    "$TEMPORAL" operator search-attribute create --namespace "$NAMESPACE" --name "$name" --type "$type" >/dev/null
done
if [ "$created" = 1 ]; then
    # New attributes reach the history service's namespace cache within ~10 s; give them that time
    # so the worker's first upserts do not fail (they would be retried, but noisily).
    sleep "${SETTLE_SECONDS:-10}"
fi

listed="$("$TEMPORAL" operator search-attribute list --namespace "$NAMESPACE" --output json)"
for pair in $SEARCH_ATTRIBUTES; do
    name="${pair%%=*}"
    if ! printf '%s' "$listed" | grep -q "\"$name\""; then
        echo "temporal-setup: search attribute $name is not registered" >&2
        exit 1
    fi
done
echo "temporal-setup: done (namespace $NAMESPACE, search attributes: $SEARCH_ATTRIBUTES)"
