"""The GCS blob store (`DAGENT_STORE=gs://bucket`): the SDK's GCS driver over gcloud-aio-storage, which reads
`STORAGE_EMULATOR_HOST` itself (for an emulator)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from durable_agent.agent.extras import require
from durable_agent.config.storage.objects import BlobMissing, ObjectClient, PerLoop


class GCSObjects(ObjectClient):
    def __init__(self, bucket: str) -> None:
        require("gcs", f"the blob store gs://{bucket}")
        self.bucket = bucket
        self.location = f"gs://{bucket}"
        self._clients = PerLoop(self._open)

    async def _open(self) -> tuple[Any, Callable[[], Awaitable[None]]]:
        from gcloud.aio.storage import Storage

        storage = Storage()
        return storage, storage.close

    async def raw(self) -> Any:
        return await self._clients.get()

    async def put(self, key: str, data: bytes) -> None:
        await (await self.raw()).upload(self.bucket, key, data, content_type="application/octet-stream",
                                        force_resumable_upload=False)

    async def get(self, key: str) -> bytes:
        from aiohttp import ClientResponseError

        try:
            return bytes(await (await self.raw()).download(self.bucket, key))
        except ClientResponseError as exc:
            if exc.status == 404:
                raise BlobMissing("404 Not Found") from None
            raise

    async def exists(self, key: str) -> bool:
        return await self._metadata(key) is not None

    async def written_at(self, key: str) -> datetime | None:
        # A GCS lifecycle `age` counts from the object's creation: a rewrite creates it again.
        metadata = await self._metadata(key)
        return None if metadata is None else datetime.fromisoformat(metadata["timeCreated"].replace("Z", "+00:00"))

    async def _metadata(self, key: str) -> dict[str, Any] | None:
        from aiohttp import ClientResponseError

        try:
            return await (await self.raw()).download_metadata(self.bucket, key)  # type: ignore[no-any-return]
        except ClientResponseError as exc:
            if exc.status == 404:
                return None
            raise

    async def keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        storage, token = await self.raw(), None
        while True:
            page = await storage.list_objects(self.bucket, params={"prefix": prefix,
                                                                   **({"pageToken": token} if token else {})})
            keys += [item["name"] for item in page.get("items", [])]
            if not (token := page.get("nextPageToken")):
                return keys

    async def rewrite(self, key: str) -> None:
        # rewriteTo onto itself: a new generation, so a new creation time
        refreshed = {"metadata": {"dagent-refreshed-at": datetime.now(UTC).isoformat()}}
        await (await self.raw()).copy(self.bucket, key, self.bucket, new_name=key, metadata=refreshed)

    def payload_driver(self) -> StorageDriver:
        return _LazyGCSDriver(self)

    async def aclose(self) -> None:
        await self._clients.aclose()


class _LazyGCSDriver(StorageDriver):
    """The SDK's GCS driver over a per-event-loop gcloud-aio client."""

    def __init__(self, objects: GCSObjects) -> None:
        self.objects = objects

    def name(self) -> str:
        return "gcp.gcsdriver"

    def type(self) -> str:
        return "gcp.gcsdriver"

    async def _driver(self) -> StorageDriver:
        from temporalio.contrib.gcp.gcsdriver import GCSStorageDriver
        from temporalio.contrib.gcp.gcsdriver.gcloud_aio import new_gcloud_aio_client

        return GCSStorageDriver(client=new_gcloud_aio_client(await self.objects.raw()), bucket=self.objects.bucket)

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return list(await (await self._driver()).store(context, payloads))

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return list(await (await self._driver()).retrieve(context, claims))
