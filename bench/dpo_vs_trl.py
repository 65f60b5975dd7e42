"""DPO training throughput: proctor's DPO step (`proctor.rl.dpo_step.DPOLoss` on the training engine,
`proctor.training.fit`, as online DPO trains) vs TRL's stable `DPOTrainer`, on the
same preference pairs (the same token ids), the same model, batch size, learning rate and epochs; fp32.

    python bench/dpo_vs_trl.py [--pairs 256] [--batch 8] [--epochs 1] [--hidden 256] [--layers 4] [--threads 2]

Pairs: states of the built-in `household` env (expert rollouts, the full history rendered by proctor's prompt
renderer), chosen = the expert's action, rejected = another admissible action, each written as the assistant
reply ending with the end-of-turn token. TRL tokenizes the text; proctor then trains on TRL's own token ids
(`prompt_ids`, `chosen_ids`, `rejected_ids` of its processed dataset), so both see identical sequences.

TRL is run twice: with its default reference (a frozen copy of the model, run at every step) and with
`precompute_ref_log_probs=True` (the reference pass once, before training, as proctor does). Each timing covers
the whole training of the pairs: for proctor its reference pass plus `fit` (the Trainer's set-up included); for TRL
`trainer.train()` plus, with precomputation, the reference pass it runs first. Tokens/s = (prompt + chosen +
prompt + rejected tokens) × epochs / seconds. Needs the `trl` extra (`pip install -e ".[trl]"`); without it
the script prints {"skipped": ...} and exits 0.

proctor runs with each pair's prompt computed once for both completions (`shared_prompt`, the default) and
with the 2B concatenated sequences (`concatenated`, what TRL computes). Variants are interleaved `--repeats`
times and the median time of each counts. Two clocks: wall time, and the process's CPU time (all its threads),
which other processes' load barely moves: on the shared 2-core machines here, compare the CPU-time ratios.
Prints one JSON object: tokens/s of each variant by each clock, the ratios proctor ÷ TRL, and each variant's
mean training loss (equal when the math is).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

#: TRL first (its processed dataset gives the token ids every run trains on)
VARIANTS = ("trl_default_ref", "trl_precomputed_ref", "proctor_shared_prompt", "proctor_concatenated")


def household_pairs(tokenizer, n_pairs: int, seed: int) -> list[dict[str, str]]:
    """{prompt, chosen, rejected} texts from expert rollouts of household's train tasks."""
    from proctor.envs import make
    from proctor.prompts import Prefix, format_action, render_prompt

    rng = random.Random(seed)
    env = make("household", expert_hints=True)
    rows: list[dict[str, str]] = []
    for task_id in env.task_ids("train"):
        obs, info = env.reset(task_id, seed)
        history = []
        while not env.done and len(rows) < n_pairs:
            expert = info["expert_action"]
            others = [a for a in info.get("admissible_actions", []) if a != expert]
            prefix = Prefix(env="household", task_id=task_id, task=info.get("task", ""), observation=obs,
                            history=list(history), info={"admissible_actions": info.get("admissible_actions")})
            if others:
                rows.append({"prompt": render_prompt(tokenizer, prefix),
                             "chosen": format_action(expert) + tokenizer.eos_token,
                             "rejected": format_action(rng.choice(others)) + tokenizer.eos_token})
            from proctor.trajectory import Step

            history.append(Step(observation=obs, action=expert, info={"admissible_actions":
                                                                       info.get("admissible_actions")}))
            result = env.step(expert)
            obs, info = result.observation, result.as_info()
        if len(rows) >= n_pairs:
            return rows
    return rows


def run_trl(model, tokenizer, rows, args, precompute: bool, workdir: Path):
    """TRL's DPOTrainer on `rows`: ((wall s, CPU s) of training incl. the precomputed reference pass, the
    processed dataset, mean training loss)."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    config = DPOConfig(output_dir=str(workdir), per_device_train_batch_size=args.batch, num_train_epochs=args.epochs,
                       learning_rate=args.lr, beta=args.beta, loss_type=["sigmoid"], use_cpu=True, bf16=False,
                       gradient_checkpointing=False, report_to="none", save_strategy="no", logging_steps=10**6,
                       disable_tqdm=True, seed=args.seed, max_length=None, precompute_ref_log_probs=precompute,
                       precompute_ref_batch_size=args.batch, dataloader_drop_last=False,
                       lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0)
    spent = {"wall": 0.0, "cpu": 0.0}
    original = DPOTrainer._precompute_ref_logps

    def timed_precompute(self, *a, **kw):  # the reference pass TRL runs in __init__ with precomputation
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return original(self, *a, **kw)
        finally:
            spent["wall"] += time.perf_counter() - start
            spent["cpu"] += time.process_time() - cpu

    DPOTrainer._precompute_ref_logps = timed_precompute
    try:
        trainer = DPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer)
    finally:
        DPOTrainer._precompute_ref_logps = original
    start, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its log dicts; stdout is this script's JSON
        result = trainer.train()
    seconds = (time.perf_counter() - start + spent["wall"], time.process_time() - cpu + spent["cpu"])
    return seconds, trainer.train_dataset, result.training_loss


def run_proctor(model, tokenizer, pairs, args, shared_prompt: bool, workdir: Path):
    """proctor's reference pass + DPO steps over `pairs` on the training engine (`fit`, AdamW, constant lr,
    clipping at 1, fp32): ((wall s, CPU s), mean loss)."""
    from proctor.rl.dpo_step import DPOLoss, DPORow, reference_logprobs
    from proctor.training.config import OptimizationConfig
    from proctor.training.engine import fit, shuffled, shuffled_batches

    gen = torch.Generator().manual_seed(args.seed)
    pad = tokenizer.pad_token_id
    opt = OptimizationConfig(learning_rate=args.lr, lr_scheduler_type="constant", precision="fp32", device="cpu",
                             seed=args.seed, progress=False, logging_steps=10**6)
    start, cpu = time.perf_counter(), time.process_time()
    ref_c, ref_r = reference_logprobs(model, pairs, pad, args.batch, shared_prompt=shared_prompt)
    rows = [DPORow(p, c, r) for p, c, r in zip(pairs, ref_c.tolist(), ref_r.tolist(), strict=True)]
    batches, _ = shuffled_batches(rows, args.batch, args.epochs, shuffled(gen), opt)
    result = fit(model, batches, DPOLoss(pad, beta=args.beta, shared_prompt=shared_prompt), opt, workdir)
    losses = [r["loss"] for r in result.curve]
    return (time.perf_counter() - start, time.process_time() - cpu), sum(losses) / len(losses)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=None, help="model folder (default: a tiny Llama built here)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs of every variant; the median counts")
    args = ap.parse_args()
    try:
        import trl
    except ImportError:
        print(json.dumps({"skipped": "trl is not installed (pip install -e '.[trl]')"}))
        return
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    from proctor.models import build_tiny, load
    from proctor.rl.pairs import PreferencePair

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.model or build_tiny(Path(tmp) / "tiny", hidden_size=args.hidden, layers=args.layers,
                                          heads=4, seed=args.seed)
        base, tokenizer = load(folder, dtype="float32")
        tokenizer.padding_side = "right"
        rows = household_pairs(tokenizer, args.pairs, args.seed)
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in VARIANTS}
        losses: dict[str, float] = {}
        pairs = None
        for r in range(args.repeats):  # interleaved, so that a change of machine load hits every variant
            for name in VARIANTS:
                torch.manual_seed(args.seed)
                model = copy.deepcopy(base)
                if name.startswith("trl"):
                    seconds, dataset, loss = run_trl(model, tokenizer, rows, args, name == "trl_precomputed_ref",
                                                     Path(tmp) / f"{name}-{r}")
                    if pairs is None:
                        pairs = [PreferencePair(list(x["prompt_ids"]), list(x["chosen_ids"]), list(x["rejected_ids"]),
                                                (True, True), "", "", (1.0, 0.0)) for x in dataset]
                else:
                    seconds, loss = run_proctor(model, tokenizer, pairs, args, name == "proctor_shared_prompt",
                                                Path(tmp) / f"{name}-{r}")
                runs[name].append(seconds)
                losses[name] = loss
                print(f"[bench] repeat {r + 1}/{args.repeats} {name}: {seconds[0]:.1f} s wall, {seconds[1]:.1f} s CPU",
                      file=sys.stderr, flush=True)
    tokens = sum(p.tokens for p in pairs) * args.epochs
    report = {}
    for clock, i in (("wall", 0), ("cpu", 1)):
        rate = {k: tokens / statistics.median(s[i] for s in v) for k, v in runs.items()}
        report[clock] = {
            "tokens_per_s": {k: round(v, 1) for k, v in rate.items()},
            "ratio_vs_trl_default_ref": round(rate["proctor_shared_prompt"] / rate["trl_default_ref"], 3),
            "ratio_vs_trl_precomputed_ref": round(rate["proctor_shared_prompt"] / rate["trl_precomputed_ref"], 3),
            "ratio_concatenated_vs_trl_precomputed_ref": round(
                rate["proctor_concatenated"] / rate["trl_precomputed_ref"], 3),
        }
    print(json.dumps({
        "trl_version": trl.__version__, "torch_threads": args.threads, "pairs": len(pairs), "epochs": args.epochs,
        "batch": args.batch, "hidden": args.hidden, "layers": args.layers, "tokens": tokens,
        "mean_prompt_tokens": sum(len(p.prompt_ids) for p in pairs) / len(pairs),
        "mean_completion_tokens": sum(len(p.chosen_ids) + len(p.rejected_ids) for p in pairs) / (2 * len(pairs)),
        "repeats": args.repeats, "median_of": "repeats", **report,
        "seconds_all": {k: [[round(w, 2), round(c, 2)] for w, c in v] for k, v in runs.items()},
        "mean_train_loss": losses,
    }))


if __name__ == "__main__":
    sys.exit(main())
