"""Request and response bodies of the HTTP API (validated before anything reaches Temporal)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SerializerFunctionWrapHandler, model_serializer

from durable_agent.agent.ids import CALLER_ID_PATTERN
from durable_agent.agent.models import Conversation, ModelTier, Prompt, PromptState
from durable_agent.agent.strict import StrictModel
from durable_agent.client._client import PromptSummary
from durable_agent.workflows.protocol import MAX_INPUT_CHARS, PendingApproval

ID_PATTERN = rf"^{CALLER_ID_PATTERN}$"  # pydantic's (Rust) `$` is the end of the text; in Python use re.fullmatch
CALL_PATH_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}(/[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}){0,15}$"
Identifier = Annotated[str, Field(pattern=ID_PATTERN)]


class StartPrompt(StrictModel):
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    model: ModelTier = "normal"
    instructions: str | None = Field(default=None, max_length=MAX_INPUT_CHARS)
    max_rounds: int | None = Field(default=None, ge=1, le=10_000)
    prompt_id: Identifier | None = Field(default=None, description=(
        "Refused (422): the API assigns prompt ids, so nobody can take another user's."))
    priority: int | None = Field(default=None, ge=1, le=5, description=(
        "Temporal task priority, 1 (first) to 5 (last); default 3. Fairness is per caller."))


class StartConversation(StrictModel):
    conversation_id: Identifier | None = Field(default=None, description=(
        "Attach to (or start) the caller's conversation with this id; omit for a server-assigned one. Ids "
        "beginning with `dagent-` or `temporal-sys` are refused (422): the system's own workflows live there."))
    model: ModelTier = "normal"
    instructions: str | None = Field(default=None, max_length=MAX_INPUT_CHARS)


class SendMessage(StrictModel):
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)


class Approve(StrictModel):
    input: dict[str, JsonValue] | None = Field(default=None, description=(
        "Corrected arguments, a JSON merge patch (RFC 7396): fields given replace the model's, null removes one."))


class Reject(StrictModel):
    reason: str | None = Field(default=None, max_length=2000)


class Steer(StrictModel):
    message: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)


class Links(BaseModel):
    """Where to read more: the record itself, its live events, its Temporal UI page and its chat page."""

    self: str = Field(description="The prompt's record (GET).")
    events: str | None = Field(default=None, description="Its live events as server-sent events (GET).")
    temporal_ui: str | None = Field(default=None, description="Its workflow in the Temporal Web UI, when known.")
    chat: str | None = Field(default=None, description="Its conversation's chat page, for a conversation's prompt.")


class PromptLink(BaseModel):
    """A prompt just started (or queued in its conversation): its id and where to follow it."""

    id: str
    conversation_id: str | None = None
    links: Links


class PromptRecord(BaseModel):
    prompt: Prompt
    links: Links


class ConversationRecord(BaseModel):
    conversation: Conversation
    links: Links


class PromptListItem(PromptSummary):
    """A prompt as `GET /prompts` lists it: the client's summary (flat) and its links."""

    state: PromptState | str | None
    links: Links


class ApprovalContext(BaseModel):
    """What an approver needs to judge a call besides the call itself."""

    prompt_input: str | None = Field(default=None, description="The text of the prompt the call belongs to.")
    model_message: str | None = Field(default=None, description=(
        "What the model said in the response that asked for the call (None when it said nothing)."))
    batch: list[str] = Field(default_factory=list, description=(
        "Every call of that response that needs a decision, in record order (this one included)."))
    position: int = Field(default=0, description="Where the call is in its prompt's output (record order).")


# The view's fields that only the workflow reads (the API decides with a token when one is needed).
API_HIDDEN = frozenset({"type", "required", "expires_after", "notify", "decision_key", "run_id", "plugin"})


def _without_hidden(schema: dict[str, Any]) -> None:
    """The item's JSON schema (OpenAPI) without the fields its JSON never carries."""
    for name in API_HIDDEN:
        schema.get("properties", {}).pop(name, None)


class PendingApprovalItem(PendingApproval):
    """A waiting call as the HTTP API lists it: the prompt's own view of the call (`PendingApproval`, its fields
    flat in the JSON, `prompt_id` the prompt it is decided on), plus whether the caller may decide it, its
    context and links. The view's fields for the workflow alone stay off the JSON (`API_HIDDEN`)."""

    model_config = ConfigDict(json_schema_extra=_without_hidden)

    can_decide: bool = Field(description="Whether the caller may approve or reject this call.")
    context: ApprovalContext | None = Field(default=None, description=(
        "The prompt's text, the model's message and the batch; None when the prompt did not answer in time."))
    links: Links

    @model_serializer(mode="wrap")
    def _api_fields(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # Unannotated on purpose: the OpenAPI schema stays the model's own.
        data = {key: value for key, value in handler(self).items() if key not in API_HIDDEN}
        data["four_eyes"] = bool(self.four_eyes)  # listed even when False: the prompt's own user may only reject
        return data

    @classmethod
    def of(cls, call: PendingApproval, *, can_decide: bool, links: Links,
           context: ApprovalContext | None = None) -> PendingApprovalItem:
        return cls.model_construct(**dict(call), can_decide=can_decide, links=links, context=context)


class Me(BaseModel):
    id: str
    roles: list[str]
    is_approver: bool
    is_admin: bool
