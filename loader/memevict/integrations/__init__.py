"""Adapters that put memevict under the agent frameworks people run.

Each lives in its own module and imports its framework only there, so importing
memevict never imports a framework; install one with its extra:

- :mod:`memevict.integrations.openai_agents` (``memevict[openai-agents]``): a Session.
- :mod:`memevict.integrations.langchain` (``memevict[langchain]``): agent middleware.
- :mod:`memevict.integrations.pydantic_ai` (``memevict[pydantic-ai]``): a history processor.

What they share is :mod:`memevict.integrations._conversation`.
"""
