"""PRM training throughput and accuracy: proctor's trainer (padded, and packed) vs TRL's PRMTrainer.

    python bench/prm_train_vs_trl.py [--train-tasks 200] [--eval-tasks 60] [--epochs 2] [--batch 8]

TRL removed PRMTrainer after 1.13, so the script installs `trl==1.13.0` (import path
`trl.experimental.prm`) into its own folder (`--trl-dir`, default ~/.cache/proctor/trl113, `pip install
--no-deps --target`) and runs TRL with this interpreter and that folder first on PYTHONPATH, so it uses the
same torch and transformers (also when this python is itself a virtual environment's).
Same data (the `arithmetic` env's noisy solver with ground-truth step labels, or `--processbench FILE`'s
solutions through their first wrong step), same tiny model,
same tokenization (proctor's TRL mode reproduces TRL's tokenize_row, checked here by the token counts),
same batch size, learning rate and epochs; the two-class token-classification head with cross-entropy.
TRL's PRMConfig defaults to gradient checkpointing and bf16 autocast; both are turned off so that both
trainers run the same float32 computation.
Prints one JSON object: non-pad training tokens/s of each run, the ratios to TRL, and the step accuracy of
each trained PRM on held-out problems.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRL_VERSION = "1.13.0"

TRL_SCRIPT = r"""
import json, os, sys
os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
import torch, trl
from datasets import Dataset
from transformers import AutoModelForTokenClassification, AutoTokenizer
from trl.experimental.prm import PRMConfig, PRMTrainer

a = json.load(open(sys.argv[1]))
torch.manual_seed(a["seed"])
tok = AutoTokenizer.from_pretrained(a["model"])
model = AutoModelForTokenClassification.from_pretrained(a["model"], num_labels=2, dtype=torch.float32)
model.config.pad_token_id = tok.pad_token_id
read = lambda p: Dataset.from_list([json.loads(line) for line in open(p)])
args = PRMConfig(output_dir=a["out"], per_device_train_batch_size=a["batch"],
                 per_device_eval_batch_size=a["batch"], num_train_epochs=a["epochs"], learning_rate=a["lr"],
                 max_length=a["max_length"],
                 step_separator="\n", use_cpu=True, gradient_checkpointing=False, bf16=False,
                 report_to="none", save_strategy="no", logging_steps=50,
                 disable_tqdm=True, seed=a["seed"], dataloader_drop_last=False)
trainer = PRMTrainer(model=model, args=args, train_dataset=read(a["train"]), eval_dataset=read(a["eval"]),
                     processing_class=tok)
result = trainer.train()
metrics = trainer.evaluate()
tokens = sum(len(x) for x in trainer.train_dataset["input_ids"]) * a["epochs"]
print("RESULT " + json.dumps({"trl_version": trl.__version__,
                              "train_runtime_s": result.metrics["train_runtime"], "tokens": tokens,
                              "eval_step_accuracy": metrics["eval_accuracy"],
                              "steps": result.global_step}))
"""


def trl_dir(target: Path) -> Path:
    """A folder holding trl==1.13.0 (installed without dependencies on first use)."""
    probe = [sys.executable, "-c", "import trl, sys; sys.exit(trl.__version__ != sys.argv[1])", TRL_VERSION]
    if subprocess.run(probe, capture_output=True, check=False, env=_trl_env(target)).returncode != 0:
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(target),
               f"trl=={TRL_VERSION}"]
        subprocess.run(pip, check=True)
    return target


def _trl_env(target: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": os.pathsep.join([str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}


def arithmetic_examples(split: str, tasks: int, samples: int, workdir: Path):
    """Noisy-solver rollouts on `arithmetic` as stepwise examples: the problem, one line per step, and the
    env's ground-truth `step_correct` label per step."""
    from proctor.agents import ExpertAgent
    from proctor.envs import make
    from proctor.envs.registry import EnvSpec
    from proctor.prm.data import StepwiseExample
    from proctor.rollout import rollout

    task_ids = make("arithmetic").task_ids(split)[:tasks]
    store = rollout(
        EnvSpec("arithmetic", {}),
        ExpertAgent("noisy"),
        task_ids,
        workdir / split,
        split=split,
        samples_per_task=samples,
        progress=False,
    )
    return [
        StepwiseExample(
            prompt=t.task + "\n",
            completions=[s.action for s in t.steps],
            labels=[bool(s.info["step_correct"]) for s in t.steps],
            id=t.id,
        )
        for t in store.load()
    ]


def processbench_examples(path: Path, first: int, count: int):
    """ProcessBench solutions `first`..`first + count` of a file as training examples: the steps through the first
    wrong one (what is labelled: correct before it, wrong at it; every step of a fully correct solution)."""
    from proctor.prm.importers import read_processbench

    rows = read_processbench(path, through_first_error=True)
    if len(rows) < first + count:
        raise SystemExit(f"{path}: {len(rows)} solutions, fewer than the {first + count} asked for")
    return rows[first:first + count]


def run_proctor(args, model: Path, train: Path, evals, packing: bool, out: Path) -> dict:
    from proctor.prm.config import PRMTrainConfig
    from proctor.prm.scoring import PRMScorer
    from proctor.prm.trainer import prepare, train_prepared

    cfg = PRMTrainConfig.model_validate(
        {
            "model": {"backbone": str(model), "head": "classification"},
            "tokenization": {"mode": "trl", "step_separator": "\n", "max_length": args.max_length},
            "loss": "ce",
            "data": {"train": str(train), "unlabelled_rows": "keep"},  # as TRL: a row truncated to no label stays
            "packing": packing,
            "seed": args.seed,
            "output_dir": str(out),
            "batch_size": args.batch,
            "epochs": args.epochs,
            "learning_rate": args.lr,
            "device": "cpu",
            "logging_steps": 50,
            "progress": False,
        }
    )
    prepared = prepare(cfg, overwrite=True)  # the repeats train into the same folder
    result = train_prepared(prepared)
    prm = result.prm
    tokens = sum(len(f["input_ids"]) for f in prepared.train) * args.epochs
    scores = PRMScorer(prm.eval(), batch_size=args.batch).score_examples(evals)
    right = [
        (s > 0.5) == bool(y)
        for ex, row in zip(evals, scores, strict=True)
        for s, y in zip(row, ex.labels, strict=True)
    ]
    return {
        "train_runtime_s": result.seconds,
        "tokens": tokens,
        "eval_step_accuracy": sum(right) / len(right),
        "steps": result.steps,
        "params": sum(p.numel() for p in prm.parameters()),
    }


def run_trl(args, trl: Path, model: Path, train: Path, evals: Path, out: Path) -> dict:
    spec = out / "trl_args.json"
    out.mkdir(parents=True, exist_ok=True)
    spec.write_text(
        json.dumps(
            {
                "model": str(model),
                "train": str(train),
                "eval": str(evals),
                "out": str(out),
                "batch": args.batch,
                "epochs": args.epochs,
                "lr": args.lr,
                "max_length": args.max_length,
                "seed": args.seed,
            }
        )
    )
    script = out / "trl_run.py"
    script.write_text(TRL_SCRIPT)
    res = subprocess.run(
        [sys.executable, str(script), str(spec)], capture_output=True, text=True, env=_trl_env(trl), check=False
    )
    lines = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"the TRL run failed (exit {res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-tasks", type=int, default=200)
    ap.add_argument("--eval-tasks", type=int, default=60)
    ap.add_argument("--samples", type=int, default=2, help="noisy-solver rollouts per problem")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--pack-width", type=int, default=128, help="packed row length (arithmetic rows are ≤ 120)"
    )
    ap.add_argument("--trl-dir", type=Path, default=Path.home() / ".cache" / "proctor" / "trl113")
    ap.add_argument("--processbench", type=Path, default=None, help="train on this ProcessBench file's solutions "
                    "(e.g. ../shared/data/processbench/math.json: hundreds of tokens each, varied lengths) instead "
                    "of arithmetic rollouts; --train-tasks / --eval-tasks count its solutions")
    ap.add_argument("--no-padded", action="store_true", help="skip the padded proctor run (only packed vs TRL)")
    args = ap.parse_args()

    import torch

    from proctor.models import build_tiny
    from proctor.prm.data import write_stepwise

    work = Path(tempfile.mkdtemp(prefix="prm_vs_trl_"))
    trl = trl_dir(args.trl_dir)
    model = build_tiny(work / "model", hidden_size=args.hidden, layers=args.layers, heads=4, seed=args.seed)
    start = time.perf_counter()
    if args.processbench is None:
        train = arithmetic_examples("train", args.train_tasks, args.samples, work / "rollouts")
        evals = arithmetic_examples("test", args.eval_tasks, args.samples, work / "rollouts")
    else:
        train = processbench_examples(args.processbench, 0, args.train_tasks)
        evals = processbench_examples(args.processbench, args.train_tasks, args.eval_tasks)
    data_s = time.perf_counter() - start
    write_stepwise(train, work / "train.jsonl")
    (work / "train_trl.jsonl").write_text("".join(json.dumps(ex.to_trl()) + "\n" for ex in train))
    (work / "eval_trl.jsonl").write_text("".join(json.dumps(ex.to_trl()) + "\n" for ex in evals))

    runs: dict[str, dict] = {}
    for _ in range(args.repeats):  # interleaved; the fastest repeat of each counts (shared machines)
        this = {
            "trl": lambda: run_trl(
                args, trl, model, work / "train_trl.jsonl", work / "eval_trl.jsonl", work / "trl"
            ),
            "proctor_padded": lambda: run_proctor(
                args, model, work / "train.jsonl", evals, False, work / "pad"
            ),
            "proctor_packed": lambda: run_proctor(
                args, model, work / "train.jsonl", evals, True, work / "pack"
            ),
        }
        if args.no_padded:
            del this["proctor_padded"]
        for name, run in this.items():
            r = run()
            if name not in runs or r["train_runtime_s"] < runs[name]["train_runtime_s"]:
                runs[name] = r
    params = runs["proctor_packed"].pop("params")
    runs.get("proctor_padded", {}).pop("params", None)
    for r in runs.values():
        r["tokens_per_s"] = r["tokens"] / r["train_runtime_s"]
    if len({r["tokens"] for r in runs.values()}) != 1:
        raise RuntimeError(
            f"the runs saw different token counts: { {k: r['tokens'] for k, r in runs.items()} }"
        )
    labels = [y for ex in train for y in ex.labels]
    print(
        json.dumps(
            {
                "data": {
                    "source": str(args.processbench or "arithmetic noisy-solver rollouts"),
                    "train_examples": len(train),
                    "eval_examples": len(evals),
                    "train_steps": len(labels),
                    "train_correct_fraction": sum(labels) / len(labels),
                    "rollout_s": data_s,
                },
                "model": {
                    "hidden": args.hidden,
                    "layers": args.layers,
                    "params": params,
                },
                "batch": args.batch,
                "epochs": args.epochs,
                "torch_threads": torch.get_num_threads(),
                "repeats": args.repeats,
                "pack_width": args.pack_width,
                "load_average_1min": os.getloadavg()[0],
                "runs": runs,
                "speedup_packed_vs_trl": runs["proctor_packed"]["tokens_per_s"] / runs["trl"]["tokens_per_s"],
                "speedup_padded_vs_trl": runs["proctor_padded"]["tokens_per_s"] / runs["trl"]["tokens_per_s"]
                if "proctor_padded" in runs
                else None,
                "accuracy_packed_minus_trl": runs["proctor_packed"]["eval_step_accuracy"]
                - runs["trl"]["eval_step_accuracy"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
