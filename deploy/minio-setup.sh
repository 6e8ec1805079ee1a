#!/bin/sh
# One-shot setup of the blob store (compose service `minio-setup`): the bucket for payloads and files,
# and a lifecycle rule that expires blobs under v0/ (every namespace's prefix) after
# DAGENT_BLOB_EXPIRE_DAYS days. Pick that larger than the longest a prompt may stay open (approval waits)
# plus the namespace's retention. Idempotent: safe to run on every `docker compose up`.
set -eu
: "${MINIO_URL:=http://minio:9000}"
: "${DAGENT_BUCKET:=dagent}"
: "${DAGENT_BLOB_EXPIRE_DAYS:=45}"
mc alias set store "$MINIO_URL" "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null
mc mb --ignore-existing "store/$DAGENT_BUCKET"
if ! mc ilm rule ls "store/$DAGENT_BUCKET" 2>/dev/null | grep -q "v0/"; then
    mc ilm rule add --prefix "v0/" --expire-days "$DAGENT_BLOB_EXPIRE_DAYS" "store/$DAGENT_BUCKET"
fi
echo "bucket $DAGENT_BUCKET ready (blobs expire after $DAGENT_BLOB_EXPIRE_DAYS days)"
