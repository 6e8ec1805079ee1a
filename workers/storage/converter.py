"""The data converter every client and worker uses: pydantic JSON, optionally encrypted, with large payloads
kept out of history in the blob store (workers/storage/).

Payloads above a threshold (a whole prompt record, a conversation's history, a big tool output) are stored
by Temporal's external storage, and history holds only a small reference. Every client and worker must
use the same store (the same directory, or the same S3/GCS bucket) and the same codec keys.
"""

from __future__ import annotations

from pathlib import Path

from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
    PayloadCodec,
)

from durable_agent.workers.storage.drivers import MeteredStorageDriver, payload_driver
from durable_agent.workers.storage.objects import ObjectClient
from durable_agent.workers.storage.stores import objects_for

DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024


_JSON = PydanticJSONPlainPayloadConverter()
_CONVERTERS = tuple(_JSON if isinstance(c, JSONPlainPayloadConverter) else c
                    for c in DefaultPayloadConverter.default_encoding_payload_converters)
_BY_ENCODING = CompositePayloadConverter(*_CONVERTERS).converters


class PayloadConverter(CompositePayloadConverter):
    """Temporal's pydantic payload converter, all of whose instances share one JSON converter and so its cache
    of pydantic type adapters. The SDK builds a new payload converter whenever it binds a store context to
    the data converter (`dataclasses.replace`, about once per payload sequence with external storage on, some
    30 times a prompt): each `PydanticPayloadConverter` would start with an empty cache and build every type
    adapter again, and each composite would map its converters by encoding again (7 of its 15 µs)."""

    def __init__(self) -> None:
        self.converters = _BY_ENCODING  # never mutated: `with_context` gives a new instance its own mapping


def data_converter(store: ObjectClient | str | Path, *, threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
                   codec: PayloadCodec | None = None) -> DataConverter:
    """pydantic JSON, the `codec` (encryption) if any, then external storage of payloads of `threshold`
    bytes or more in `store` (an object client, or a local directory path)."""
    objects = store if isinstance(store, ObjectClient) else objects_for("", store)
    storage = ExternalStorage(drivers=[MeteredStorageDriver(payload_driver(objects))], payload_size_threshold=threshold)
    return DataConverter(payload_converter_class=PayloadConverter, external_storage=storage, payload_codec=codec)
