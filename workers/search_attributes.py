"""The search attributes our workflows upsert, checked when a worker starts: a namespace without one of them (a
Cloud namespace set up by hand) would fail every prompt's workflow task that upserts it, and the prompt would
wait until someone adds it. The check names every missing one, in one line, before the worker polls."""

from __future__ import annotations

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError

from durable_agent.agent.logging import get_logger
from durable_agent.workflows.search_attributes import SEARCH_ATTRIBUTE_TYPES

__all__ = ["MissingSearchAttributes", "check_search_attributes", "required_search_attributes"]

log = get_logger(__name__)
_SETTLED: set[tuple[str, str]] = set()  # (server, namespace) found complete or not checkable: once per process


class MissingSearchAttributes(RuntimeError):
    """The namespace lacks search attributes our workflows upsert (one line naming them and the fix)."""


def required_search_attributes() -> dict[str, str]:
    """Name -> Temporal type (`Keyword`, ...) of every search attribute our workflows upsert."""
    return dict(SEARCH_ATTRIBUTE_TYPES)


async def check_search_attributes(client: Client) -> None:
    """Raise `MissingSearchAttributes` when the client's namespace lacks any of ours. A server that cannot list
    them (the time-skipping test server; an API key without the permission) is not checked: a warning says so."""
    where = (client.service_client.config.target_host, client.namespace)
    if where in _SETTLED:
        return
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace), retry=True)
    except RPCError as exc:
        log.warning("search attributes not checked", namespace=client.namespace, error=exc.message.splitlines()[0]
                    if exc.message else str(exc.status))
        _SETTLED.add(where)
        return
    present = {*listed.custom_attributes, *listed.system_attributes}
    missing = {name: kind for name, kind in required_search_attributes().items() if name not in present}
    if missing:
        commands = "; ".join(f"temporal operator search-attribute create --namespace {client.namespace} "
                             f"--name {name} --type {kind}" for name, kind in missing.items())
        raise MissingSearchAttributes(f"namespace {client.namespace} lacks the search attribute"
                                      f"{'s' if len(missing) > 1 else ''} {', '.join(missing)} that Durable "
                                      f"Agent's workflows set: {commands}")
    _SETTLED.add(where)
