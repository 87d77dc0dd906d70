"""The OpenAI-compatible API on the gateway (``/v1``) and the client tokens of the
ecosystem's doors (docs/openai-api.md)."""
