"""proctor inside the RL engines people already use: its environments, prompts and PRMs as the pieces those
engines plug in (docs/integrations.md).

- `proctor.integrations.trl`: an `environment_factory` for TRL's `GRPOTrainer` (any proctor env as one `act` tool,
  its reward the env's outcome, optionally shaped by a proctor PRM).
- `proctor.integrations.chat_templates`: a ChatML template that renders tool calls, for tokenizers (proctor's tiny
  models, SmolLM2) whose own template drops them.

Importing this package imports no model library and no engine; each submodule imports its engine when used.
"""
