"""The `openai` agent: a coding agent for any OpenAI-Chat-Completions-compatible endpoint.

Needs the `openai` extra (httpx, pathspec); httpx is imported on first use, so importing
this package is cheap and works without it.
"""

from adapters.openai.agent import OpenAIAdapter

__all__ = ["OpenAIAdapter"]
