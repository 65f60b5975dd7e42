# my_env.py: a text env of your own, registered under the name "guess" (proctor.envs.TextEnv)
from proctor.envs import StepOutcome, TextEnv, register


@register("guess")
class Guess(TextEnv):
    """Find a number from 1 to 9; a wrong guess is answered "higher" or "lower"."""

    def __init__(self, max_steps: int = 6, **kwargs):
        super().__init__(max_steps=max_steps, **kwargs)

    def task_ids(self, split):
        return [f"{split}-{i}" for i in range(100)]

    def _reset(self, task_id, seed):
        self.secret = (int(task_id.split("-")[1]) + seed) % 9 + 1
        return "I picked a number from 1 to 9.", {"task": "guess the number"}

    def admissible_actions(self):
        return [str(i) for i in range(1, 10)]

    def _step(self, action):
        guess = int(action) if action.strip().isdigit() else 0
        won = guess == self.secret
        obs = "right" if won else "higher" if guess < self.secret else "lower"
        return StepOutcome(obs, float(won), terminated=won, won=won, valid=1 <= guess <= 9)
