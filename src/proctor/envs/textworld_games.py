"""TextWorld (Côté et al., 2018) games, generated offline from a seed into a task set; the walkthrough is the expert.

Needs `pip install 'proctor[textworld]'` (textworld >= 1.7 plays Inform 7 `.z8` games; Glulx `.ulx` games need
textworld < 1.7). Two sources of games:

- generated (default): `n_games` per split (an int, or a dict split -> count), each made by TextWorld's
  generator with `world_size` rooms, `nb_objects` objects and a quest of `quest_length` actions. Task ids are
  `textworld/s{seed}/{split}/{i:04d}`. A game is generated and compiled on first use (or by `generate()`,
  with a progress bar) into `games_dir` (default `$XDG_CACHE_HOME/proctor/textworld`), as `.z8` + `.json`,
  and reused after; a file lock lets processes share the cache. Its four generation seeds (map, objects,
  quest, grammar) are 16-bit words of sha256("{seed}/{split}/{i}"): splits are disjoint, deterministic
  functions of `seed`, and game i does not depend on `n_games`.
- your own: `game_files=DIR` holding TextWorld games (`X.z8` beside its `X.json`) in `train/`, `valid/`,
  `test/` sub-folders, or directly in DIR (then they are all `test`). Task ids are `textworld/files/{split}/{X}`.

Observations are the game's text without TextWorld's banner and Inform's prompt/status line; `info["task"]`
is the game's objective. An action is valid when it is one of the admissible commands of the state it was
issued in (other phrasings the parser understands, such as "n", still act on the game but count as invalid).
`reward` is the points the action scored, `info["score"]` = points / max points (in [0, 1]), `won`/`lost` are
the game's. The expert (`expert_action`) is TextWorld's winning policy from the current state: the
walkthrough while the agent is on it; after a detour it is re-planned (a reversible step is undone, e.g.
"go south" after an unneeded "go north"); None once the quest can no longer be completed. The episode seed
seeds the Z-machine's random number generator (`zmachine_seed`; generated games do not use randomness).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import textworld
import textworld.generator
from filelock import FileLock
from rich.progress import track
from textworld.generator.data import KnowledgeBase

from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv

SEED_KEYS: tuple[str, ...] = ("map", "objects", "quest", "grammar")
_PROMPT_LINE = re.compile(r"\n>[^\n]*\Z")  # Inform's prompt, followed by the status line (room, score/moves)
_BANNER_LINE = re.compile(r"[ _|\\/$<>-]*")  # TextWorld's ASCII-art banner (and blank lines)
_END_QUESTION = "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?"


def default_games_dir() -> Path:
    """$XDG_CACHE_HOME/proctor/textworld (XDG_CACHE_HOME defaults to ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "proctor" / "textworld"


def generation_seeds(seed: int, split: str, index: int) -> dict[str, int]:
    """The TextWorld generation seeds of game `index` of `split`: words 0-3 (16 bits each, big-endian) of
    sha256("{seed}/{split}/{index}") as the map, objects, quest and grammar seeds."""
    digest = hashlib.sha256(f"{seed}/{split}/{index}".encode()).digest()
    return {key: int.from_bytes(digest[2 * k: 2 * k + 2], "big") for k, key in enumerate(SEED_KEYS)}


def clean_feedback(text: str) -> str:
    """The game's text without TextWorld's banner, Inform's prompt and status line, the end-of-game question,
    indentation and runs of blank lines."""
    text = _PROMPT_LINE.sub("", text.rstrip()).replace(_END_QUESTION, "")
    lines = [line.strip() for line in text.split("\n")]
    while lines and _BANNER_LINE.fullmatch(lines[0]):
        lines.pop(0)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def request_infos() -> Any:
    """What the adapter asks TextWorld for at every step."""
    return textworld.EnvInfos(admissible_commands=True, policy_commands=True, won=True, lost=True, score=True,
                              max_score=True, objective=True, extras=["walkthrough"])


def zmachine_seed(seed: int) -> int:
    """The Z-machine seed of an episode seed: seed mod (2^31 - 1) + 1, in [1, 2^31 - 1] (jericho reads 0 as
    "seed from the clock")."""
    return seed % (2**31 - 1) + 1


def normalize_command(command: str) -> str:
    return " ".join(command.lower().split())


def game_options(seeds: dict[str, int], world_size: int, nb_objects: int, quest_length: int) -> Any:
    """TextWorld `GameOptions` for one game: explicit seeds and sizes, TextWorld's defaults for the rest."""
    options = textworld.GameOptions()
    options.kb = KnowledgeBase.default()
    options.seeds = dict(seeds)
    options.nb_rooms = world_size
    options.nb_objects = nb_objects
    options.quest_length = quest_length
    return options


def generate_game(path: Path, options: Any) -> Path:
    """Make and compile the game of `options` to `path` (.z8, with its .json beside it) unless it is there.

    Compiles in a temporary folder beside `path` and moves the files in (the .json first), under a file lock,
    so concurrent processes never see a half-written game."""
    if path.is_file() and path.with_suffix(".json").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_suffix(".lock"))):
        if path.is_file() and path.with_suffix(".json").is_file():
            return path
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".generating-") as tmp:
            options.path = str(Path(tmp) / path.name)
            game = textworld.generator.make_game(options)
            compiled = Path(textworld.generator.compile_game(game, options))
            os.replace(compiled.with_suffix(".json"), path.with_suffix(".json"))
            os.replace(compiled, path)
    return path


class TextWorldEnv(TextEnv):
    """TextWorld games generated from a seed (or your own); admissible commands; expert = the walkthrough."""

    name: ClassVar[str] = "textworld"
    copyable: ClassVar[bool] = False  # a Z-machine is not deep-copyable: clone() replays

    def __init__(self, seed: int = 0, n_games: int | dict[str, int] = 20, world_size: int = 3,
                 nb_objects: int = 6, quest_length: int = 3, games_dir: str | os.PathLike | None = None,
                 game_files: str | os.PathLike | None = None, max_steps: int = 50, expert_hints: bool = False):
        counts = n_games if isinstance(n_games, dict) else {s: n_games for s in SPLITS}
        unknown = set(counts) - set(SPLITS)
        if unknown or any(not isinstance(n, int) or n < 0 for n in counts.values()):
            raise ValueError(f"textworld: n_games must be an int >= 0 or a dict over {SPLITS}, got {n_games!r}")
        for key, value in (("world_size", world_size), ("nb_objects", nb_objects), ("quest_length", quest_length)):
            if value < 1:
                raise ValueError(f"textworld: {key} must be >= 1, got {value}")
        if game_files is not None and not Path(game_files).is_dir():
            raise FileNotFoundError(f"textworld: game_files folder {game_files} does not exist")
        super().__init__(
            max_steps=max_steps, expert_hints=expert_hints, seed=seed, n_games=n_games, world_size=world_size,
            nb_objects=nb_objects, quest_length=quest_length,
            games_dir=None if games_dir is None else str(Path(games_dir).resolve()),
            game_files=None if game_files is None else str(Path(game_files).resolve()))
        self.gen_seed = seed
        self.counts = {s: counts.get(s, 0) for s in SPLITS}
        self.world_size, self.nb_objects, self.quest_length = world_size, nb_objects, quest_length
        self.game_files = None if game_files is None else Path(game_files).resolve()
        self.config_dir = ((Path(games_dir) if games_dir is not None else default_games_dir()).resolve()
                           / f"textworld-{textworld.__version__}" / f"w{world_size}-o{nb_objects}-q{quest_length}"
                           / f"s{seed}")
        self._game: Any = None
        self._game_path: Path | None = None
        self._state: Any = None
        self._admissible: list[str] = []

    # -- the task set -----------------------------------------------------------------------------
    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"textworld: unknown split {split!r}; known: {SPLITS}")
        if self.game_files is not None:
            return [f"textworld/files/{split}/{name}" for name in self._own_games(split)]
        return [f"textworld/s{self.gen_seed}/{split}/{i:04d}" for i in range(self.counts[split])]

    def _own_folder(self, split: str) -> Path | None:
        """The folder of `split` in `game_files`: its sub-folder, or (without sub-folders) itself for test."""
        assert self.game_files is not None
        if any((self.game_files / s).is_dir() for s in SPLITS):
            return self.game_files / split
        return self.game_files if split == "test" else None

    def _own_games(self, split: str) -> list[str]:
        folder = self._own_folder(split)
        if folder is None or not folder.is_dir():
            return []
        if glulx := sorted(p.name for p in folder.glob("*.ulx")):
            raise ValueError(f"textworld: {folder} holds Glulx games ({', '.join(glulx[:3])}); textworld "
                             f"{textworld.__version__} plays only .z8 games (Glulx needs textworld < 1.7)")
        games = sorted(folder.glob("*.z8"))
        if lacking := [p.name for p in games if not p.with_suffix(".json").is_file()]:
            raise FileNotFoundError(f"textworld: {folder}: {', '.join(lacking[:5])} have no .json beside them "
                                    "(TextWorld's game data, needed for admissible commands and the walkthrough)")
        return [p.stem for p in games]

    def game_path(self, task_id: str) -> Path:
        """The .z8 file of a task (not generated yet, for a generated task that was never played)."""
        parts = task_id.split("/")
        if len(parts) == 4 and parts[0] == "textworld" and parts[2] in SPLITS:
            split = parts[2]
            folder = self._own_folder(split) if self.game_files is not None and parts[1] == "files" else None
            if folder is not None:
                path = folder / f"{parts[3]}.z8"
                if not (path.is_file() and path.with_suffix(".json").is_file()):
                    raise FileNotFoundError(f"textworld: task {task_id!r}: {path} and its .json must both exist")
                return path
            generated = self.game_files is None and parts[1] == f"s{self.gen_seed}" and parts[3].isdigit()
            if generated and int(parts[3]) < self.counts[split]:
                return self.config_dir / split / f"{parts[3]}.z8"
        raise KeyError(f"textworld: task {task_id!r} is not in this env's task set (seed={self.gen_seed}, "
                       f"n_games={self.counts}, game_files={self.game_files}); see task_ids(split)")

    def ensure_game(self, task_id: str) -> Path:
        """The game file of `task_id`, generating and compiling it first if needed."""
        path = self.game_path(task_id)
        if self.game_files is not None or path.is_file():
            return path
        _, _, split, index = task_id.split("/")
        seeds = generation_seeds(self.gen_seed, split, int(index))
        try:
            return generate_game(path, game_options(seeds, self.world_size, self.nb_objects, self.quest_length))
        except Exception as e:
            raise EnvError(
                f"textworld: could not generate {task_id} (world_size={self.world_size}, nb_objects="
                f"{self.nb_objects}, quest_length={self.quest_length}, seeds={seeds}) into {path.parent}: "
                f"{type(e).__name__}: {e}") from e

    def generate(self, splits: Iterable[str] = SPLITS, progress: bool = True) -> list[Path]:
        """Generate (or find in the cache) every game of `splits`, with a progress bar; returns their files."""
        ids = [t for s in splits for t in self.task_ids(s)]
        return [self.ensure_game(t) for t in track(ids, description="textworld games", disable=not progress)]

    def walkthrough(self, task_id: str) -> list[str]:
        """The game's walkthrough (TextWorld's winning command sequence from the start)."""
        return list(textworld.Game.load(str(self.ensure_game(task_id).with_suffix(".json"))).metadata["walkthrough"])

    # -- the episode ------------------------------------------------------------------------------
    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        path = self.ensure_game(task_id)
        if self._game_path != path:
            self.close()
            self._game = textworld.start(str(path), request_infos())
            self._game_path = path
        self._game.seed(zmachine_seed(seed))
        self._state = self._game.reset()
        self._admissible = list(self._state["admissible_commands"])
        return clean_feedback(self._state["feedback"]), {"task": self._state["objective"],
                                                         "max_points": self._state["max_score"]}

    def _step(self, action: str) -> StepOutcome:
        valid = normalize_command(action) in {normalize_command(c) for c in self._admissible}
        before = self._state["score"] or 0
        self._state, _, done = self._game.step(action)
        self._admissible = list(self._state["admissible_commands"])
        points, max_points = self._state["score"] or 0, self._state["max_score"]
        won, lost = bool(self._state["won"]), bool(self._state["lost"])
        info = {"lost": lost, "points": points, "score": points / max_points if max_points else float(won)}
        return StepOutcome(clean_feedback(self._state["feedback"]), float(points - before),
                           terminated=bool(done or won or lost), won=won, valid=valid, info=info)

    def admissible_actions(self) -> list[str]:
        return list(self._admissible)

    def expert_action(self) -> str | None:
        """The next command of TextWorld's winning policy from the current state (see the module docstring)."""
        policy = self._state.get("policy_commands") if self._state is not None else None
        return policy[0] if policy else None

    def close(self) -> None:
        if self._game is not None:
            self._game.close()
        self._game, self._game_path, self._state = None, None, None
