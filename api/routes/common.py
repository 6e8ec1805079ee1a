"""What the routers share: the caller, the service, path parameter types and a prompt's links."""

from __future__ import annotations

from importlib import resources
from typing import Annotated, cast

from fastapi import Depends, Path, Request

from durable_agent.api.auth import Principal, current_principal
from durable_agent.api.config import ApiConfig
from durable_agent.api.schemas import CALL_PATH_PATTERN, ID_PATTERN, Links
from durable_agent.api.service import AgentService

Caller = Annotated[Principal, Depends(current_principal)]
PathId = Annotated[str, Path(pattern=ID_PATTERN)]
# A call of this prompt, or a sub-agent's addressed through it: `<call>/<its call>` (the `/` sent as %2F or as is).
CallPath = Annotated[str, Path(pattern=CALL_PATH_PATTERN)]
STATIC = resources.files("durable_agent.api") / "static"


def _service(request: Request) -> AgentService:
    return cast(AgentService, request.app.state.service)


def _config(request: Request) -> ApiConfig:
    return cast(ApiConfig, request.app.state.config)


Service = Annotated[AgentService, Depends(_service)]
Config = Annotated[ApiConfig, Depends(_config)]


def links(service: AgentService, prompt_id: str, conversation_id: str | None = None) -> Links:
    settings = service.agent.settings
    return Links(self=f"/prompts/{prompt_id}", events=f"/prompts/{prompt_id}/events",
                 temporal_ui=settings.workflow_url(prompt_id) if settings.ui_url else None,
                 chat=f"/chat#conversation={conversation_id}" if conversation_id else None)
