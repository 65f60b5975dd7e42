"""How much of a model a training run moved: the share of weights that differ between two saved folders."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file


def weights(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        out.update({k: v.float() for k, v in load_file(f).items()})
    return out


def moved_fraction(before: Path, after: Path, skip: tuple[str, ...] = ()) -> float:
    """The share of the weights (of every tensor in `before` whose name contains none of `skip`) whose value
    in `after` differs."""
    a, b = weights(before), weights(after)
    names = [k for k in a if not any(s in k for s in skip)]
    assert names and all(k in b for k in names), sorted(set(names) - set(b))
    changed = sum(int((a[k] != b[k]).sum()) for k in names)
    return changed / sum(a[k].numel() for k in names)
