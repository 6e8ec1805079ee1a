"""The error hierarchy of Durable Agent: every error this project raises on purpose is a `DurableAgentError`.

    DurableAgentError
    ├── PromptFailedError      the prompt cannot finish (fails its workflow when raised in workflow code)
    ├── PluginPrepareError     a plugin's prepare raised (the prompt fails, naming the plugin)
    ├── ToolInputError         arguments that do not fit a tool's input model (also a ValueError)
    ├── DecisionRefused        an approve/reject the prompt would not take (client side)
    └── ModelError             a provider failed (agent/providers/base.py)
        ├── RetryableModelError
        └── FatalModelError

Code that handles failures matches these classes (or, across the wire, their names as `ApplicationError`
types, which `workflows/names.py` keeps stable), never the text of a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from durable_agent.agent.models import Prompt


class DurableAgentError(Exception):
    """The root. Raised in workflow code, any of these fails the workflow (never retries its task forever)."""


class PromptFailedError(DurableAgentError):
    """The prompt cannot finish: a tool that must not fail failed, or the final answer kept missing its schema.
    Raised by `PromptHandle.result(raise_on_failure=True)`, it carries the failed prompt's record (`prompt`)."""

    def __init__(self, message: str, *, prompt: Prompt | None = None) -> None:
        super().__init__(message)
        self.prompt = prompt


class PromptNotStartedError(DurableAgentError, LookupError):
    """The prompt is an input queued in a conversation: it has no workflow (and no record) until the prompts
    before it end. `PromptHandle.result()` and `wait_until()` wait for it; `get()` raises this."""

    def __init__(self, prompt_id: str, conversation_id: str) -> None:
        super().__init__(f"prompt {prompt_id} is queued in conversation {conversation_id}: it starts when the "
                         "prompts before it end")
        self.prompt_id = prompt_id
        self.conversation_id = conversation_id


class PluginPrepareError(DurableAgentError):
    """A plugin's `prepare` raised: the prompt fails with the plugin named in the reason."""


class ToolInputError(DurableAgentError, ValueError):
    """The arguments do not fit the tool's input model."""


RefusalKind = Literal["unknown-prompt", "prompt-finished", "unknown-tool-call", "not-pending", "already-decided",
                      "not-allowed", "invalid-arguments", "invalid-request", "decision-refused"]
REFUSAL_KINDS: frozenset[str] = frozenset(get_args(RefusalKind))


class DecisionRefused(DurableAgentError):
    """An approve/reject the prompt would not take: unknown or decided call, not waiting, not allowed.
    `kind` says which (the HTTP API's problem type of the same name); the message says it to a person."""

    def __init__(self, message: str, kind: RefusalKind = "decision-refused") -> None:
        super().__init__(message)
        self.kind: RefusalKind = kind
