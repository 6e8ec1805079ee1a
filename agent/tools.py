"""Tools: an id, a description, a pydantic input model, an async function, and how it may be run."""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from durable_agent.agent.context import ToolContext
from durable_agent.agent.errors import ToolInputError
from durable_agent.agent.models import ApprovalRequest
from durable_agent.agent.strict import StrictModel

InputT = TypeVar("InputT", bound=BaseModel)
FailureMode = Literal["continue", "fail"]


# A tool's approval policy answers with the call's approval request (agent/models.py), under the name tools use.
Approval = ApprovalRequest


class ToolOptions(StrictModel):
    """How a tool's calls are run: the one shape of a tool's options and their one set of defaults (`tool()`,
    `Tool`, an MCP server's tools, and the planned call the workflow runs)."""

    model_config = ConfigDict(frozen=True)

    timeout: timedelta = Field(default=timedelta(seconds=60), description="One attempt's time limit.")
    max_attempts: int = Field(default=1, ge=1, description="Attempts of a call that raises (ToolFailed: none).")
    failure_mode: FailureMode = Field(default="continue", description=(
        "`continue`: the model reads the error; `fail`: the prompt fails."))
    local: bool | None = Field(default=None, description=(
        "True: a local activity; False: a regular one; None: the worker decides per call (activities/fast_tools.py)."))
    heartbeat_timeout: timedelta = Field(default=timedelta(seconds=20), description=(
        "A regular call's worker is taken for dead after this long without a heartbeat."))
    sequential: bool = Field(default=False, description="Runs alone, never side by side with other calls.")


DEFAULT_OPTIONS = ToolOptions()


@functools.cache
def _json_schema_of(model: type[BaseModel]) -> str:
    """A model's JSON schema as JSON text, built once per process: every model round lists its tools' schemas,
    and building one costs milliseconds of CPU (parsing the text is a fresh copy, much cheaper than a deep copy)."""
    return json.dumps(model.model_json_schema())


ApprovalPolicy = Approval | Callable[[Any], Approval | bool | None]
ToolFunction = Callable[[InputT, ToolContext], Awaitable[JsonValue | BaseModel]]


@dataclass(frozen=True, init=False)
class Tool(Generic[InputT]):
    """A tool the model can call. `id` may contain dots (`payment.send`).

    How its calls run is `options` (a `ToolOptions`: timeout, attempts, failure mode, local, heartbeat timeout,
    sequential). They may also be given one by one as keywords (`Tool(..., timeout=timedelta(seconds=5))`), which
    apply on top of `options`; each is readable as an attribute too (`tool.timeout`)."""

    id: str
    description: str
    input_model: type[InputT]
    fn: ToolFunction[InputT]
    approval: ApprovalPolicy | None = None
    options: ToolOptions = DEFAULT_OPTIONS
    metadata: dict[str, Any] = field(default_factory=dict)
    input_schema: dict[str, JsonValue] | None = None  # a JSON Schema instead of `input_model` (MCP tools)

    def __init__(self, id: str, description: str, input_model: type[InputT], fn: ToolFunction[InputT],
                 approval: ApprovalPolicy | None = None, *, options: ToolOptions | None = None,
                 metadata: dict[str, Any] | None = None, input_schema: dict[str, JsonValue] | None = None,
                 **option_fields: Any) -> None:
        unknown = sorted(set(option_fields) - set(ToolOptions.model_fields))
        if unknown:
            raise TypeError(f"Tool() got unexpected keyword arguments: {', '.join(unknown)}")
        base = options or DEFAULT_OPTIONS
        if option_fields:
            base = ToolOptions.model_validate({**dict(base), **option_fields})
        for name, value in (("id", id), ("description", description), ("input_model", input_model), ("fn", fn),
                            ("approval", approval), ("options", base), ("metadata", dict(metadata or {})),
                            ("input_schema", input_schema)):
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        """`tool.timeout` and the other options, read from `options` (code of ours reads `tool.options.x`)."""
        if name in ToolOptions.model_fields:
            return getattr(self.options, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def parameters_schema(self) -> dict[str, JsonValue]:
        if self.input_schema is not None:
            return self.input_schema
        return json.loads(_json_schema_of(self.input_model))  # a copy: providers may adapt theirs

    def validate_input(self, raw: JsonValue) -> InputT:
        """Validate the model's arguments; raises `ToolInputError` with a message the model can act on."""
        if self.input_schema is not None:
            check_json_schema(self.id, self.input_schema, raw if raw is not None else {})
        try:
            return self.input_model.model_validate(raw if raw is not None else {})
        except ValidationError as exc:
            raise ToolInputError(format_validation_error(self.id, exc)) from exc

    def approval_for(self, args: InputT) -> Approval | None:
        """Evaluate the approval policy for validated arguments; None when no approval is needed."""
        policy = self.approval
        if policy is None:
            return None
        decided = policy if isinstance(policy, Approval) else policy(args)
        if decided is None or decided is False:
            return None
        if decided is True:
            return Approval()
        return decided if decided.required else None


class ToolFailed(Exception):
    """Raise from a tool to give the model this error as the call's result, without retrying."""


class JsonArguments(BaseModel):
    """The input model of a tool described by a JSON Schema: any object, checked against the schema."""

    model_config = ConfigDict(extra="allow")


def check_json_schema(tool_id: str, schema: dict[str, JsonValue], raw: JsonValue) -> None:
    """Raise `ToolInputError` listing every way `raw` breaks `schema`. (In an activity: jsonschema loads on the
    first call of a tool described by a JSON schema.)"""
    import jsonschema

    validator_type = jsonschema.validators.validator_for(schema)
    try:
        validator_type.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ToolInputError(f"Tool '{tool_id}' has an invalid input schema: {exc.message}") from exc
    errors = sorted(validator_type(schema).iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
                             for e in errors)
        raise ToolInputError(f"Invalid arguments for tool '{tool_id}': {problems}")


def format_validation_error(tool_id: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )
    return f"Invalid arguments for tool '{tool_id}': {problems}"


def _input_model_of(fn: Callable[..., Any]) -> type[BaseModel]:
    hints = typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters)
    if not params or not isinstance(hints.get(params[0]), type) or not issubclass(hints[params[0]], BaseModel):
        raise TypeError(f"{fn.__qualname__}: the first parameter must be annotated with a pydantic model")
    return hints[params[0]]


def tool(
    id: str,
    *,
    description: str | None = None,
    approval: ApprovalPolicy | None = None,
    timeout: timedelta = DEFAULT_OPTIONS.timeout,
    max_attempts: int = DEFAULT_OPTIONS.max_attempts,
    failure_mode: FailureMode = DEFAULT_OPTIONS.failure_mode,
    local: bool | None = DEFAULT_OPTIONS.local,
    heartbeat_timeout: timedelta = DEFAULT_OPTIONS.heartbeat_timeout,
    sequential: bool = DEFAULT_OPTIONS.sequential,
) -> Callable[[ToolFunction[Any]], Tool[Any]]:
    """Decorate `async def fn(args: MyInput, ctx: ToolContext)` to make a `Tool`.

    The input model comes from the first parameter's annotation; the description defaults to the
    function's docstring. `local=True` runs the tool as a Temporal *local* activity, in the worker that
    runs the prompt: much cheaper per call, for fast tools (well under the workflow task timeout, no
    heartbeats); `local=False` always as a regular activity. Left unset, a worker runs a call without
    approval locally once it has seen the tool's last calls finish fast without reporting progress
    (activities/fast_tools.py, README "Fast tools").
    A regular tool heartbeats while it runs; if its worker dies, the call is retried elsewhere after
    `heartbeat_timeout` rather than after the whole `timeout`.
    Calls of one model response run side by side; `sequential=True` makes this tool's calls run alone.
    """

    def wrap(fn: ToolFunction[Any]) -> Tool[Any]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {id!r}: the function must be async")
        doc = description or inspect.getdoc(fn)
        if not doc:
            raise TypeError(f"tool {id!r}: give a description or a docstring")
        return Tool(
            id=id,
            description=doc,
            input_model=_input_model_of(fn),
            fn=fn,
            approval=approval,
            timeout=timeout,
            max_attempts=max_attempts,
            failure_mode=failure_mode,
            local=local,
            heartbeat_timeout=heartbeat_timeout,
            sequential=sequential,
        )

    return wrap
