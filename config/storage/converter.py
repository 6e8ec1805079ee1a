"""The data converter every client and worker uses: pydantic JSON, optionally encrypted, with large payloads
kept out of history in the blob store (config/storage/).

Payloads above a threshold (a whole prompt record, a conversation's history, a big tool output) are stored
by Temporal's external storage, and history holds only a small reference. Every client and worker must
use the same store (the same directory, or the same S3/GCS bucket) and the same codec keys.

On a client that already has a data converter (a team's codec, failure converter, external storage),
`compose_data_converter` builds ours as a function of it and keeps what the team configured:

- the payload converter: Temporal's default becomes its pydantic converter (pydantic JSON); a pydantic
  converter (or a subclass) is kept; any other is refused with one line (our records are pydantic models);
- the payload codec: the team's is kept. With DAGENT_CODEC_KEYS set too, both run: ours inside, the team's
  outside (encoding runs ours first, then the team's; decoding the reverse), so every payload that leaves the
  process, a blob-store reference included, is in the team's encoding;
- the failure converter and every other field: kept;
- external storage: the team's, when it has one; ours (the blob store) only where none is configured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)

from durable_agent.config.storage.drivers import payload_driver
from durable_agent.config.storage.objects import ObjectClient
from durable_agent.config.storage.stores import objects_for

DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024


class IncompatiblePayloadConverter(ValueError):
    """The client's payload converter is not one Durable Agent's records can go through (one line)."""


class CodecChain(PayloadCodec, WithSerializationContext):
    """Two codecs as one: `inner` (Durable Agent's, DAGENT_CODEC_KEYS) next to the payload, `outer` (the team's)
    on the wire. Encoding runs inner then outer; decoding runs outer then inner."""

    def __init__(self, inner: PayloadCodec, outer: PayloadCodec) -> None:
        self.inner = inner
        self.outer = outer

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.outer.encode(await self.inner.encode(payloads))

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.inner.decode(await self.outer.decode(payloads))

    def with_context(self, context: SerializationContext) -> CodecChain:
        inner, outer = (codec.with_context(context) if isinstance(codec, WithSerializationContext) else codec
                        for codec in (self.inner, self.outer))
        if inner is self.inner and outer is self.outer:
            return self
        return CodecChain(inner, outer)


def payload_converter_class(existing: type) -> type:
    """Temporal's pydantic converter in place of its default one; a pydantic converter (the SDK's or a subclass
    of the team's) is kept; anything else is refused."""
    if existing is DefaultPayloadConverter:
        return PydanticPayloadConverter
    if issubclass(existing, PydanticPayloadConverter):
        return existing
    raise IncompatiblePayloadConverter(
        f"DurableAgentPlugin cannot use this client's payload converter {existing.__module__}."
        f"{existing.__qualname__}: it needs Temporal's DefaultPayloadConverter or "
        "temporalio.contrib.pydantic.PydanticPayloadConverter (or a subclass of it), since its records are "
        "pydantic models")


def _is_ours(codec: PayloadCodec | None, ours: PayloadCodec) -> bool:
    return codec is ours or isinstance(codec, CodecChain) or type(codec) is type(ours)


def compose_data_converter(existing: DataConverter | None, store: ObjectClient | str | Path, *,
                           threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
                           codec: PayloadCodec | None = None) -> DataConverter:
    """Durable Agent's data converter as a function of `existing` (a client's or replayer's): see the module
    docstring for what is kept. Applied to its own result it changes nothing, so a client rebuilt from another
    client's config (both carrying the plugin) is not encoded twice."""
    existing = existing or DataConverter.default
    payload_codec = existing.payload_codec
    if codec is not None and not _is_ours(payload_codec, codec):
        payload_codec = codec if payload_codec is None else CodecChain(codec, payload_codec)
    storage = existing.external_storage
    if storage is None:
        objects = store if isinstance(store, ObjectClient) else objects_for("", store)
        storage = ExternalStorage(drivers=[payload_driver(objects)],
                                  payload_size_threshold=threshold)
    return dataclasses.replace(existing, payload_converter_class=payload_converter_class(
        existing.payload_converter_class), payload_codec=payload_codec, external_storage=storage)


def data_converter(store: ObjectClient | str | Path, *, threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
                   codec: PayloadCodec | None = None) -> DataConverter:
    """pydantic JSON, the `codec` (encryption) if any, then external storage of payloads of `threshold`
    bytes or more in `store` (an object client, or a local directory path)."""
    return compose_data_converter(None, store, threshold=threshold, codec=codec)
