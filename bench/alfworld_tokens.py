"""Token counts of the ALFWorld recipe's model inputs, per state, as `examples/alfworld/smollm2.yaml` renders them.

    python bench/alfworld_tokens.py [--games 12] [--tokenizer runs/smollm2]

The handcoded expert plays the first `--games` games of `examples/alfworld/panels/train-heldout.txt` (round-robin
over the six task types). At every state t of its episodes the script renders, with the recipe's prompts and the
model's tokenizer (a folder, or the GGUF file of `../shared/models/smollm2-135m-instruct` by default):

- `policy_prompt`: the `choice` policy's prompt (history 2, memory line, no admissible list);
- `choice_replies`: every admissible action's reply (formatted action and end-of-turn), summed over the actions,
  and `admissible`, their number (the `choice` agent runs the prompt and all replies in one pass);
- `prm_prefix`: a head PRM's shared text at the state (the whole history, `render_candidates`) and `prm_suffix`,
  one candidate's suffix;
- `sft_example`: the SFT example of the step (`examples: steps`, `step_example`).

Each quantity grows with t (the memory line and the PRM's history), so it is fitted as a + b·t by least squares;
`bench/gpu_estimates.py` evaluates the fits at the policy's episode length. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALFWORLD_DATA = ROOT.parent / "shared" / "data" / "alfworld" / "json_2.1.1"
SMOLLM2 = ROOT.parent / "shared" / "models" / "smollm2-135m-instruct"
PANEL = ROOT / "examples" / "alfworld" / "panels" / "train-heldout.txt"
POLICY_PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}  # smollm2.yaml's `prompt`


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    ggufs = sorted(path.glob("*.gguf")) if path.is_dir() else []
    return AutoTokenizer.from_pretrained(path, gguf_file=ggufs[0].name) if ggufs else AutoTokenizer.from_pretrained(path)


def linear_fit(points: list[tuple[int, int]]) -> dict[str, float]:
    """Least-squares a + b·t through (t, tokens) points, with the mean of the tokens."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    b = sum((t - mt) * (y - my) for t, y in points) / var if var else 0.0
    return {"a": round(my - b * mt, 2), "b": round(b, 3), "mean": round(my, 2)}


def state_counts(tokenizer, traj, t: int, policy_cfg) -> dict[str, int]:
    """The token counts of state `t` of `traj` (module docstring)."""
    from proctor.prm.rendering import render_candidates
    from proctor.prompts.render import format_action, prefix_at, render_prompt
    from proctor.rl.sft_data import step_example

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    prefix = prefix_at(traj, t)
    admissible = traj.steps[t].info.get("admissible_actions") or [traj.steps[t].action]
    eos = 1  # the end-of-turn token every reply ends with
    shared, [suffix] = render_candidates(tokenizer, prefix, [traj.steps[t].action])
    example = step_example(tokenizer, traj, t, policy_cfg, {tokenizer.eos_token_id})
    return {"policy_prompt": count(render_prompt(tokenizer, prefix, policy_cfg)),
            "choice_replies": sum(count(format_action(a, None, policy_cfg)) + eos for a in admissible),
            "admissible": len(admissible), "prm_prefix": count(shared) + 1, "prm_suffix": count(suffix),
            "sft_example": len(example.ids)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=12)
    ap.add_argument("--data-dir", type=Path, default=ALFWORLD_DATA)
    ap.add_argument("--tokenizer", type=Path, default=SMOLLM2, help="a model folder, or a folder with a .gguf")
    args = ap.parse_args(argv)

    from proctor.agents.experts import ExpertAgent
    from proctor.envs import EnvSpec
    from proctor.prompts.render import PromptConfig
    from proctor.rollout import rollout

    lines = (line.split("#", 1)[0].strip() for line in PANEL.read_text().splitlines())
    games = [line for line in lines if line][: args.games]
    tokenizer = load_tokenizer(args.tokenizer)
    policy_cfg = PromptConfig(**POLICY_PROMPT)
    with tempfile.TemporaryDirectory() as out:
        spec = EnvSpec("alfworld", {"data_dir": str(args.data_dir), "max_steps": 50})
        trajs = list(rollout(spec, ExpertAgent("oracle"), games, out, split="train", batch_size=4, progress=False))
    points: dict[str, list[tuple[int, int]]] = {}
    for traj in trajs:
        for t in range(len(traj.steps)):
            for key, value in state_counts(tokenizer, traj, t, policy_cfg).items():
                points.setdefault(key, []).append((t, value))
    result = {"bench": "alfworld_tokens", "tokenizer": str(args.tokenizer), "games": len(trajs),
              "states": sum(len(t.steps) for t in trajs), "won": sum(t.success for t in trajs),
              "per_state": {key: linear_fit(p) for key, p in points.items()}}
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
