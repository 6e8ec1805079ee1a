"""`provider:model` strings -> configured `ModelProvider`s.

Keys and base URLs come only from the `env` mapping passed in, never from `os.environ`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence

from durable_agent.agent.messages import ModelResponse
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.agent.providers.scripted import ScriptedModel
from durable_agent.agent.providers.specs import chain_specs

# The SDK-backed providers are imported where they are built: importing openai and anthropic takes
# seconds, which a worker with only scripted tiers (and its crash-restart time) should not pay.

VALID_FORMS = (
    "openai:<model> (OpenAI Responses API; needs OPENAI_API_KEY, optional OPENAI_BASE_URL)",
    "openai-chat:<model> (Chat Completions; base URL from DAGENT_OPENAI_CHAT_BASE_URL or OPENAI_BASE_URL, "
    "OPENAI_API_KEY optional for local servers)",
    "anthropic:<model> (Anthropic Messages API; needs ANTHROPIC_API_KEY, optional ANTHROPIC_BASE_URL)",
    "azure:<deployment> / azure-chat:<deployment> (Azure OpenAI, Responses / Chat Completions; needs "
    "AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY, OPENAI_API_VERSION)",
    "anthropic-vertex:<model> (Claude on Google Vertex AI; needs CLOUD_ML_REGION, ANTHROPIC_VERTEX_PROJECT_ID, "
    "and Google credentials or ANTHROPIC_VERTEX_ACCESS_TOKEN; optional ANTHROPIC_VERTEX_BASE_URL)",
    "anthropic-bedrock:<model-id> (Claude on Amazon Bedrock; needs AWS_REGION (or AWS_DEFAULT_REGION) and "
    "AWS credentials (AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY [+ AWS_SESSION_TOKEN], AWS_PROFILE or the default "
    "chain; needs boto3) or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK; optional ANTHROPIC_BEDROCK_BASE_URL)",
    "scripted:<module>:<attr> (a ScriptedModel, a list of ModelResponse, or a function of the request)",
    "<spec>,<spec>,... (a fallback chain: the next model answers when one fails)",
)
LOCAL_API_KEY = "not-needed"
# The request-body versions the clouds document (the anthropic SDK's own default has varied across releases).
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def _invalid(spec: str, reason: str) -> ValueError:
    forms = "\n".join(f"  - {form}" for form in VALID_FORMS)
    return ValueError(f"invalid model spec {spec!r}: {reason}. Valid forms:\n{forms}")


def _required(env: Mapping[str, str], var: str, spec: str) -> str:
    value = env.get(var)
    if not value:
        raise _invalid(spec, f"environment variable {var} is not set")
    return value


def _load_scripted(target: str, spec: str) -> ScriptedModel:
    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise _invalid(spec, "expected scripted:<module>:<attr>")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise _invalid(spec, f"cannot load {attr!r} from module {module_name!r} ({exc})") from exc
    if isinstance(value, ScriptedModel):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if all(isinstance(item, ModelResponse) for item in value):
            return ScriptedModel(list(value))
    elif callable(value):
        return ScriptedModel(value)
    raise _invalid(spec, f"{module_name}:{attr} is a {type(value).__name__}, "
                         "not a ScriptedModel, a list of ModelResponse or a function")


def _azure(provider: str, deployment: str, spec: str, env: Mapping[str, str], timeout: float) -> ModelProvider:
    """Azure OpenAI through the openai SDK's own Azure client (api-key header, api-version, deployment URLs)."""
    import openai

    api_key = _required(env, "AZURE_OPENAI_API_KEY", spec)
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=_required(env, "AZURE_OPENAI_ENDPOINT", spec), api_key=api_key,
        api_version=_required(env, "OPENAI_API_VERSION", spec), timeout=timeout, max_retries=0)
    from durable_agent.agent.providers.openai_chat import OpenAIChatProvider
    from durable_agent.agent.providers.openai_responses import OpenAIResponsesProvider

    kind = OpenAIResponsesProvider if provider == "azure" else OpenAIChatProvider
    return kind(model=deployment, api_key=api_key, client=client, name=provider)


def _vertex(model: str, spec: str, env: Mapping[str, str], timeout: float) -> ModelProvider:
    """Claude on Vertex AI through the anthropic SDK's Vertex client (same Messages API, Google auth)."""
    import anthropic

    from durable_agent.agent.providers.anthropic_messages import AnthropicMessagesProvider

    token = env.get("ANTHROPIC_VERTEX_ACCESS_TOKEN") or None
    client = anthropic.AsyncAnthropicVertex(
        region=_required(env, "CLOUD_ML_REGION", spec), project_id=_required(env, "ANTHROPIC_VERTEX_PROJECT_ID", spec),
        access_token=token, base_url=env.get("ANTHROPIC_VERTEX_BASE_URL") or None, timeout=timeout, max_retries=0)
    return AnthropicMessagesProvider(model=model, api_key=token, client=client, name="anthropic-vertex",
                                     endpoint_body={"anthropic_version": VERTEX_ANTHROPIC_VERSION})


def _bedrock(model_id: str, spec: str, env: Mapping[str, str], timeout: float) -> ModelProvider:
    """Claude on Amazon Bedrock through the anthropic SDK's Bedrock client (same Messages API at
    `/model/<id>/invoke[-with-response-stream]`, SigV4-signed by boto3, streamed as AWS event-stream frames).

    A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`) is sent as a bearer token instead of signing. Keys given
    in `env` are passed on; without them boto3's default chain (`AWS_PROFILE`, ~/.aws, SSO, instance roles)
    finds the credentials when the first request is signed.
    """
    import anthropic

    from durable_agent.agent.providers.anthropic_messages import AnthropicMessagesProvider

    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        raise _invalid(spec, "environment variable AWS_REGION (or AWS_DEFAULT_REGION) is not set")
    api_key = env.get("AWS_BEARER_TOKEN_BEDROCK") or None
    access_key, secret_key = env.get("AWS_ACCESS_KEY_ID") or None, env.get("AWS_SECRET_ACCESS_KEY") or None
    credentials: dict[str, str | None] = {}
    if api_key is None:
        if (access_key is None) != (secret_key is None):
            raise _invalid(spec, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY together (or neither)")
        if importlib.util.find_spec("boto3") is None:
            raise _invalid(spec, "signing Bedrock requests needs boto3 (pip install 'durable-agent[bedrock]'), "
                                 "or set AWS_BEARER_TOKEN_BEDROCK")
        credentials = {"aws_access_key": access_key, "aws_secret_key": secret_key,
                       "aws_session_token": (env.get("AWS_SESSION_TOKEN") or None) if access_key else None,
                       "aws_profile": None if access_key else env.get("AWS_PROFILE") or None}
    try:
        client = anthropic.AsyncAnthropicBedrock(
            aws_region=region, api_key=api_key, base_url=env.get("ANTHROPIC_BEDROCK_BASE_URL") or None,
            timeout=timeout, max_retries=0, **credentials)
    except ValueError as exc:  # e.g. both an API key and AWS credentials reached the SDK
        raise _invalid(spec, str(exc)) from exc
    return AnthropicMessagesProvider(model=model_id, api_key=api_key or secret_key, client=client,
                                     name="anthropic-bedrock",
                                     endpoint_body={"anthropic_version": BEDROCK_ANTHROPIC_VERSION})


def resolve_chain(spec: str, env: Mapping[str, str], *, timeout: float = 120.0) -> list[ModelProvider]:
    """A tier's models in fallback order: `openai:gpt-5,anthropic:claude-sonnet-4-5` (one spec: a chain of one)."""
    parts = chain_specs(spec)
    if not all(parts):
        raise _invalid(spec, "a fallback chain is provider:model specs separated by commas, none empty")
    return [resolve_provider(part, env, timeout=timeout) for part in parts]


def resolve_provider(spec: str, env: Mapping[str, str], *, timeout: float = 120.0) -> ModelProvider:
    """Build the provider for `spec` (`provider:model`), reading keys and base URLs only from `env`."""
    provider, sep, model = spec.strip().partition(":")
    if not sep or not model:
        raise _invalid(spec, "expected <provider>:<model>")
    match provider:
        case "openai":
            from durable_agent.agent.providers.openai_responses import OpenAIResponsesProvider

            return OpenAIResponsesProvider(model=model, api_key=_required(env, "OPENAI_API_KEY", spec),
                                           base_url=env.get("OPENAI_BASE_URL") or None, timeout=timeout)
        case "openai-chat":
            base_url = env.get("DAGENT_OPENAI_CHAT_BASE_URL") or env.get("OPENAI_BASE_URL") or None
            api_key = env.get("OPENAI_API_KEY") or None
            if base_url is None and api_key is None:
                raise _invalid(spec, "set DAGENT_OPENAI_CHAT_BASE_URL (or OPENAI_BASE_URL) for a local server, "
                                     "or OPENAI_API_KEY for api.openai.com")
            from durable_agent.agent.providers.openai_chat import OpenAIChatProvider

            return OpenAIChatProvider(model=model, api_key=api_key or LOCAL_API_KEY, base_url=base_url,
                                      timeout=timeout)
        case "anthropic":
            from durable_agent.agent.providers.anthropic_messages import AnthropicMessagesProvider

            return AnthropicMessagesProvider(model=model, api_key=_required(env, "ANTHROPIC_API_KEY", spec),
                                             base_url=env.get("ANTHROPIC_BASE_URL") or None, timeout=timeout)
        case "azure" | "azure-chat":
            return _azure(provider, model, spec, env, timeout)
        case "anthropic-vertex":
            return _vertex(model, spec, env, timeout)
        case "anthropic-bedrock":
            return _bedrock(model, spec, env, timeout)
        case "scripted":
            return _load_scripted(model, spec)
        case _:
            raise _invalid(spec, f"unknown provider {provider!r}")
