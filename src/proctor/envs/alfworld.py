"""ALFWorld (Shridhar et al., 2021) text games through TextWorld, with ALFWorld's handcoded expert.

Needs `pip install 'proctor[alfworld]'` and ALFWorld's game files (`json_2.1.1/`): pass `data_dir`, or set
ALFWORLD_DATA (its `json_2.1.1` is used), else `../shared/data/alfworld/json_2.1.1` relative to the working
directory. Splits: train = `train/`, valid = `valid_seen/`, test = `valid_unseen/` (the 134-game eval split).
The shared json_2.1.1 release writes its grammar into each game ("put X in/on Y"); alfworld>=0.4's
handcoded expert speaks the packaged grammar ("move X to Y"), so by default (`grammar="alfworld"`) a game
is played with the installed package's grammar and the game's own task text (`grammar="game"` keeps the
file's); the re-grammared game is built in memory (no temporary files). alfworld 0.4.2's handcoded expert
updates its inventory only on commands that contain "put", while that grammar places objects with
"move X to Y": proctor tells the expert "put X in/on Y" for such a command (`expert_command`), without which
the expert believes it still holds what it put down (and loses most `pick_two_obj_and_place` games).
A task id is a game folder relative to `data_dir` ("valid_unseen/<task type>-.../trial_..."); its task
type is the folder name's prefix (six types). The episode is determined by the game: the seed is unused.
A fixed panel of games is a list of such ids (`tasks: [...]` or `panel: FILE` in a `proctor run` config;
`examples/alfworld/panels/`).

Reproducibility. The `alfworld` extra pins alfworld==0.4.2 (its grammar and handcoded expert; textworld comes
with it). `packages` names alfworld and textworld, so every trajectory store and pipeline manifest of an
ALFWorld run records their installed versions (`proctor.envs.versions`). The step limit is 50 by default, as
in AgentPRM and verl-agent: an episode not won by then ends `truncated`.

What proctor does to ALFWorld's text, exactly:
- the first observation: TextWorld's banner "-= Welcome to TextWorld, ALFRED! =-" and the whitespace around
  the rest are cut (`split_observation`; the ReAct prompts for ALFWorld drop it the same way);
  the room description and "Your task is to: ..." are kept as they are, and the text after that marker is
  also reported as `info["task"]`;
- later observations: TextWorld's feedback with the whitespace at its ends stripped ("Nothing happens." for a
  command the game does not take, which the step reports as invalid, `valid=False`);
- admissible commands: TextWorld's `admissible_commands` list as it is (order and text), from the installed
  package's grammar (see above; `grammar="game"` keeps the game file's); proctor adds, removes and rewrites
  none. `expert_command` rewrites a command only for what the handcoded expert hears, never for the game;
- object names: ALFWorld's own `AlfredDemangler` (unshuffled), as ALFWorld's text env uses.
Nothing else is added at the env. What a model reads is the prompt `proctor.prompts` renders around that text
(the task, a window of recent steps, an optional "Earlier actions: ..." memory line, the admissible commands
when `show_admissible`); the env's strings appear in it unchanged.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
from pathlib import Path
from typing import Any, ClassVar

from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place",
)
SPLIT_DIRS: dict[str, str] = {"train": "train", "valid": "valid_seen", "test": "valid_unseen"}
GAME_FILE = "game.tw-pddl"
INVALID_FEEDBACK = "Nothing happens."
GRAMMARS: tuple[str, ...] = ("alfworld", "game")
_TASK_RULE = re.compile(r'"rhs": "Your task is to: (.*?)"')
_MOVE = re.compile(r"move (.+?) to (.+)")


def with_package_grammar(game: dict[str, Any], package_grammar: str) -> dict[str, Any]:
    """The game with `package_grammar` (ALFWorld's alfred.twl2) and the game's own task text in it."""
    m = _TASK_RULE.search(game["grammar"])
    if m is None:
        raise EnvError("alfworld: the game's grammar has no 'Your task is to: ...' rule")
    task = m.group(1).removesuffix(".")
    return {**game, "grammar": package_grammar.replace("UNKNOWN GOAL", task)}


def expert_command(command: str) -> str:
    """The command as alfworld 0.4.2's handcoded expert must hear it: "move X to Y" -> "put X in/on Y".

    `HandCodedAgent.update_state_tracking` (alfworld/agents/expert/handcoded_expert.py) pops its inventory
    only when the last command contains "put"; the packaged grammar emits "move X to Y" for the same act.
    """
    m = _MOVE.fullmatch(command.strip())
    return f"put {m.group(1)} in/on {m.group(2)}" if m else command


@functools.cache
def _expert_wrapper() -> type:
    """ALFWorld's `AlfredExpert` wrapper, told `expert_command(...)` of each command, reading the
    traj_data.json beside the original game file (the game itself is loaded from memory)."""
    from alfworld.agents.environment.alfred_tw_env import AlfredExpert

    class PutAwareExpert(AlfredExpert):
        source_game: str = ""

        def load(self, data: Any) -> None:
            super().load(data)
            self.gamefile = self.source_game  # the expert reads dirname(gamefile)/traj_data.json

        def _gather_infos(self) -> None:
            self.prev_command = expert_command(self.prev_command)
            super()._gather_infos()

    return PutAwareExpert


@functools.cache
def _package_grammar() -> str:
    import alfworld

    return (Path(alfworld.__file__).parent / "data" / "alfred.twl2").read_text()


def default_data_dir() -> Path:
    """The first that exists of $ALFWORLD_DATA/json_2.1.1 and ../shared/data/alfworld/json_2.1.1 (from cwd).

    (Importing alfworld sets ALFWORLD_DATA to its cache folder when unset, hence a fallback, not a choice.)"""
    candidates = [Path(os.environ["ALFWORLD_DATA"]) / "json_2.1.1"] if os.environ.get("ALFWORLD_DATA") else []
    candidates.append(Path.cwd().parent / "shared" / "data" / "alfworld" / "json_2.1.1")
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        f"alfworld: game files not found at {' or '.join(map(str, candidates))}; pass data_dir=... or set "
        "ALFWORLD_DATA (the folder that holds json_2.1.1/)")


def task_type(task_id: str) -> str:
    """The task type of a game folder ("valid_unseen/pick_two_obj_and_place-..." -> "pick_two_obj_and_place")."""
    folder = Path(task_id).parts[-2] if len(Path(task_id).parts) >= 2 else task_id
    kind = folder.split("-", 1)[0]
    if kind not in TASK_TYPES:
        raise ValueError(f"alfworld: game folder {folder!r} does not start with a task type {TASK_TYPES}")
    return kind


def split_observation(feedback: str) -> tuple[str, str]:
    """(observation without TextWorld's welcome banner, task text after 'Your task is to: ')."""
    text = feedback.split("-= Welcome to TextWorld, ALFRED! =-", 1)[-1].strip()
    marker = "Your task is to: "
    if marker not in text:
        raise EnvError(f"alfworld: the first observation has no {marker!r}: {text[:200]!r}")
    return text, text.split(marker, 1)[1].strip()


class ALFWorldEnv(TextEnv):
    """ALFWorld's household games (TextWorld engine); `won` is success; expert = ALFWorld's handcoded one."""

    name: ClassVar[str] = "alfworld"
    copyable: ClassVar[bool] = False  # a TextWorld game is not deep-copyable: clone() replays
    #: the packages whose versions change the episodes (recorded in every manifest: `proctor.envs.versions`)
    packages: ClassVar[tuple[str, ...]] = ("alfworld", "textworld")

    def __init__(self, data_dir: str | os.PathLike | None = None, max_steps: int = 50, expert_hints: bool = False,
                 grammar: str = "alfworld"):
        if grammar not in GRAMMARS:
            raise ValueError(f"alfworld: grammar must be one of {GRAMMARS}, got {grammar!r}")
        root = Path(data_dir) if data_dir is not None else default_data_dir()
        if not root.is_dir():
            raise FileNotFoundError(f"alfworld: data_dir {root} does not exist (it should hold train/, valid_seen/, "
                                    "valid_unseen/)")
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, data_dir=str(root.resolve()),
                         grammar=grammar)
        self.root = root.resolve()
        self.grammar = grammar
        self._rng_state = random.Random(0).getstate()
        self._game: Any = None
        self._game_id: str | None = None
        self._state: Any = None
        self._ids: dict[str, list[str]] = {}

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLIT_DIRS:
            raise ValueError(f"alfworld: unknown split {split!r}; known: {SPLITS}")
        if split not in self._ids:
            base = self.root / SPLIT_DIRS[split]
            if not base.is_dir():
                raise FileNotFoundError(f"alfworld: split folder {base} is missing")
            self._ids[split] = sorted(str(p.parent.relative_to(self.root)) for p in base.glob(f"*/*/{GAME_FILE}"))
        return list(self._ids[split])

    def _load(self, task_id: str) -> Any:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
        from textworld.envs.pddl import PddlEnv

        path = self.root / task_id / GAME_FILE
        if not path.is_file():
            raise FileNotFoundError(f"alfworld: no {GAME_FILE} for task {task_id!r} (looked at {path})")
        game = json.loads(path.read_text())
        if self.grammar == "alfworld":
            game = with_package_grammar(game, _package_grammar())
        infos = textworld.EnvInfos(won=True, admissible_commands=True)
        env: Any = AlfredDemangler(shuffle=False)(PddlEnv(infos))
        if self.expert_hints:
            infos.extras = ["expert_plan"]
            env = _expert_wrapper()(env, "handcoded")
            env.source_game = str(path)
        env.load(game)  # PddlEnv loads a game from its JSON data as well as from a file
        return env

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        if self._game_id != task_id:
            self.close()
            self._game, self._game_id = self._load(task_id), task_id
        self._rng_state = random.Random(seed).getstate()
        self._state = self._with_own_rng(self._game.reset)
        obs, task = split_observation(self._state["feedback"])
        return obs, {"task": task, "task_type": task_type(task_id)}

    def _step(self, action: str) -> StepOutcome:
        self._state, _, done = self._with_own_rng(self._game.step, action)
        obs = self._state["feedback"].strip()
        won = bool(self._state["won"])
        return StepOutcome(obs, float(won), terminated=bool(done or won), won=won, valid=obs != INVALID_FEEDBACK)

    def _with_own_rng(self, fn: Any, *args: Any) -> Any:
        """Run `fn` with this episode's state of the global `random` (ALFWorld's handcoded expert breaks ties
        with it), so an episode is a function of its seed however many envs share the process."""
        outer = random.getstate()
        random.setstate(self._rng_state)
        try:
            return fn(*args)
        finally:
            self._rng_state = random.getstate()
            random.setstate(outer)

    def admissible_actions(self) -> list[str]:
        return list(self._state["admissible_commands"])

    def expert_action(self) -> str | None:
        """ALFWorld's handcoded expert's next command (`infos["extra.expert_plan"][0]`); needs expert_hints."""
        if not self.expert_hints:
            return None
        plan = self._state.get("extra.expert_plan") or []
        return plan[0] if plan else None

    def close(self) -> None:
        if self._game is not None:
            self._game.close()
        self._game, self._game_id, self._state = None, None, None
