"""The data converter every client and worker uses: pydantic JSON, optionally encrypted, with large payloads
kept out of history in the blob store (workers/blobstore.py).

Payloads above a threshold (a whole prompt record, a conversation's history, a big tool output) are stored
by Temporal's external storage, and history holds only a small reference. Every client and worker must
use the same store (the same directory, or the same S3/GCS bucket) and the same codec keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    PayloadCodec,
    StorageDriverClaim,
    StorageDriverStoreContext,
)

from workers.blobstore import ObjectClient, WrappingDriver, objects_for, payload_driver
from workers.observability import process_meter

DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024


class MeteredStorageDriver(WrappingDriver):
    """Counts what another driver stores: `dagent_payload_stored_bytes` and `dagent_payloads_stored` by driver
    (on the process's metrics runtime; nothing is recorded without one)."""

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = await super().store(context, payloads)
        meter = process_meter()
        labels = {"driver": self.inner.type()}
        meter.create_counter("dagent_payload_stored_bytes", "Payload bytes sent to external storage", "By").add(
            sum(p.ByteSize() for p in payloads), labels)
        meter.create_counter("dagent_payloads_stored", "Payloads sent to external storage").add(len(payloads), labels)
        return claims


def data_converter(store: ObjectClient | str | Path, *, threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
                   codec: PayloadCodec | None = None) -> DataConverter:
    """pydantic JSON, the `codec` (encryption) if any, then external storage of payloads of `threshold`
    bytes or more in `store` (an object client, or a local directory path)."""
    objects = store if isinstance(store, ObjectClient) else objects_for("", store)
    storage = ExternalStorage(drivers=[MeteredStorageDriver(payload_driver(objects))], payload_size_threshold=threshold)
    return dataclasses.replace(pydantic_data_converter, external_storage=storage, payload_codec=codec)
