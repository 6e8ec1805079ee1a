"""The S3 blob store (`DAGENT_STORE=s3://bucket`): AWS S3, MinIO or any S3-compatible server through aioboto3,
the client the SDK's S3 driver uses. Credentials and region come from the usual AWS variables (read by
botocore); `DAGENT_S3_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`) points it at another server (path-style)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.converter import StorageDriver

from durable_agent.agent.extras import require
from durable_agent.config.storage.objects import BlobMissing, ObjectClient, PerLoop, S3Adapter


class S3Objects(ObjectClient):
    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str | None = None) -> None:
        require("s3", f"the blob store s3://{bucket}")
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self.region = region
        self.location = f"s3://{bucket}" + (f" at {endpoint_url}" if endpoint_url else "")
        self._clients = PerLoop(self._open)

    async def _open(self) -> tuple[Any, Callable[[], Awaitable[None]]]:
        import aioboto3
        from botocore.config import Config

        options: dict[str, Any] = {"config": Config(retries={"max_attempts": 3, "mode": "standard"},
                                                    connect_timeout=5, read_timeout=60)}
        if self.endpoint_url:
            options["endpoint_url"] = self.endpoint_url
            options["config"] = options["config"].merge(Config(s3={"addressing_style": "path"}))
        if self.region:
            options["region_name"] = self.region
        manager = aioboto3.Session().client("s3", **options)
        client = await manager.__aenter__()
        return client, lambda: manager.__aexit__(None, None, None)

    async def raw(self) -> Any:
        return await self._clients.get()

    async def put(self, key: str, data: bytes) -> None:
        await (await self.raw()).put_object(Bucket=self.bucket, Key=key, Body=data)

    async def get(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        try:
            response = await (await self.raw()).get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BlobMissing("NoSuchKey") from None
            raise
        return bytes(await response["Body"].read())

    async def exists(self, key: str) -> bool:
        return await self._head(key) is not None

    async def written_at(self, key: str) -> datetime | None:
        head = await self._head(key)
        return None if head is None else head["LastModified"]

    async def _head(self, key: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return await (await self.raw()).head_object(Bucket=self.bucket, Key=key)  # type: ignore[no-any-return]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    async def keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        async for page in (await self.raw()).get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                                       Prefix=prefix):
            keys += [item["Key"] for item in page.get("Contents", [])]
        return keys

    async def rewrite(self, key: str) -> None:
        await (await self.raw()).copy_object(Bucket=self.bucket, Key=key, MetadataDirective="REPLACE",
                                             CopySource={"Bucket": self.bucket, "Key": key})

    def payload_driver(self) -> StorageDriver:
        return S3StorageDriver(client=S3Adapter(self), bucket=self.bucket)

    async def aclose(self) -> None:
        await self._clients.aclose()

