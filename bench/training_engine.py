"""The training engine's cost: SFT steps through `proctor.training.fit` (HF Trainer on Accelerate) against a plain
AdamW loop over the same batches and the same loss (`proctor.rl.sft.SFTLoss`), in tokens/s; and, with
`--processes 2`, the same steps data-parallel under torchrun (gloo) against one process.

    python bench/training_engine.py [--steps 200] [--batch 6] [--hidden 128 --layers 4] [--processes 2]

Household demonstrations of the searching expert (`small` preset), the quickstart's SFT prompt and batch. Both
loops start from the same weights and run in this process with the same thread count; the plain loop clips the
gradient and steps a constant learning rate, as the engine does here. Prints one JSON object: tokens/s of each,
their ratio measured in this run (goal: engine ≥ 0.95 of the plain loop), the largest difference between the two
loss curves over the first 10 steps (fused vs plain AdamW rounding; later steps drift apart at lr 3e-3), and with `--processes` the two-process run's tokens/s against one process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

from proctor.agents.generation_utils import eos_token_ids
from proctor.models import build_tiny
from proctor.prompts import PromptConfig
from proctor.rl.sft import SFTConfig, SFTLoss, load_demonstrations, train_sft
from proctor.rl.sft_data import build_examples, length_grouped_batches
from proctor.rollout import RolloutConfig, run_rollout
from proctor.training.engine import fit
from proctor.training.policy import load_policy

PROMPT = PromptConfig(history=2, memory=True, show_admissible=False, system="")


def plain_loop(model, batches, loss, lr: float) -> list[float]:
    """The hand-written loop the engine replaced: AdamW, clipping at 1.0, a constant learning rate."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    curve = []
    for rows in batches:
        total, stats = loss(model, rows)
        value = total / loss.weight(rows)
        opt.zero_grad(set_to_none=True)
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        curve.append(float(stats["agent_nll"]) / stats["agent_tokens"])
    return curve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--demos", type=int, default=200)
    ap.add_argument("--processes", type=int, default=0, help="also time a torchrun run with this many processes")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    model_dir = build_tiny(work / "tiny", hidden_size=args.hidden, layers=args.layers)
    demos = work / "demos"
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small"}, out=demos, split="train",
                              tasks=args.demos, agent={"kind": "expert", "expert": "search"}, progress=False))
    cfg = SFTConfig(model=str(model_dir), data=demos, output_dir=work / "sft", steps=args.steps,
                    batch_size=args.batch, prompt=PROMPT, learning_rate=3e-3, warmup_ratio=0.0,
                    lr_scheduler_type="constant", device="cpu", progress=False)
    torch.manual_seed(0)
    model, tok = load_policy(cfg.model)
    examples = build_examples(tok, load_demonstrations(cfg), PROMPT, set(eos_token_ids(model, tok)), "steps")
    order = length_grouped_batches([len(e.ids) for e in examples], args.batch, random.Random(0))
    batches = [[examples[i] for i in next(order)] for _ in range(args.steps)]
    tokens = sum(len(e.ids) for b in batches for e in b)
    loss = SFTLoss(tok.pad_token_id, 0.0)

    start = time.perf_counter()
    plain = plain_loop(load_policy(cfg.model)[0], batches, loss, cfg.learning_rate)
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    result = fit(load_policy(cfg.model)[0], batches, loss, cfg, work / "trainer", label="bench")
    engine_s = time.perf_counter() - start
    engine = [r["agent_nll"] / r["agent_tokens"] for r in result.curve]
    out = {"steps": args.steps, "batch": args.batch, "tokens": tokens, "threads": torch.get_num_threads(),
           "plain_tokens_per_s": round(tokens / plain_s, 1), "engine_tokens_per_s": round(tokens / engine_s, 1),
           "engine_vs_plain": round(plain_s / engine_s, 3),
           "max_difference_first_10_steps": round(max(abs(a - b) for a, b in zip(plain[:10], engine, strict=False)), 6)}
    if args.processes > 1:
        one = train_sft(cfg.model_copy(update={"output_dir": work / "one"}))
        (work / "ddp.yaml").write_text(yaml.safe_dump(json.loads(cfg.model_copy(
            update={"output_dir": work / "ddp"}).model_dump_json())))
        driver = work / "driver.py"
        driver.write_text("from proctor.cli import main\n\nmain()\n")
        threads = max(1, torch.get_num_threads() // args.processes)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": ""}
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                        str(args.processes), str(driver), "train", "sft", str(work / "ddp.yaml")], check=True,
                       env=env, capture_output=True)
        one_tps = json.loads((one / "sft.json").read_text())["tokens_per_s"]
        ddp_tps = json.loads((work / "ddp" / "sft.json").read_text())["tokens_per_s"]
        out.update({"processes": args.processes, "threads_per_process": threads, "one_process_tokens_per_s": one_tps,
                    "processes_tokens_per_s": ddp_tps, "processes_vs_one": round(ddp_tps / one_tps, 3)})
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
