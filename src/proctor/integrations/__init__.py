"""proctor inside the RL engines people already use: its environments, prompts and PRMs as the pieces those
engines plug in (docs/integrations.md).

- `proctor.integrations.trl`: an `environment_factory` for TRL's `GRPOTrainer` (any proctor env as one `act` tool,
  its reward the env's outcome, optionally shaped by a proctor PRM).
- `proctor.integrations.chat_templates`: a ChatML template that renders tool calls, for tokenizers (proctor's tiny
  models, SmolLM2) whose own template drops them.
- `proctor.integrations.rewards`: `prm_reward_func`, any proctor PRM as a TRL reward function (stepwise text or env
  trajectories, its step scores aggregated by min, last or mean).
- `proctor.integrations.openenv`: any proctor env as an OpenEnv environment server (`proctor serve-env`), its step
  reward the env's or a PRM's score of the step, `ProctorEnvClient`, and `with_api_key` (OpenEnv's own clients,
  such as `GenericEnvClient`, sending a server's API key).
- `proctor.integrations.common`: what they share (an episode driven by another engine's calls, built as the rollout
  engine builds it; a PRM opened once and shared).

Importing this package imports no model library and no engine; each submodule imports its engine when used.
"""
