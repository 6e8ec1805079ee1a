"""Optional payload encryption: AES-256-GCM, key id in the payload metadata, rotation by key id.

Switched on by `DAGENT_CODEC_KEYS` (comma-separated `key-id:<base64 of 32 random bytes>`), read from the
environment of every client and worker (never from a file in the repo, never logged). New payloads are
encrypted with `DAGENT_CODEC_KEY_ID` (default: the first key listed); any listed key decrypts, so rotating
is: add the new key first everywhere, then make it the active one, and drop the old one only once no open
workflow (or blob within retention) still uses it.

The codec runs before external storage, so both history and the blob store hold ciphertext only.
Generate a key: `python -c "import os, base64; print(base64.b64encode(os.urandom(32)).decode())"`.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12


class CodecKeyError(ValueError):
    """A payload needs a key this process does not have, or the key configuration is invalid."""


class AESGCMCodec(PayloadCodec):
    """Encrypts every payload with the active key; decrypts with the key named in its metadata."""

    def __init__(self, keys: Mapping[str, bytes], active_key_id: str) -> None:
        if active_key_id not in keys:
            raise CodecKeyError(f"DAGENT_CODEC_KEY_ID {active_key_id!r} is not one of DAGENT_CODEC_KEYS "
                                f"({', '.join(keys)})")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
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
    """The codec if `DAGENT_CODEC_KEYS` is set in `env`, else None."""
    return codec_for(env.get("DAGENT_CODEC_KEYS", ""), env.get("DAGENT_CODEC_KEY_ID"))
