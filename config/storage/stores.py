"""The blob store a configuration names (`DAGENT_STORE`): one object client per store and process, and the
start-up check that it can be used."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from durable_agent.config.storage.gcs import GCSObjects
from durable_agent.config.storage.local import DirectoryObjects
from durable_agent.config.storage.objects import ObjectClient, StoreUnavailable, describe
from durable_agent.config.storage.s3 import S3Objects


def objects_for(store_url: str, directory: str | Path, *, s3_endpoint_url: str | None = None) -> ObjectClient:
    """The object client for `DAGENT_STORE` (`""`, `s3://bucket`, `gs://bucket`); one per configuration
    and process, so its connections are shared by every converter and file store that uses it."""
    url = store_url.strip()
    if not url:
        return _cached_objects("dir", str(Path(directory).absolute()), None)
    scheme, _, rest = url.partition("://")
    bucket = rest.strip("/")
    if scheme not in ("s3", "gs", "gcs") or not bucket or "/" in bucket:
        raise ValueError(f"DAGENT_STORE must be empty (local directory), s3://<bucket> or gs://<bucket>, "
                         f"not {store_url!r}")
    if scheme == "s3":
        return _cached_objects("s3", bucket, s3_endpoint_url or None)
    return _cached_objects("gs", bucket, None)


@functools.lru_cache(maxsize=64)
def _cached_objects(kind: str, name: str, endpoint: str | None) -> ObjectClient:
    if kind == "dir":
        return DirectoryObjects(name)
    if kind == "s3":
        return S3Objects(name, endpoint_url=endpoint)
    return GCSObjects(name)


async def check_store(objects: ObjectClient) -> None:
    """Write and read back a small probe object; `StoreUnavailable` (one line) when that fails."""
    key = "v0/probe/dagent-start-check"
    data = b"durable-agent store check"
    try:
        async with asyncio.timeout(30):
            if not await objects.exists(key):
                await objects.put(key, data)
            if await objects.get(key) != data:
                raise StoreUnavailable(f"blob store {objects.location}: the probe object {key} reads back wrong")
    except StoreUnavailable:
        raise
    except Exception as exc:  # TimeoutError included
        raise StoreUnavailable(f"blob store {objects.location} cannot be used: {describe(exc)}") from None

