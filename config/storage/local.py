"""The local blob store: objects as files under one directory (`DAGENT_PAYLOAD_DIR`, `DAGENT_FILE_DIR`), which
every client and worker must share (same machine or a shared volume)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.converter import StorageDriver

from durable_agent.config.storage.objects import BlobMissing, ObjectClient, S3Adapter

DIR_DRIVER_NAME = "dagent-dir"
STORE_ID_FILE = ".store-id"


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

    async def keys(self, prefix: str) -> list[str]:
        base = self.root / prefix
        return [str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file()] if base.exists() else []

    async def written_at(self, key: str) -> datetime | None:
        path = self.root / key
        return datetime.fromtimestamp(path.stat().st_mtime, UTC) if path.is_file() else None

    async def rewrite(self, key: str) -> None:
        os.utime(self.root / key)

    def payload_driver(self) -> StorageDriver:
        return S3StorageDriver(client=S3Adapter(self), bucket=lambda _c, _p: self.bucket, driver_name=DIR_DRIVER_NAME)
