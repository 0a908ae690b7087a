"""Build a model from an agent's ``model`` configuration and the process settings."""

from __future__ import annotations

from typing import Any

from hango.agent.models.base import Model
from hango.agent.models.retry import RetryingModel
from hango.agent.models.scripted import ScriptedModel
from hango.config import Settings

PROVIDERS = ("scripted", "anthropic", "openai")


def build_model(config: dict[str, Any], settings: Settings, scope: str, *, id_prefix: str = "") -> Model:
    """The model an agent (or subagent) configured; real providers are wrapped with retries.

    Base URLs and API keys come from settings, never from agent configuration: a tenant must not be able to
    point the server's credentials at a host of its choosing.
    """
    provider = config["provider"]
    if provider == "scripted":
        return ScriptedModel(list(config.get("script") or []), scope, id_prefix)
    timeout = settings.model_timeout.total_seconds()
    max_tokens = int(config.get("max_tokens") or 4096)
    inner: Model
    if provider == "anthropic":
        from hango.agent.models.anthropic import AnthropicModel

        inner = AnthropicModel(
            config["name"],
            api_key=settings.anthropic_api_key,
            base_url=settings.anthropic_base_url,
            max_tokens=max_tokens,
            timeout=timeout,
        )
    elif provider == "openai":
        from hango.agent.models.openai import OpenAIModel

        inner = OpenAIModel(
            config["name"],
            api_key=settings.openai_api_key,
            base_url=settings.openai_base_url,
            max_tokens=max_tokens,
            timeout=timeout,
        )
    else:
        raise ValueError(f"unknown model provider {provider!r}")
    return RetryingModel(
        inner,
        attempts=settings.model_retry_attempts,
        base_delay=settings.model_retry_base_delay.total_seconds(),
        max_delay=settings.model_retry_max_delay.total_seconds(),
    )
