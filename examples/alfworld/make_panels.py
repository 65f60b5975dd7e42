"""Write the fixed ALFWorld task panels of the example configs (`panels/*.txt`, committed).

    python examples/alfworld/make_panels.py [--data-dir ../shared/data/alfworld/json_2.1.1] [--heldout 120]

- `panels/train-heldout.txt`: `--heldout` of the 881 train games, drawn at random (seed 0) within each task
  type in proportion to its share of the train games. For choosing a recipe: the example configs never train
  on them, and the 134 `valid_unseen` games are never used to choose anything.
- `panels/train-fit.txt`: the other train games, which the example configs train on (demonstrations,
  rollouts).
- `panels/valid-unseen.txt`: the 134 `valid_unseen` games (the test split) in the same round-robin order, so
  that a costly evaluation row (beam search) can run on the first N, spread over the six types. Only for the
  final table, like the split itself.

All three list game folders relative to the data folder (ALFWorld's task ids), round-robin over the six task types
(each type's games in a seeded random order), so the first N of a panel (`tasks: N` with `panel:`) spread
over all six types. Re-running it writes the same files from the same 881 games.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from proctor.envs.alfworld import TASK_TYPES, task_type

HERE = Path(__file__).resolve().parent


def split_games(data_dir: Path, split: str) -> list[str]:
    """A split's task ids (as `ALFWorldEnv.task_ids`, without importing alfworld): `train`, `valid_unseen`."""
    return sorted(str(p.parent.relative_to(data_dir)) for p in (data_dir / split).glob("*/*/game.tw-pddl"))


def round_robin(groups: dict[str, list[str]]) -> list[str]:
    """One game of each type in turn (TASK_TYPES order) until every list is used up."""
    out: list[str] = []
    for i in range(max(map(len, groups.values()))):
        out += [groups[kind][i] for kind in TASK_TYPES if i < len(groups[kind])]
    return out


def shuffled_by_type(ids: list[str], seed: int) -> dict[str, list[str]]:
    """Each task type's games, in a random order drawn with `seed`."""
    rng = random.Random(seed)
    by_type = {kind: sorted(i for i in ids if task_type(i) == kind) for kind in TASK_TYPES}
    for games in by_type.values():
        rng.shuffle(games)
    return by_type


def panels(ids: list[str], heldout: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(held-out panel, fitting panel): `heldout` games stratified by task type (largest remainders), the rest."""
    by_type = shuffled_by_type(ids, seed)
    quota = {kind: heldout * len(g) / len(ids) for kind, g in by_type.items()}
    counts = {kind: int(q) for kind, q in quota.items()}
    for kind in sorted(quota, key=lambda k: quota[k] - counts[k], reverse=True)[:heldout - sum(counts.values())]:
        counts[kind] += 1
    held = {kind: g[:counts[kind]] for kind, g in by_type.items()}
    fit = {kind: g[counts[kind]:] for kind, g in by_type.items()}
    return round_robin(held), round_robin(fit)


def write(path: Path, ids: list[str], header: str) -> None:
    path.write_text("".join(f"# {line}\n" for line in header.splitlines()) + "".join(f"{i}\n" for i in ids))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/alfworld/json_2.1.1"))
    parser.add_argument("--heldout", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "panels")
    args = parser.parse_args(argv)
    ids = split_games(args.data_dir, "train")
    unseen = round_robin(shuffled_by_type(split_games(args.data_dir, "valid_unseen"), args.seed))
    held, fit = panels(ids, args.heldout, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    drawn = f"drawn by examples/alfworld/make_panels.py (seed {args.seed}) from the {len(ids)} train games of json_2.1.1"
    write(args.out / "train-heldout.txt", held,
          f"ALFWorld train games held out to choose a recipe on: {len(held)}, stratified by task type,\n{drawn}.\n"
          "The example configs never train on them. Round-robin over the task types.")
    write(args.out / "train-fit.txt", fit,
          f"ALFWorld train games the example configs train on: the {len(fit)} not in train-heldout.txt,\n{drawn}.\n"
          "Round-robin over the task types: the first N spread over all six.")
    write(args.out / "valid-unseen.txt", unseen,
          f"The {len(unseen)} ALFWorld valid_unseen games (the test split), round-robin over the task types (each\n"
          f"type in a random order, seed {args.seed}; examples/alfworld/make_panels.py): the first N of a costly row\n"
          "spread over all six. For the final table only, never to choose a recipe.")
    print({"train": len(ids), "heldout": len(held), "fit": len(fit), "valid_unseen": len(unseen)})


if __name__ == "__main__":
    main()
