"""The neutral vocabulary of states and prompts, shared by envs (experts), agents, the PRM, search and RL:
`Prefix`/`Candidate` (`turns`), output formats (`formats`) and the one prompt renderer (`render`)."""

from proctor.prompts.formats import FORMATS, OutputFormat
from proctor.prompts.render import (
    PREFIX_INFO_KEYS,
    PromptConfig,
    format_action,
    parse_output,
    prefix_at,
    render_messages,
    render_prompt,
    render_training_text,
)
from proctor.prompts.turns import Candidate, Prefix

__all__ = [
    "FORMATS",
    "PREFIX_INFO_KEYS",
    "Candidate",
    "OutputFormat",
    "Prefix",
    "PromptConfig",
    "format_action",
    "parse_output",
    "prefix_at",
    "render_messages",
    "render_prompt",
    "render_training_text",
]
