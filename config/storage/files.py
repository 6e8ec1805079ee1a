"""Files (`ToolContext.add_file`) in the blob store: content-addressed keys beside the payloads, sealed with the
payload codec when it is on."""

from __future__ import annotations

import asyncio
import hashlib
import string
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from durable_agent.config.storage.codec import AESGCMCodec, CodecKeyError
from durable_agent.config.storage.local import DirectoryObjects
from durable_agent.config.storage.objects import BlobMissing, ObjectClient, StoreUnavailable, describe

T = TypeVar("T")


_SAFE = frozenset(string.ascii_letters + string.digits + "!-_.*'()")


def encode_segment(value: str | None) -> str:
    """A key segment as the SDK's S3/GCS drivers write it: percent-encoded UTF-8, `null` when empty."""
    if not value:
        return "null"
    return "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in value.encode())


SEALED_SEGMENT = "/d/hmac-sha256/"


def file_key(namespace: str, workflow_id: str, digest: str, key_id: str | None = None) -> str:
    """Where a file lives: under its sha256, or encrypted under the HMAC of its content with the codec key `key_id`."""
    named_by = "/d/sha256/" if key_id is None else f"{SEALED_SEGMENT}{encode_segment(key_id)}/"
    return f"v0/ns/{encode_segment(namespace)}/files/wi/{encode_segment(workflow_id)}{named_by}{digest}"


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
            key_id, digest = self.codec.file_digest(content)
            key = file_key(self.namespace, self.workflow_id, digest, key_id)
            data = self.codec.seal_file(content, key)
        else:
            key = file_key(self.namespace, self.workflow_id, hashlib.sha256(content).hexdigest())
            data = content
        try:
            if not await self.objects.exists(key):
                await self.objects.put(key, data)
        except Exception as exc:
            raise StoreUnavailable(f"file store {self.objects.location}: cannot write key {key}: "
                                   f"{describe(exc)}") from exc
        return f"{self.prefix}{key}"

    async def aget(self, content_ref: str) -> bytes:
        key = self._key(content_ref)
        try:
            blob = await self.objects.get(key)
        except BlobMissing:
            raise FileNotFoundError(f"file store {self.objects.location}: no object {key}") from None
        except Exception as exc:
            raise StoreUnavailable(f"file store {self.objects.location}: cannot read key {key}: "
                                   f"{describe(exc)}") from exc
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
