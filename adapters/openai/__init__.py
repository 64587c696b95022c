"""The `openai` agent: a coding agent for any OpenAI-Chat-Completions-compatible endpoint.

Its dependencies (httpx, pathspec, mcp) are in the base install; each is imported on first
use, so importing this package, and starting a server with it, does not pay for them.
"""

from adapters.openai.agent import OpenAIAdapter

__all__ = ["OpenAIAdapter"]
