"""Optional payload encryption: AES-256-GCM, key id in the payload metadata, rotation by key id.

Switched on by `DAGENT_CODEC_KEYS` (comma-separated `key-id:<base64 of 32 random bytes>`), read from the
environment of every client and worker (never from a file in the repo, never logged). New payloads are
encrypted with `DAGENT_CODEC_KEY_ID` (default: the first key listed); any listed key decrypts, so rotating
is: add the new key first everywhere, then make it the active one, and drop the old one only once no open
workflow (or blob within retention) still uses it.

The codec runs before external storage, so both history and the blob store hold ciphertext only. Files that
tools attach (`ctx.add_file`) are sealed with the same keys (`seal_file` / `open_file`, AES-GCM bound to the
object's key) and named by an HMAC of their content under a key derived from the active key, never by a
plain hash anyone could compute from a guessed file.
Generate a key: `python -c "import os, base64; print(base64.b64encode(os.urandom(32)).decode())"`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12
FILE_MAGIC = b"DAGENT-FILE-1\n"  # sealed file: magic, key id length (1 byte), key id, nonce, ciphertext
FILE_REF_INFO = b"durable-agent file reference v1"


class CodecKeyError(ValueError):
    """A payload needs a key this process does not have, or the key configuration is invalid."""


class AESGCMCodec(PayloadCodec):
    """Encrypts every payload with the active key; decrypts with the key named in its metadata."""

    def __init__(self, keys: Mapping[str, bytes], active_key_id: str) -> None:
        if active_key_id not in keys:
            raise CodecKeyError(f"DAGENT_CODEC_KEY_ID {active_key_id!r} is not one of DAGENT_CODEC_KEYS "
                                f"({', '.join(keys)})")
        # cryptography (7 MiB of a worker's RSS) loads only in a process configured with codec keys
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._ref_keys = {key_id: HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=FILE_REF_INFO
                                       ).derive(key) for key_id, key in keys.items()}
        self.active_key_id = active_key_id

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    def encode_one(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        key_id = self.active_key_id.encode()
        sealed = self._ciphers[self.active_key_id].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id}, data=nonce + sealed)

    def decode_one(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written without the codec (before it was switched on): readable as is
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode()
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CodecKeyError(f"payload encrypted with key id {key_id!r}, which is not in DAGENT_CODEC_KEYS "
                                f"of this process (it has: {', '.join(self._ciphers)})")
        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], key_id.encode())
        except Exception as exc:
            raise CodecKeyError(f"payload with key id {key_id!r} does not decrypt (wrong key material "
                                f"for that id, or a corrupted payload): {type(exc).__name__}") from None
        decoded = Payload()
        decoded.ParseFromString(plain)
        return decoded

    # --- files (the blob store's `files/` objects) ------------------------------------------------------

    def file_digest(self, content: bytes) -> tuple[str, str]:
        """(active key id, HMAC-SHA256 of `content` under a key derived from it): the same file gets the same
        name under one key (so a retried write is one object), and nobody without the key can name it."""
        digest = hmac.new(self._ref_keys[self.active_key_id], content, hashlib.sha256).hexdigest()
        return self.active_key_id, digest

    def seal_file(self, content: bytes, object_key: str) -> bytes:
        """`content` encrypted with the active key, bound to `object_key` (a copy under another key won't open)."""
        key_id = self.active_key_id.encode()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.active_key_id].encrypt(nonce, content, key_id + b"\0" + object_key.encode())
        return FILE_MAGIC + bytes([len(key_id)]) + key_id + nonce + sealed

    def open_file(self, blob: bytes, object_key: str) -> bytes:
        """The content of a sealed file read from `object_key`; a `CodecKeyError` names the key id, never a key."""
        if not blob.startswith(FILE_MAGIC) or len(blob) < len(FILE_MAGIC) + 1:
            raise CodecKeyError(f"file {object_key} is not a sealed file")
        start = len(FILE_MAGIC) + 1
        key_id = blob[start:start + blob[start - 1]]
        body = blob[start + len(key_id):]
        name = key_id.decode(errors="replace")
        cipher = self._ciphers.get(name)
        if cipher is None:
            raise CodecKeyError(f"file {object_key} is encrypted with key id {name!r}, which is not in "
                                f"DAGENT_CODEC_KEYS of this process (it has: {', '.join(self._ciphers)})")
        try:
            return cipher.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], key_id + b"\0" + object_key.encode())
        except Exception:
            raise CodecKeyError(f"file {object_key} does not decrypt with key id {name!r} (wrong key "
                                "material for that id, a corrupted file, or one moved from another key)") from None

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encode_one(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decode_one(p) for p in payloads]


def parse_keys(spec: str) -> dict[str, bytes]:
    """`id:base64,id:base64` -> {id: 32 bytes}; a bad entry is a one-line `CodecKeyError` (no key material)."""
    keys: dict[str, bytes] = {}
    for number, entry in enumerate((e.strip() for e in spec.split(",")), start=1):
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not key_id:
            raise CodecKeyError(f"DAGENT_CODEC_KEYS entry {number} must be key-id:<base64 key>")
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CodecKeyError(f"DAGENT_CODEC_KEYS key {key_id!r} is not valid base64") from None
        if len(key) != 32:
            raise CodecKeyError(f"DAGENT_CODEC_KEYS key {key_id!r} must be 32 bytes (AES-256), not {len(key)}")
        if key_id in keys:
            raise CodecKeyError(f"DAGENT_CODEC_KEYS lists key id {key_id!r} twice")
        keys[key_id] = key
    return keys


def codec_for(spec: str, key_id: str | None = None) -> AESGCMCodec | None:
    """The codec for a `DAGENT_CODEC_KEYS` value (encrypting with `key_id`, by default the first listed),
    or None when it names no key (payloads stay plain JSON)."""
    keys = parse_keys(spec)
    return AESGCMCodec(keys, (key_id or "").strip() or next(iter(keys))) if keys else None


def codec_from_env(env: Mapping[str, str]) -> AESGCMCodec | None:
    return codec_for(env.get("DAGENT_CODEC_KEYS", ""), env.get("DAGENT_CODEC_KEY_ID"))
