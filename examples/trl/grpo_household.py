"""GRPO with TRL on a proctor env, the reward shaped by a proctor PRM (docs/integrations.md).

On one GPU, generating with vLLM colocated with training (pip install -e ".[trl]" plus vLLM):

    TRL_EXPERIMENTAL_SILENCE=1 python examples/trl/grpo_household.py \\
        --model Qwen/Qwen2.5-0.5B-Instruct --env household --env-kwargs '{"max_steps": 20}' \\
        --prm runs/quickstart/prm --shaping last --prm-weight 0.5 \\
        --use-vllm --vllm-mode colocate --max-steps 200 --out runs/trl-grpo

On several GPUs, `accelerate launch --num_processes N examples/trl/grpo_household.py ...` with the same arguments;
with `--vllm-mode server`, start `trl vllm-serve --model Qwen/Qwen2.5-0.5B-Instruct` on another GPU first. Without
`--use-vllm` TRL generates with transformers (slow, but it runs on a CPU: add `--cpu`).

The model acts through one tool, `act(command)` (`proctor.integrations.trl`): its chat template must render tool
calls. Qwen2.5/Qwen3 and Llama 3.x templates do, and TRL parses their calls itself; a ChatML tokenizer whose template
does not (SmolLM2, proctor's tiny models) gets proctor's (`proctor.integrations.chat_templates`), and then needs a
short SFT on that format before GRPO has calls to train on. Every rollout of a GRPO group starts from the same task
and seed (the dataset rows of `EnvironmentFactory.dataset`).

Pinned: TRL 1.16 (`environment_factory` is experimental there: it warns, and may change in a later release).
"""

from __future__ import annotations

import argparse
import json

from proctor.integrations.trl import TRL_VERSION, EnvironmentFactory, with_tool_calling


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a causal LM (hub id or folder)")
    p.add_argument("--env", default="household", help="a proctor env name (proctor envs list)")
    p.add_argument("--env-kwargs", default='{"max_steps": 20}', help="the env's constructor arguments, as JSON")
    p.add_argument("--split", default="train")
    p.add_argument("--tasks", type=int, default=None, help="the first N tasks of the split (default: all)")
    p.add_argument("--outcome", choices=["reward", "success", "score"], default="reward")
    p.add_argument("--prm", default=None, help="a proctor PRM folder, to shape the reward with")
    p.add_argument("--shaping", choices=["none", "sum", "min", "last", "potential"], default="none",
                   help="how the PRM's step scores enter the reward: last ranks failed episodes by how far they got; "
                        "potential keeps the optimal policy but gives every failed episode 0 (docs/integrations.md)")
    p.add_argument("--prm-weight", type=float, default=1.0)
    p.add_argument("--gamma", type=float, default=1.0)
    p.add_argument("--hide-admissible", action="store_true", help="do not list the admissible commands")
    p.add_argument("--use-vllm", action="store_true", help="generate with vLLM (GPU)")
    p.add_argument("--vllm-mode", choices=["colocate", "server"], default="colocate")
    p.add_argument("--cpu", action="store_true", help="train on the CPU (no vLLM)")
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8, help="completions per device per step")
    p.add_argument("--num-generations", type=int, default=8, help="rollouts per task (the GRPO group)")
    p.add_argument("--max-completion-length", type=int, default=2048, help="tokens of the whole episode")
    p.add_argument("--max-tool-calls", type=int, default=None, help="default: the env's max_steps + 1")
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--out", default="runs/trl-grpo")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import trl
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    if trl.__version__ != TRL_VERSION:
        print(f"warning: written against TRL {TRL_VERSION}, running {trl.__version__}")
    env_kwargs = json.loads(args.env_kwargs)
    reward = {"outcome": args.outcome, "shaping": args.shaping, "prm": args.prm, "prm_weight": args.prm_weight,
              "gamma": args.gamma}
    factory = EnvironmentFactory(args.env, env_kwargs, split=args.split, reward=reward,
                                 show_admissible=not args.hide_admissible)
    tokenizer = with_tool_calling(AutoTokenizer.from_pretrained(args.model))
    max_tool_calls = args.max_tool_calls or int(env_kwargs.get("max_steps", 50)) + 1
    config = GRPOConfig(
        output_dir=args.out, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations, max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=max_tool_calls, learning_rate=args.learning_rate, temperature=args.temperature,
        use_vllm=args.use_vllm and not args.cpu, vllm_mode=args.vllm_mode, use_cpu=args.cpu,
        bf16=not args.cpu, logging_steps=1, save_strategy="steps", save_steps=max(1, args.max_steps // 4),
        report_to="none",
    )
    trainer = GRPOTrainer(model=args.model, processing_class=tokenizer, args=config,
                          train_dataset=factory.dataset(args.tasks), environment_factory=factory)
    try:
        trainer.train()
        trainer.save_model(args.out)
    finally:
        factory.close()


if __name__ == "__main__":
    main()
