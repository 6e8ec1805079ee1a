"""Every name that crosses the wire: the public contract between workflows, activities, clients and tools.

Recorded histories and running workflows store these strings, not Python names, so each one is stable
forever once deployed: renaming one breaks replay of prompts that are running or waiting right now. Use
these constants everywhere (workflow decorators, activity definitions, the client, the CLI, tests); any
Temporal SDK or the `temporal` CLI reaches the same workflows by these names.
"""

from __future__ import annotations

from typing import Final

from temporalio.common import SearchAttributeKey

# --- workflow types -----------------------------------------------------------------------------------
PROMPT_WORKFLOW: Final = "PromptWorkflow"
CONVERSATION_WORKFLOW: Final = "ConversationWorkflow"
BUDGET_LEDGER_WORKFLOW: Final = "BudgetLedgerWorkflow"  # one per budget principal (workflows/budget/ledger.py)

# --- PromptWorkflow handlers --------------------------------------------------------------------------
STEER_SIGNAL: Final = "steer"
APPROVE_SIGNAL: Final = "approve"
REJECT_SIGNAL: Final = "reject"
CHILD_APPROVALS_SIGNAL: Final = "child_approvals"  # a sub-agent's prompt reports its pending calls to its parent
APPROVE_CALL_UPDATE: Final = "approve_call"
REJECT_CALL_UPDATE: Final = "reject_call"
GET_PROMPT_QUERY: Final = "get_prompt"
PENDING_APPROVALS_QUERY: Final = "pending_approvals"
TRANSCRIPT_QUERY: Final = "transcript"

# --- ConversationWorkflow handlers --------------------------------------------------------------------
SEND_SIGNAL: Final = "send"
CLOSE_SIGNAL: Final = "close"
SEND_INPUT_UPDATE: Final = "send_input"
GET_CONVERSATION_QUERY: Final = "get_conversation"

# --- BudgetLedgerWorkflow handlers -------------------------------------------------------------------
CONFIGURE_BUDGET_UPDATE: Final = "configure_budget"
RESERVE_BUDGET_UPDATE: Final = "reserve_budget"
SETTLE_BUDGET_UPDATE: Final = "settle_budget"
BUDGET_STATE_QUERY: Final = "budget_state"

# --- activities ---------------------------------------------------------------------------------------
MODEL_ROUND_ACTIVITY: Final = "dagent.model_round"
INVOKE_TOOL_ACTIVITY: Final = "dagent.invoke_tool"
# A round's only call, then the next model round, in one activity (when: workflows/prompt/tool_then_model.py).
TOOL_THEN_MODEL_ACTIVITY: Final = "dagent.tool_then_model"
EMIT_EVENT_ACTIVITY: Final = "dagent.emit_event"
CHECK_CORRECTION_ACTIVITY: Final = "dagent.check_correction"  # an approval policy run again on corrected args
STORE_HISTORY_ACTIVITY: Final = "dagent.store_history"  # a conversation's local activity: prompt records -> blobs
BUDGET_RESERVE_ACTIVITY: Final = "dagent.budget_reserve"  # before a model round of a prompt under period budgets
BUDGET_SETTLE_ACTIVITY: Final = "dagent.budget_settle"  # after it: the round's actual spend
NOTIFY_ACTIVITY: Final = "dagent.notify"  # one step's message about a waiting call on one channel

# --- workflow stream topics (temporalio.contrib.workflow_streams) -------------------------------------
EVENTS_TOPIC: Final = "events"  # a prompt's live events, published by the workflow
DELTAS_TOPIC: Final = "deltas"  # model text as it streams: read from the model activity's heartbeat details
PROGRESS_TOPIC: Final = "progress"  # tool progress: not a stream topic, read from the tool's heartbeat details

# --- search attributes (registered by cli/devserver/search_attributes.py and deploy/temporal-setup.sh) ---------------
PROMPT_STATE: Final = SearchAttributeKey.for_keyword("PromptState")
USER_ID: Final = SearchAttributeKey.for_keyword("UserId")
CONVERSATION_ID: Final = SearchAttributeKey.for_keyword("ConversationId")
PARENT_PROMPT_ID: Final = SearchAttributeKey.for_keyword("ParentPromptId")  # set on a sub-agent's prompt
SEARCH_ATTRIBUTE_KEYS: Final = (PROMPT_STATE, USER_ID, CONVERSATION_ID, PARENT_PROMPT_ID)

# --- ApplicationError types (retry lists and failure handling match on these) -------------------------
INVALID_INPUT_ERROR: Final = "InvalidInput"  # a workflow input that does not decode
PROMPT_FAILED_ERROR: Final = "PromptFailed"  # a failed prompt failing its workflow
FATAL_MODEL_ERROR: Final = "FatalModelError"  # the provider refused for good (bad key, bad request)
RETRYABLE_MODEL_ERROR: Final = "RetryableModelError"  # rate limits, overload, network
PLUGIN_PREPARE_ERROR: Final = "PluginPrepareError"  # a plugin's prepare hook raised
INVALID_OUTPUT_SCHEMA_ERROR: Final = "InvalidOutputSchema"  # the prompt's output_schema is not usable
TOOL_RAISED_ERROR: Final = "ToolRaised"  # a tool raised (retried up to the tool's attempts)
TOOL_TIMED_OUT_ERROR: Final = "ToolTimedOut"  # a tool run with the next model round outlived its own timeout (retried)
TRANSCRIPT_MISSING_ERROR: Final = "TranscriptMissing"  # the worker lacks part of the round's input: send it whole
HISTORY_MISSING_ERROR: Final = "HistoryMissing"  # a conversation's stored history link is gone from the store
MCP_UNAVAILABLE_ERROR: Final = "MCPUnavailable"  # an MCP server cannot be reached (retried like a crash)
DECISION_REFUSED_ERROR: Final = "DecisionRefused"  # an approve/reject update the prompt refused; detail 0: its kind
MODEL_FALLBACK_ERROR: Final = "ModelFallback"  # the model round failed; details: [next chain position, its spec]
BUDGET_MEMO: Final = "dagent_budget"  # a ledger's limit as JSON, for listings without a worker (client/budgets.py)
