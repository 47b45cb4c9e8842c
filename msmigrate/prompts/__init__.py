"""Prompt templates (Jinja, StrictUndefined): ``render(name, **vars)`` and ``render_system(**vars)``."""

from msmigrate.prompts.render import (FORMAT_ERROR_VARS, NODE_NAMES, NODE_VARS, SYSTEM_VARS, PromptVariableError,
                                      estimate_tokens, render, render_system)

__all__ = ["FORMAT_ERROR_VARS", "NODE_NAMES", "NODE_VARS", "SYSTEM_VARS", "PromptVariableError", "estimate_tokens",
           "render", "render_system"]
