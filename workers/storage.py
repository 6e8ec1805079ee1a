"""The data converter every client and worker uses: pydantic JSON, with large payloads kept out of history.

Payloads above a threshold (a whole prompt record, a conversation's history, a big tool output) are
stored by Temporal's external storage in a content-addressed directory, and history holds only a small
reference. Clients and workers must share that directory (same machine, or a shared volume); on a real
cluster swap the driver for `temporalio.contrib.aws.s3driver` or `temporalio.contrib.gcp.gcsdriver`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from workers.observability import process_meter

DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024


class DirectoryStorageDriver(StorageDriver):
    """Payloads as files named by their SHA-256: idempotent under retries, safe to share between processes."""

    def __init__(self, root: Path, name: str = "dagent-dir") -> None:
        self.root = root
        self._name = name

    def name(self) -> str:
        return self._name

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._store_all, payloads)

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return await asyncio.to_thread(self._retrieve_all, claims)

    def _store_all(self, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        self.root.mkdir(parents=True, exist_ok=True)
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            path = self.root / digest
            if not path.exists():
                partial = path.with_suffix(f".{digest[:8]}.tmp")
                partial.write_bytes(data)
                partial.replace(path)
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    def _retrieve_all(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        payloads = []
        for claim in claims:
            digest = claim.claim_data["sha256"]
            if not digest.isalnum():
                raise ValueError(f"not a payload reference of this store: {digest!r}")
            payload = Payload()
            payload.ParseFromString((self.root / digest).read_bytes())
            payloads.append(payload)
        return payloads


class MeteredStorageDriver(StorageDriver):
    """Counts what another driver stores: `dagent_payload_stored_bytes` and `dagent_payloads_stored` by driver
    (on the process's metrics runtime; nothing is recorded without one)."""

    def __init__(self, inner: StorageDriver) -> None:
        self.inner = inner

    def name(self) -> str:
        return self.inner.name()

    def type(self) -> str:
        return self.inner.type()

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = await self.inner.store(context, payloads)
        meter = process_meter()
        labels = {"driver": self.inner.type()}
        meter.create_counter("dagent_payload_stored_bytes", "Payload bytes sent to external storage", "By").add(
            sum(p.ByteSize() for p in payloads), labels)
        meter.create_counter("dagent_payloads_stored", "Payloads sent to external storage").add(len(payloads), labels)
        return claims

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return await self.inner.retrieve(context, claims)


def data_converter(payload_dir: str | Path, *, threshold: int = DEFAULT_PAYLOAD_THRESHOLD) -> DataConverter:
    """pydantic JSON plus external storage of payloads of `threshold` bytes or more in `payload_dir`."""
    storage = ExternalStorage(drivers=[MeteredStorageDriver(DirectoryStorageDriver(Path(payload_dir).absolute()))],
                              payload_size_threshold=threshold)
    return dataclasses.replace(pydantic_data_converter, external_storage=storage)
