"""One blob store for large payloads and for files: a local directory, S3 (or MinIO, any S3 API) or GCS.

Configured by one setting, `DAGENT_STORE`:
- empty (default): the local directory `DAGENT_PAYLOAD_DIR` (payloads) and `DAGENT_FILE_DIR` (files);
  every client and worker must share it (same machine or a shared volume);
- `s3://bucket`: `temporalio.contrib.aws.s3driver` with the SDK's aioboto3 client. Credentials and region
  come from the usual AWS variables (read by botocore); `DAGENT_S3_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`)
  points it at MinIO or another S3-compatible server (path-style addressing);
- `gs://bucket`: `temporalio.contrib.gcp.gcsdriver` with the SDK's gcloud-aio-storage client (which reads
  `STORAGE_EMULATOR_HOST` itself, for an emulator).

Objects share one layout: payloads under `v0/ns/<namespace>/wt/<type>/wi/<workflow id>/...` (the SDK
drivers' layout, also used for the directory) and files under `v0/ns/<namespace>/files/wi/<prompt id>/...`,
so a lifecycle rule or the `dagent store sweep` command can remove a closed workflow's blobs by prefix.

Errors name the store and the key. A blob that does not exist fails the workflow for good with
`PayloadBlobMissing` (nothing can bring it back); a store that cannot be reached makes the task retry
(the prompt waits) with the reason in the workflow task failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import string
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from durable_agent.agent.extras import require
from durable_agent.workers.codec import AESGCMCodec, CodecKeyError

T = TypeVar("T")

DIR_DRIVER_NAME = "dagent-dir"
MISSING_BLOB_ERROR = "PayloadBlobMissing"
STORE_ID_FILE = ".store-id"


class StoreUnavailable(RuntimeError):
    """The blob store cannot be used (unreachable, no bucket, no permission); one line naming the store."""


class BlobMissing(LookupError):
    """The object is not in the store (deleted, never written, or written to another store)."""


class WrongStore(LookupError):
    """A reference points at a different store than this process is configured with."""


# --- object clients: one small interface over the directory, S3 and GCS ------------------------------


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

    async def aclose(self) -> None:
        return None


class DirectoryObjects(ObjectClient):
    """Objects as files under `root/<key>`. The store id (in `root/.store-id`) plays the bucket's part, so
    a reference written on another machine's directory is recognised as such instead of as missing."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        self.location = f"dir:{self.root}"
        self._bucket: str | None = None

    @property
    def bucket(self) -> str:  # type: ignore[override]
        if self._bucket is None:
            id_file = self.root / STORE_ID_FILE
            if not id_file.exists():
                self.root.mkdir(parents=True, exist_ok=True)
                partial = id_file.with_suffix(f".{uuid.uuid4().hex}.tmp")
                partial.write_text(f"dir-{uuid.uuid4().hex[:12]}\n")
                with contextlib.suppress(FileExistsError):
                    os.link(partial, id_file)  # first writer wins, atomically
                partial.unlink()
            self._bucket = id_file.read_text().strip()
        return self._bucket

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()) or key.startswith("/"):
            raise ValueError(f"not an object key of this store: {key!r}")
        return path

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        partial.write_bytes(data)
        partial.replace(path)

    def _get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise BlobMissing(f"no file {self._path(key)}") from None

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._put, key, data)

    async def get(self, key: str) -> bytes:
        return await asyncio.to_thread(self._get, key)

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._path(key).exists)

    def payload_driver(self) -> StorageDriver:
        return _LegacyDirectoryDriver(
            S3StorageDriver(client=_S3Adapter(self), bucket=lambda _c, _p: self.bucket, driver_name=DIR_DRIVER_NAME),
            self.root)


class _PerLoop:
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


class S3Objects(ObjectClient):
    """S3 or any S3-compatible server, through aioboto3 (the SDK's S3 driver uses the same client)."""

    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str | None = None) -> None:
        require("s3", f"the blob store s3://{bucket}")
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self.region = region
        self.location = f"s3://{bucket}" + (f" at {endpoint_url}" if endpoint_url else "")
        self._clients = _PerLoop(self._open)

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
        from botocore.exceptions import ClientError

        try:
            await (await self.raw()).head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return False
            raise

    def payload_driver(self) -> StorageDriver:
        return S3StorageDriver(client=_S3Adapter(self), bucket=self.bucket)

    async def aclose(self) -> None:
        await self._clients.aclose()


class GCSObjects(ObjectClient):
    """Google Cloud Storage through gcloud-aio-storage (the SDK's GCS driver adapter)."""

    def __init__(self, bucket: str) -> None:
        require("gcs", f"the blob store gs://{bucket}")
        self.bucket = bucket
        self.location = f"gs://{bucket}"
        self._clients = _PerLoop(self._open)

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
        from aiohttp import ClientResponseError

        try:
            await (await self.raw()).download_metadata(self.bucket, key)
            return True
        except ClientResponseError as exc:
            if exc.status == 404:
                return False
            raise

    def payload_driver(self) -> StorageDriver:
        from temporalio.contrib.gcp.gcsdriver import GCSStorageDriver
        from temporalio.contrib.gcp.gcsdriver.gcloud_aio import new_gcloud_aio_client

        return _LazyGCSDriver(self, GCSStorageDriver, new_gcloud_aio_client)

    async def aclose(self) -> None:
        await self._clients.aclose()


class _S3Adapter(S3StorageDriverClient):
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


class _LazyGCSDriver(StorageDriver):
    """The SDK's GCS driver over a per-event-loop gcloud-aio client."""

    def __init__(self, objects: GCSObjects, driver_cls: Any, adapter: Callable[[Any], Any]) -> None:
        self.objects = objects
        self._driver_cls = driver_cls
        self._adapter = adapter

    def name(self) -> str:
        return "gcp.gcsdriver"

    def type(self) -> str:
        return "gcp.gcsdriver"

    async def _driver(self) -> StorageDriver:
        driver: StorageDriver = self._driver_cls(client=self._adapter(await self.objects.raw()),
                                                 bucket=self.objects.bucket)
        return driver

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return list(await (await self._driver()).store(context, payloads))

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return list(await (await self._driver()).retrieve(context, claims))


class _LegacyDirectoryDriver(StorageDriver):
    """The directory driver, still reading references of the earlier flat layout (`root/<sha256>`)."""

    def __init__(self, inner: StorageDriver, root: Path) -> None:
        self.inner = inner
        self.root = root

    def name(self) -> str:
        return DIR_DRIVER_NAME

    def type(self) -> str:
        return DIR_DRIVER_NAME

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return list(await self.inner.store(context, payloads))

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        if not any("sha256" in claim.claim_data for claim in claims):
            return list(await self.inner.retrieve(context, claims))
        return [await self._retrieve_one(context, claim) for claim in claims]

    async def _retrieve_one(self, context: StorageDriverRetrieveContext, claim: StorageDriverClaim) -> Payload:
        digest = claim.claim_data.get("sha256")
        if digest is None:
            return (await self.inner.retrieve(context, [claim]))[0]
        if not digest.isalnum():
            raise ValueError(f"not a payload reference of this store: {digest!r}")
        try:
            data = await asyncio.to_thread((self.root / digest).read_bytes)
        except FileNotFoundError:
            raise BlobMissing(f"no file {self.root / digest}") from None
        payload = Payload()
        payload.ParseFromString(data)
        return payload


# --- errors that name the store and the key ----------------------------------------------------------


def _root_cause(exc: BaseException) -> BaseException:
    seen = 0
    while exc.__cause__ is not None and seen < 10:
        exc = exc.__cause__
        seen += 1
    return exc


class WrappingDriver(StorageDriver):
    """A driver around another one: the same name and type; subclasses add to what it stores and retrieves."""

    def __init__(self, inner: StorageDriver) -> None:
        self.inner = inner

    def name(self) -> str:
        return self.inner.name()

    def type(self) -> str:
        return self.inner.type()

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return list(await self.inner.store(context, payloads))

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return list(await self.inner.retrieve(context, claims))


class ExplainingDriver(WrappingDriver):
    """Wraps a payload driver so every failure is one line with the store's location and the object key.

    A missing object fails the workflow (non-retryable `PayloadBlobMissing`, also the activity's type); any
    other failure (unreachable store, wrong store) is retryable, so the prompt waits and the reason is in
    the workflow task failure until the configuration or the store is fixed.
    """

    def __init__(self, inner: StorageDriver, location: str) -> None:
        super().__init__(inner)
        self.location = location

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        try:
            return await super().store(context, payloads)
        except Exception as exc:
            raise StoreUnavailable(f"payload store {self.location}: cannot write a payload: "
                                   f"{_describe(exc)}") from exc

    async def retrieve(self, context: StorageDriverRetrieveContext,
                       claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        try:
            return await super().retrieve(context, claims)
        except Exception as exc:
            keys = ", ".join(str(c.claim_data.get("key") or c.claim_data.get("sha256")) for c in claims)
            cause = _root_cause(exc)
            if isinstance(cause, BlobMissing):
                raise ApplicationError(
                    f"payload blob missing: store {self.location}, key {keys}: {cause} (deleted by retention, "
                    "or written by a client or worker that uses another store)",
                    type=MISSING_BLOB_ERROR, non_retryable=True) from exc
            raise StoreUnavailable(f"payload store {self.location}: cannot read key {keys}: "
                                   f"{_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    cause = _root_cause(exc)
    text = " ".join(str(cause).split())[:300]
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


# --- the store: payload driver + files, built from configuration -------------------------------------


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
    except (Exception, TimeoutError) as exc:
        raise StoreUnavailable(f"blob store {objects.location} cannot be used: {_describe(exc)}") from None


# --- files (ToolContext.add_file) in the same store --------------------------------------------------


_SAFE = frozenset(string.ascii_letters + string.digits + "!-_.*'()")


def encode_segment(value: str | None) -> str:
    """A key segment as the SDK's S3/GCS drivers write it: percent-encoded UTF-8, `null` when empty."""
    if not value:
        return "null"
    return "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in value.encode())


def file_key(namespace: str, workflow_id: str, digest: str) -> str:
    return f"v0/ns/{encode_segment(namespace)}/files/wi/{encode_segment(workflow_id)}/d/sha256/{digest}"


SEALED_SEGMENT = "/d/hmac-sha256/"


def sealed_file_key(namespace: str, workflow_id: str, key_id: str, digest: str) -> str:
    """Where an encrypted file lives: named by the HMAC of its content under the codec key `key_id`."""
    return (f"v0/ns/{encode_segment(namespace)}/files/wi/{encode_segment(workflow_id)}"
            f"{SEALED_SEGMENT}{encode_segment(key_id)}/{digest}")


class _BackgroundLoop:
    """A private event loop thread, so synchronous callers (tools calling `ctx.add_file`) can use async
    object clients without touching the caller's loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="dagent-blob-io", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


class BlobFileStore:
    """File contents in the blob store; `content_ref` is `<store>/<key>` (e.g. `s3://bucket/v0/ns/...`).

    Implements `agent.context.FileStore`. `put`/`get` block the caller until the object is written/read;
    `aput`/`aget` are the async forms for async callers (the client).

    With the payload codec (`DAGENT_CODEC_KEYS`), contents are sealed with its active key (AES-GCM, the key id
    in the object, bound to the object's key) and named by an HMAC under that key (`.../d/hmac-sha256/<key
    id>/<hmac>`): the store holds no plaintext and no plain hash of it; identical files share one object only
    within one workflow and one key. Without the codec they are stored as is under their sha256 (`.../d/sha256/`),
    which is also how files written before the codec was switched on are read (their hash is checked).
    """

    def __init__(self, objects: ObjectClient, *, namespace: str = "default", workflow_id: str = "unscoped",
                 codec: AESGCMCodec | None = None, _io: _BackgroundLoop | None = None) -> None:
        self.objects = objects
        self.namespace = namespace
        self.workflow_id = workflow_id
        self.codec = codec
        self._io = _io or _BackgroundLoop()

    def scoped(self, namespace: str, workflow_id: str) -> BlobFileStore:
        return BlobFileStore(self.objects, namespace=namespace, workflow_id=workflow_id, codec=self.codec,
                             _io=self._io)

    @property
    def prefix(self) -> str:
        if isinstance(self.objects, DirectoryObjects):
            return "dir:"
        return f"{self.objects.location.split(' at ')[0]}/"

    async def aput(self, name: str, content: bytes, media_type: str) -> str:
        if self.codec is not None:
            key = sealed_file_key(self.namespace, self.workflow_id, *self.codec.file_digest(content))
            data = self.codec.seal_file(content, key)
        else:
            key = file_key(self.namespace, self.workflow_id, hashlib.sha256(content).hexdigest())
            data = content
        try:
            if not await self.objects.exists(key):
                await self.objects.put(key, data)
        except Exception as exc:
            raise StoreUnavailable(f"file store {self.objects.location}: cannot write key {key}: "
                                   f"{_describe(exc)}") from exc
        return f"{self.prefix}{key}"

    async def aget(self, content_ref: str) -> bytes:
        key = self._key(content_ref)
        try:
            blob = await self.objects.get(key)
        except BlobMissing:
            raise FileNotFoundError(f"file store {self.objects.location}: no object {key}") from None
        except Exception as exc:
            raise StoreUnavailable(f"file store {self.objects.location}: cannot read key {key}: "
                                   f"{_describe(exc)}") from exc
        if SEALED_SEGMENT in key:
            if self.codec is None:
                raise CodecKeyError(f"file {key} is encrypted: this process needs DAGENT_CODEC_KEYS to read it")
            return self.codec.open_file(blob, key)
        digest = key.rsplit("/", 1)[-1]
        if len(digest) == 64 and hashlib.sha256(blob).hexdigest() != digest:  # content-addressed: check it
            raise CodecKeyError(f"file {key} does not match its sha256 (changed in the store)")
        return blob

    def _key(self, content_ref: str) -> str:
        scheme, _, digest = content_ref.partition(":")
        if scheme == "sha256" and isinstance(self.objects, DirectoryObjects) and digest.isalnum():
            return digest  # a file written before the shared layout: `root/<sha256>`
        if not content_ref.startswith(self.prefix):
            raise ValueError(f"file reference {content_ref!r} is not in this store ({self.objects.location}): "
                             "every client and worker must share one store")
        return content_ref[len(self.prefix):]

    def put(self, name: str, content: bytes, media_type: str) -> str:
        return self._io.run(self.aput(name, content, media_type))

    def get(self, content_ref: str) -> bytes:
        return self._io.run(self.aget(content_ref))


def payload_driver(objects: ObjectClient) -> StorageDriver:
    return ExplainingDriver(objects.payload_driver(), objects.location)
