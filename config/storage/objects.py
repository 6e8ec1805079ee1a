"""What every blob store backend is: an `ObjectClient` (get/put/exists of whole objects by key), the errors
that name the store, and the pieces the backends share (a per-event-loop client, the SDK S3 driver's adapter)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from temporalio.contrib.aws.s3driver import S3StorageDriverClient
from temporalio.converter import StorageDriver


class StoreUnavailable(RuntimeError):
    """The blob store cannot be used (unreachable, no bucket, no permission); one line naming the store."""


class BlobMissing(LookupError):
    """The object is not in the store (deleted, never written, or written to another store)."""


class WrongStore(LookupError):
    """A reference points at a different store than this process is configured with."""


class ObjectClient:
    """get/put/exists of whole objects by key; `location` names the store in messages (`s3://bucket`)."""

    location: str
    bucket: str

    async def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    async def get(self, key: str) -> bytes:
        raise NotImplementedError

    async def exists(self, key: str) -> bool:
        raise NotImplementedError

    def payload_driver(self) -> StorageDriver:
        raise NotImplementedError

    # What `dagent store refresh` (workers/retention.py) needs of a store: implemented for directories, S3 and GCS.

    async def keys(self, prefix: str) -> list[str]:
        raise self._not_refreshable()

    async def written_at(self, key: str) -> datetime | None:
        """When the object was last written (None: it does not exist)."""
        raise self._not_refreshable()

    async def rewrite(self, key: str) -> None:
        """Write the object again in place: same key, same bytes, a new age."""
        raise self._not_refreshable()

    def _not_refreshable(self) -> ValueError:
        return ValueError(f"{self.location}: refreshing is implemented for directories, S3 and GCS only")

    async def aclose(self) -> None:
        return None


class PerLoop:
    """An async client that belongs to one event loop (aiohttp sessions do), created on first use there."""

    def __init__(self, factory: Callable[[], Awaitable[tuple[Any, Callable[[], Awaitable[None]]]]]) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = \
            weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    async def get(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._clients.get(loop)
        if found is None:
            found = await self._factory()
            with self._lock:
                found = self._clients.setdefault(loop, found)
        return found[0]

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._clients.pop(loop, None)
        if found is not None:
            await found[1]()


class S3Adapter(S3StorageDriverClient):
    """Lets the SDK's S3 driver (its key layout and integrity checks) run over any of our object clients."""

    def __init__(self, objects: ObjectClient) -> None:
        self.objects = objects

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        self._same_bucket(bucket)
        await self.objects.put(key, data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        self._same_bucket(bucket)
        return await self.objects.exists(key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        self._same_bucket(bucket)
        return await self.objects.get(key)

    def _same_bucket(self, bucket: str) -> None:
        if bucket != self.objects.bucket:
            raise WrongStore(f"the blob is in store {bucket!r}, but this process uses {self.objects.bucket!r} "
                             f"({self.objects.location}): every client and worker must share one store")


def root_cause(exc: BaseException) -> BaseException:
    """The innermost `__cause__` of `exc` (at most 10 deep)."""
    seen = 0
    while exc.__cause__ is not None and seen < 10:
        exc = exc.__cause__
        seen += 1
    return exc


def describe(exc: BaseException) -> str:
    """`exc`'s root cause as one line: its type and at most 300 characters of its message."""
    cause = root_cause(exc)
    text = " ".join(str(cause).split())[:300]
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__
