"""The default text a tiny model's tokenizer is trained on: episodes of the built-in environments (the
privileged oracle expert, and a uniformly random policy over admissible actions), rendered with the prompt
renderer in every output format, so the tokenizer knows proctor's prompts, observations and actions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from proctor.episode import WorkItem, play
from proctor.prompts.render import prefix_at
from proctor.prompts.turns import Candidate, Prefix

CORPUS_VERSION = 1
DEFAULT_ENVS: tuple[str, ...] = ("household", "twenty_questions", "arithmetic")

Policy = Callable[[Prefix], "Candidate | None"]


def _oracle(prefix: Prefix) -> Candidate | None:
    action = prefix.info.get("expert_action")
    return Candidate(action) if action else None


def _random(rng: random.Random) -> Policy:
    def policy(prefix: Prefix) -> Candidate | None:
        admissible = prefix.admissible_actions
        return Candidate(rng.choice(admissible)) if admissible else None

    return policy


def run_episode(env: Any, task_id: str, seed: int, policy: Policy) -> Prefix:
    """Play one episode (`proctor.episode.play`); returns its final `Prefix` (full history)."""
    traj = play(env, WorkItem(task_id, 0, seed), policy)
    return prefix_at(traj, len(traj.steps))


def episode_texts(prefix: Any) -> Iterator[str]:
    """The text of one episode: its rendering in every output format, and each step's admissible list."""
    from proctor.prompts.formats import FORMATS
    from proctor.prompts.render import PromptConfig, render_messages

    for fmt in FORMATS:
        yield "\n".join(m["content"] for m in render_messages(prefix, PromptConfig(format=fmt)))
    for step in prefix.history:
        if step.info.get("admissible_actions"):
            yield "\n".join(step.info["admissible_actions"])


def default_corpus(envs: Sequence[str] = DEFAULT_ENVS, tasks_per_env: int = 40, seed: int = 0) -> list[str]:
    """Texts of oracle and random episodes on the first `tasks_per_env` train tasks of each env."""
    from proctor.envs import make

    rng = random.Random(seed)
    texts: list[str] = []
    for name in envs:
        env = make(name, expert_hints=True)
        try:
            for task_id in env.task_ids("train")[:tasks_per_env]:
                for policy in (_oracle, _random(rng)):
                    texts.extend(episode_texts(run_episode(env, task_id, seed, policy)))
        finally:
            env.close()
    if not texts:
        raise RuntimeError(f"the environments {list(envs)} produced no text for the tokenizer corpus")
    return texts
