"""The data converter every client and worker uses: pydantic JSON, optionally encrypted, with large payloads
kept out of history in the blob store (workers/blobstore.py).

Payloads above a threshold (a whole prompt record, a conversation's history, a big tool output) are stored
by Temporal's external storage, and history holds only a small reference. Every client and worker must
use the same store (the same directory, or the same S3/GCS bucket) and the same codec keys.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage, PayloadCodec

from workers.blobstore import ObjectClient, objects_for, payload_driver

DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024


def data_converter(store: ObjectClient | str | Path, *, threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
                   codec: PayloadCodec | None = None) -> DataConverter:
    """pydantic JSON, the `codec` (encryption) if any, then external storage of payloads of `threshold`
    bytes or more in `store` (an object client, or a local directory path)."""
    objects = store if isinstance(store, ObjectClient) else objects_for("", store)
    storage = ExternalStorage(drivers=[payload_driver(objects)], payload_size_threshold=threshold)
    return dataclasses.replace(pydantic_data_converter, external_storage=storage, payload_codec=codec)
