"""Our custom search attributes on an already running server: the dev server, a real cluster or the
time-skipping test server."""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.cli.devserver.arguments import SEARCH_ATTRIBUTES

_INDEXED_VALUE_TYPES: dict[str, IndexedValueType.ValueType] = {
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


async def register_search_attributes(
    client: Client,
    namespace: str = "default",
    attributes: Mapping[str, str] = SEARCH_ATTRIBUTES,
) -> None:
    """Register our custom search attributes on ``namespace`` when missing (``ValueError``: one exists with another
    type). The time-skipping test server cannot list them: there each is added on its own, ``ALREADY_EXISTS`` is
    success."""
    wanted = {name: _INDEXED_VALUE_TYPES[kind] for name, kind in attributes.items()}
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace), retry=True
        )
    except RPCError as err:
        if err.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        for name, value_type in wanted.items():  # time-skipping test server
            await _add_search_attributes(client, namespace, {name: value_type})
        return

    existing = {**listed.system_attributes, **listed.custom_attributes}
    conflicts = {
        name: IndexedValueType.Name(existing[name])
        for name, value_type in wanted.items()
        if name in existing and existing[name] != value_type
    }
    if conflicts:
        raise ValueError(
            f"search attributes already registered on namespace {namespace!r} with another type: "
            f"{conflicts} (wanted {dict(attributes)})"
        )
    missing = {name: value_type for name, value_type in wanted.items() if name not in existing}
    if missing:
        await _add_search_attributes(client, namespace, missing)


async def _add_search_attributes(
    client: Client, namespace: str, attributes: Mapping[str, IndexedValueType.ValueType]
) -> None:
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=dict(attributes)), retry=True
        )
    except RPCError as err:
        # A concurrent registration (or, on the test server, a re-registration) got there first.
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise

