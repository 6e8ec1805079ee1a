"""A conversation's history chain in the blob store: the activity that appends to it, and reading one link."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from durable_agent.activities.heartbeats import payload_codec
from durable_agent.activities.runtime import RuntimeActivities
from durable_agent.agent.context import FileStore
from durable_agent.workflows.names import STORE_HISTORY_ACTIVITY
from durable_agent.workflows.protocol import HistoryLink, HistoryRef, StoreHistoryRequest


class HistoryActivity(RuntimeActivities):
    """`dagent.store_history`."""

    @activity.defn(name=STORE_HISTORY_ACTIVITY)
    async def store_history(self, request: StoreHistoryRequest) -> HistoryRef:
        """Append prompt records to a conversation's history chain in the store (content-addressed: a retry
        writes the same object, or with payload encryption on a second one whose random nonce differs, which
        nothing references); the link stays cached on this worker."""
        info = activity.info()
        link = HistoryLink(parent=request.parent, records=request.records)
        payload = Payload(metadata={"encoding": b"json/plain"}, data=link.model_dump_json().encode())
        if (codec := payload_codec()) is not None:  # encrypted like every payload: the store holds no plaintext
            payload = (await codec.encode([payload]))[0]
        store = self.runtime.file_store.scoped(info.workflow_namespace, info.workflow_id or "unscoped")
        ref = await asyncio.to_thread(store.put, "history-link.pb", payload.SerializeToString(),
                                      "application/x-protobuf")
        self.transcripts.history.add(ref, link)
        return HistoryRef(ref=ref, count=(request.parent.count if request.parent else 0) + len(request.records))


async def read_history_link(store: FileStore, ref: str, codec: PayloadCodec | None) -> HistoryLink:
    """One link of a conversation's stored history (a Temporal payload, encrypted when the worker has a codec)."""
    payload = Payload.FromString(await asyncio.to_thread(store.get, ref))
    if codec is not None:
        payload = (await codec.decode([payload]))[0]
    return HistoryLink.model_validate_json(payload.data)

