"""Model providers: the neutral chat format and the configured provider factory.

Built-in kinds (``openai``, ``anthropic``, ``command``) are registered under the
``vikingbot.providers`` entry-point group like any plugin; SDKs are imported
only when a provider makes its first call.
"""

from vikingbot.providers.base import (
    BaseProvider,
    ChatMessage,
    ChatRequest,
    Provider,
    ProviderResponse,
    ToolCall,
)
from vikingbot.providers.factory import NO_PROVIDER, create_provider

__all__ = [
    "NO_PROVIDER",
    "BaseProvider",
    "ChatMessage",
    "ChatRequest",
    "Provider",
    "ProviderResponse",
    "ToolCall",
    "create_provider",
]
