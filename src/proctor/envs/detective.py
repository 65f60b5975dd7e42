"""Detective, the text adventure of ArCHer's experiments (Zhou et al., 2024), in Jericho's Z-machine emulator.

Needs `pip install 'proctor[jericho]'` and the game file: `game_path`, else $PROCTOR_DATA/archer/detective.z5,
else ../shared/data/archer/detective.z5 relative to the working directory.

ArCHer's construction of the env (its `AdventureEnv`): the observation is the output of `look`, then of
`inventory` (both read without spending a move: the emulator state is saved and restored), then the game's
reply to the action, then `str(valid actions)`; the reward is the game's score increment (raw points: ten a
clue, 360 in all; the 10 points the opening scene gives are not a reward); 50 steps. `won` when the score
reaches the game's maximum (the walkthrough's 50th move); `info["score"]` = score / maximum.

Valid actions are Jericho's (template actions over the interactive objects, kept when they change the world
state), with the objects taken from Jericho's object tree only: Jericho's own `get_valid_actions` also reads
nouns off the look/inventory text with spaCy's `en_core_web_sm` model, a download that offline machines do not
have. The filtering costs ~0.5 s a state, so lists are cached per process by Jericho's world-state hash.

One game: the task id "detective" in every split. The seed is the emulator's random seed. Expert: the game's
walkthrough (`get_walkthrough()`), its next move while the actions so far follow it.
"""

from __future__ import annotations

import importlib
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import jericho

# not `from jericho import util`: jericho's `from ctypes import *` can shadow that attribute with ctypes.util
jutil = importlib.import_module("jericho.util")

from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv
from proctor.envs.gold_path import next_on_path

TASK_ID = "detective"
TASK_TEXT = "Play the text adventure Detective: solve the mayor's murder and score as many points as you can."
GAME_FILE = Path("archer") / "detective.z5"
_VALID_CACHE_SIZE = 100_000
#: (game file, world-state hash) -> valid actions
_VALID_CACHE: OrderedDict[tuple[str, str], list[str]] = OrderedDict()


def default_game_path() -> Path:
    """$PROCTOR_DATA/archer/detective.z5 when PROCTOR_DATA is set, else ../shared/data/archer/detective.z5."""
    if os.environ.get("PROCTOR_DATA"):
        return Path(os.environ["PROCTOR_DATA"]) / GAME_FILE
    return Path.cwd().parent / "shared" / "data" / GAME_FILE


def archer_observation(look: str, inventory: str, reply: str, valid: list[str]) -> str:
    """ArCHer's observation text: look + inventory + the reply to the last action + str(valid actions)."""
    return look + inventory + reply + str(valid)


def interactive_objects(game: jericho.FrotzEnv) -> dict[str, list[tuple[str, str, str]]]:
    """Jericho's interactive objects (its `_identify_interactive_objects` with `use_object_tree=True`) without
    the spaCy text pass: the names of the objects around the player in the object tree (multi-word names also
    give their words), kept when the game's dictionary knows them and `examine <name>` is understood; grouped
    by the examine text (one group per object), plus Jericho's wildcard 'all'."""
    state = game.get_state()
    words = {w.word for w in game.get_dictionary()}
    width = max(len(w) for w in words)
    objs: set[tuple[str, str, str]] = set()
    location = game.get_player_location()
    if location is not None:
        around = jutil.get_subtree(location.child, game.get_world_objects())
        player = game.get_player_object()
        for obj in (o for o in around if o != player):
            objs.add((obj.name, "PROPN", "OBJTREE"))
            *adjectives, noun = obj.name.split()
            objs.update((w, "ADJ", "OBJTREE") for w in adjectives)
            if adjectives:
                objs.add((noun, "NOUN", "OBJTREE"))
    objs = {o for o in objs if len(o[0].split()) > 1 or o[0][:width] in words}
    by_text: dict[str, list[tuple[str, str, str]]] = {}
    for obj in sorted(objs):
        game.set_state(state)
        text = jutil.clean(game.step("examine " + obj[0])[0])
        if jutil.recognized(text):
            by_text.setdefault(text, []).append(obj)
    game.set_state(state)
    by_text["all"] = [("all", "NOUN", "LOC")]
    return by_text


def valid_actions(game: jericho.FrotzEnv, key: str) -> list[str]:
    """Jericho's valid-action generation over `interactive_objects` (one action per distinct world change,
    its most usual verb), sorted; cached under (`key`, world-state hash)."""
    cache_key = (key, game.get_world_state_hash())
    if cache_key in _VALID_CACHE:
        _VALID_CACHE.move_to_end(cache_key)
        return list(_VALID_CACHE[cache_key])
    names = game._score_object_names(interactive_objects(game))
    candidates = game.act_gen.generate_actions(names)
    by_diff = game._filter_candidate_actions(candidates, use_ctypes=True, use_parallel=False)
    actions = sorted({max(acts, key=jutil.verb_usage_count) for acts in by_diff.values()})
    _VALID_CACHE[cache_key] = actions
    if len(_VALID_CACHE) > _VALID_CACHE_SIZE:
        _VALID_CACHE.popitem(last=False)
    return list(actions)


class DetectiveEnv(TextEnv):
    """ArCHer's Detective: look + inventory + reply + valid actions observed, score increments rewarded."""

    name: ClassVar[str] = "detective"
    copyable: ClassVar[bool] = False  # the emulator is C state behind ctypes: clone() replays

    def __init__(self, game_path: str | os.PathLike | None = None, max_steps: int = 50,
                 expert_hints: bool = False):
        path = Path(game_path) if game_path is not None else default_game_path()
        if not path.is_file():
            raise FileNotFoundError(f"detective: game file {path} not found; pass game_path=... or set "
                                    f"PROCTOR_DATA (the folder that holds {GAME_FILE})")
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, game_path=str(path.resolve()))
        self.game_path = path.resolve()
        self.game = jericho.FrotzEnv(str(self.game_path))
        self.max_score = self.game.get_max_score()
        self.walkthrough = self.game.get_walkthrough()
        self._score: int | None = None
        self._valid: list[str] = []

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"detective: unknown split {split!r}; known: {SPLITS}")
        return [TASK_ID]

    def _observe(self, reply: str) -> str:
        state = self.game.get_state()
        look = self.game.step("look")[0]
        self.game.set_state(state)
        inventory = self.game.step("inventory")[0]
        self.game.set_state(state)
        self._valid = valid_actions(self.game, str(self.game_path))
        return archer_observation(look, inventory, reply, self._valid)

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        if task_id != TASK_ID:
            raise ValueError(f"detective: unknown task id {task_id!r}; the only task is {TASK_ID!r}")
        if seed < 0:
            raise ValueError(f"detective: seed must be >= 0 (Jericho takes a negative seed from the clock), "
                             f"got {seed}")
        self.game.seed(seed)
        reply, info = self.game.reset()
        self._score = info["score"]
        return self._observe(reply), {"task": TASK_TEXT, "score": self._score / self.max_score,
                                      "raw_score": self._score}

    def _step(self, action: str) -> StepOutcome:
        if self._score is None:
            raise EnvError("detective: step() before reset()")
        command = action.split("\n")[0].strip()
        reply, reward, over, info = self.game.step(command)
        self._score = info["score"]
        won = self._score >= self.max_score
        return StepOutcome(self._observe(reply), float(reward), terminated=bool(over or won), won=won,
                           valid=jutil.recognized(jutil.clean(reply)),
                           info={"score": self._score / self.max_score, "raw_score": self._score})

    def admissible_actions(self) -> list[str]:
        return list(self._valid)

    def expert_action(self) -> str | None:
        """The walkthrough's next move while the actions so far follow it, else None."""
        return next_on_path(self.walkthrough, self.actions) if self.expert_hints else None

    def close(self) -> None:
        self.game.close()
