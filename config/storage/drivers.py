"""Payload drivers around a backend's own: errors that name the store and the key, and the metrics of what is
stored.

A blob that does not exist fails the workflow for good with `PayloadBlobMissing` (nothing can bring it back);
a store that cannot be reached makes the task retry (the prompt waits) with the reason in the workflow task
failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from durable_agent.config.observability import process_meter
from durable_agent.config.storage.objects import BlobMissing, ObjectClient, StoreUnavailable, describe, root_cause

MISSING_BLOB_ERROR = "PayloadBlobMissing"


class StoreDriver(StorageDriver):
    """A backend's payload driver under the same name and type, with every failure one line naming the store's
    location and the object key, and what it stores counted: `dagent_payload_stored_bytes` and
    `dagent_payloads_stored` by driver (on the process's metrics runtime; nothing is recorded without one).
    A missing object is `PayloadBlobMissing` (non-retryable; also the activity's type): see the module docstring."""

    def __init__(self, inner: StorageDriver, location: str) -> None:
        self.inner = inner
        self.location = location

    def name(self) -> str:
        return self.inner.name()

    def type(self) -> str:
        return self.inner.type()

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        try:
            claims = list(await self.inner.store(context, payloads))
        except Exception as exc:
            raise StoreUnavailable(f"payload store {self.location}: cannot write a payload: "
                                   f"{describe(exc)}") from exc
        meter = process_meter()
        labels = {"driver": self.inner.type()}
        meter.create_counter("dagent_payload_stored_bytes", "Payload bytes sent to external storage", "By").add(
            sum(p.ByteSize() for p in payloads), labels)
        meter.create_counter("dagent_payloads_stored", "Payloads sent to external storage").add(len(payloads), labels)
        return claims

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        try:
            return list(await self.inner.retrieve(context, claims))
        except Exception as exc:
            keys = ", ".join(str(c.claim_data.get("key") or c.claim_data.get("sha256")) for c in claims)
            cause = root_cause(exc)
            if isinstance(cause, BlobMissing):
                raise ApplicationError(
                    f"payload blob missing: store {self.location}, key {keys}: {cause} (deleted by retention, "
                    "or written by a client or worker that uses another store)",
                    type=MISSING_BLOB_ERROR, non_retryable=True) from exc
            raise StoreUnavailable(f"payload store {self.location}: cannot read key {keys}: "
                                   f"{describe(exc)}") from exc


def payload_driver(objects: ObjectClient) -> StorageDriver:
    return StoreDriver(objects.payload_driver(), objects.location)
