"""The trainer registry: one entry per `proctor train METHOD CONFIG`, each a typed config and the library
function that takes it (TRL's config-per-trainer). Entries are imported lazily, so listing them loads no model
library.

    entry = TRAINERS["dpo"]
    Config, train = entry.load()
    result = train(Config.model_validate(yaml_dict))
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proctor.registry import Registry


@dataclass(frozen=True)
class TrainerEntry:
    """A trainer: its one-line summary, `module:Config` and `module:function`, and (for trainers that return a
    folder) the metrics file written into the config's `output_dir`."""

    summary: str
    config: str
    train: str
    metrics_file: str | None = None

    def load(self) -> tuple[type, Callable[[Any], Any]]:
        def attr(ref: str) -> Any:
            module, name = ref.split(":")
            return getattr(importlib.import_module(module), name)

        return attr(self.config), attr(self.train)


#: the trainers by method name, in the order `proctor train --help` lists them
TRAINERS = Registry[TrainerEntry]("training method", {
    "sft": TrainerEntry("supervised fine-tuning on demonstrations (the agent's tokens)",
                        "proctor.rl.sft:SFTConfig", "proctor.rl.sft:train_sft", "sft.json"),
    "dpo": TrainerEntry("online DPO against a PRM (AgentPRM stage 3)",
                        "proctor.rl.online_dpo:OnlineDPOConfig", "proctor.rl.online_dpo:train_online_dpo"),
    "bon-distill": TrainerEntry("best-of-N distillation: a choice policy towards best-of-N(policy, PRM)",
                                "proctor.rl.bon_distill:BonDistillConfig", "proctor.rl.bon_distill:train_bon_distill",
                                "metrics.json"),
    "grpo": TrainerEntry("GRPO / GiGPO over multi-turn trajectories with PPO clipping",
                         "proctor.rl.grpo:GRPOConfig", "proctor.rl.grpo:train_grpo"),
    "ppo": TrainerEntry("PPO with step-level rewards (env, PRM or SPA progress), a critic, token-level GAE",
                        "proctor.rl.ppo:PPOConfig", "proctor.rl.ppo:train_ppo"),
    "archer": TrainerEntry("ArCHer: an utterance-level TD critic and a token-level policy gradient",
                           "proctor.rl.archer:ArCHerConfig", "proctor.rl.archer:train_archer"),
    "chai": TrainerEntry("online CHAI: the frozen LM acts by the best of K samples under ArCHer's critic",
                         "proctor.rl.chai:CHAIConfig", "proctor.rl.chai:train_chai"),
    "fbc": TrainerEntry("online filtered BC: SFT on each iteration's best trajectories",
                        "proctor.rl.filtered_bc:FilteredBCConfig", "proctor.rl.filtered_bc:train_filtered_bc"),
})


def trainer(method: str) -> TrainerEntry:
    return TRAINERS[method]
