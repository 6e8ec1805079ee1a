"""MCP servers a plugin declares as tool sources: how to reach them and how their tools may be run.

Declarations only (no I/O, no MCP SDK): the worker's activities list the tools and call them through the
MCP SDK's client (activities/mcp_tools.py). A server's tools become ordinary tools with the id `<name>.<tool>`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from durable_agent.agent.tools import DEFAULT_OPTIONS, Approval, ApprovalPolicy, FailureMode, ToolOptions

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")


@dataclass(frozen=True)
class MCPServer:
    """One MCP server: stdio (`command` + `args` + `env`) or streamable HTTP (`url` + headers).

    Secrets never live here: `env_from` and `headers_from_env` name variables of the *worker's*
    environment, read when the worker connects (`{"Authorization": "GITHUB_AUTH"}` sends the header
    `Authorization` with the value of `$GITHUB_AUTH`).

    `approval` applies to every tool of the server; `approval_by_tool` maps tool-name patterns
    (fnmatch, e.g. `"delete_*"`) to a policy (an `Approval`, or a function of the arguments dict),
    and the first matching pattern wins over `approval`.

    `resources` (URIs) and `prompts` (names of prompts without required arguments) are read with the
    tool listing (at most once per `list_ttl`) and added as context items to every model call.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    env_from: tuple[str, ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers_from_env: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None  # only these tool names (None: every tool the server lists)
    approval: ApprovalPolicy | None = None
    approval_by_tool: Mapping[str, ApprovalPolicy] = field(default_factory=dict)
    timeout: timedelta = DEFAULT_OPTIONS.timeout  # its tools' options (agent/tools.py ToolOptions)
    max_attempts: int = DEFAULT_OPTIONS.max_attempts
    failure_mode: FailureMode = DEFAULT_OPTIONS.failure_mode
    heartbeat_timeout: timedelta = DEFAULT_OPTIONS.heartbeat_timeout
    sequential: bool = DEFAULT_OPTIONS.sequential
    connect_timeout: timedelta = timedelta(seconds=20)
    list_ttl: timedelta = timedelta(minutes=5)
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"MCP server name {self.name!r} must match {_NAME.pattern}")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of `command` (stdio) or `url` (HTTP)")

    @property
    def tool_options(self) -> ToolOptions:
        """The options each of its tools runs with (`local` stays unset: the worker decides per call)."""
        return ToolOptions(timeout=self.timeout, max_attempts=self.max_attempts, failure_mode=self.failure_mode,
                           heartbeat_timeout=self.heartbeat_timeout, sequential=self.sequential)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def tool_id(self, tool_name: str) -> str:
        return f"{self.name}.{tool_name}"

    def offers(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools

    def policy_for(self, tool_name: str) -> ApprovalPolicy | None:
        for pattern, policy in self.approval_by_tool.items():
            if fnmatch.fnmatchcase(tool_name, pattern):
                return policy
        return self.approval

    def cache_key(self) -> tuple[Any, ...]:
        return (self.name, self.command, self.args, tuple(sorted(self.env.items())), self.env_from, self.url,
                tuple(sorted(self.headers_from_env.items())))


__all__ = ["Approval", "MCPServer"]
