"""Every handler of our workflows takes its payload raw (`workflows/inputs.py`, `raw_payloads`): Temporal sees
one `RawValue` argument, so a payload of any shape reaches our decoding, which refuses it with a reason instead
of the SDK dropping or failing it. Handlers built by a function (the decision updates, the delegated signals,
the versioned subclasses' `run`) must keep that: a first parameter Temporal does not recognise as `self` would
count as a second argument, and one payload would then be decoded without its type."""

from __future__ import annotations

import pytest
from temporalio.common import RawValue
from temporalio.workflow import _Definition

from durable_agent.workflows import WORKFLOWS
from durable_agent.workflows.versioning.deployment import VERSIONED

CLASSES = [*WORKFLOWS, *VERSIONED.values()]


def _handlers(definition: _Definition) -> dict[str, list[type] | None]:
    named: dict[str, list[type] | None] = {"run": definition.arg_types}
    for kind, handlers in (("signal", definition.signals), ("query", definition.queries),
                           ("update", definition.updates)):
        for name, handler in handlers.items():
            if name is not None:  # the dynamic handlers take (name, payloads) by design
                named[f"{kind} {name}"] = handler.arg_types
    return named


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_every_handler_takes_one_raw_payload(cls: type) -> None:
    handlers = _handlers(_Definition.must_from_class(cls))
    assert len(handlers) > 1
    assert {name: types for name, types in handlers.items() if types != [RawValue]} == {}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_every_update_is_checked_before_it_is_accepted(cls: type) -> None:
    updates = _Definition.must_from_class(cls).updates
    assert {name for name, update in updates.items() if update.validator is None} == set()
