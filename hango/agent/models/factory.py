"""Build a model from an agent's ``model`` configuration and the process settings."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from hango.agent.models.base import Model, install_hint
from hango.agent.models.retry import RetryingModel
from hango.agent.models.scripted import ScriptedModel
from hango.kernel.config import Settings

PROVIDERS = ("scripted", "anthropic", "openai")
# The module each real provider's SDK is imported as; it comes with the hango extra named like the provider.
SDK_MODULES = {"anthropic": "anthropic", "openai": "openai"}


def missing_sdk(provider: str) -> str | None:
    """Why this process cannot build ``provider``'s models — its SDK is not installed — or None when it can.

    The SDK is looked up, not imported: importing one takes seconds, and an agent's save must not spend them (nor
    hold an API worker's other requests) the first time each process meets the provider. An SDK that is installed
    but broken is found here and fails the run at its first model call instead, naming the extra.
    """
    module = SDK_MODULES.get(provider)
    if module is None:
        return None
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    return install_hint(provider) if found is None else None


def build_model(config: Mapping[str, Any], settings: Settings, scope: str, *, id_prefix: str = "") -> Model:
    """The model an agent (or subagent) configured; real providers are wrapped with retries.

    Base URLs and API keys come from settings, never from agent configuration: a tenant must not be able to
    point the server's credentials at a host of its choosing.
    """
    provider = config["provider"]
    if provider == "scripted":
        return ScriptedModel(list(config.get("script") or []), scope, id_prefix)
    if provider not in PROVIDERS:
        raise ValueError(f"unknown model provider {provider!r}")
    inner = _sdk_model(provider)(
        config["name"],
        api_key=getattr(settings, f"{provider}_api_key"),
        base_url=getattr(settings, f"{provider}_base_url"),
        max_tokens=int(config.get("max_tokens") or 4096),
        timeout=settings.model_timeout.total_seconds(),
    )
    return RetryingModel(
        inner,
        attempts=settings.model_retry_attempts,
        base_delay=settings.model_retry_base_delay.total_seconds(),
        max_delay=settings.model_retry_max_delay.total_seconds(),
    )


def _sdk_model(provider: str) -> Callable[..., Model]:
    # Imported on demand: each SDK is an optional extra.
    if provider == "anthropic":
        from hango.agent.models.anthropic import AnthropicModel

        return AnthropicModel
    from hango.agent.models.openai import OpenAIModel

    return OpenAIModel
