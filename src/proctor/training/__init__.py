"""proctor's training engine: every gradient step of every trainer runs through HF `Trainer` on Accelerate.

- `precision`: one precision policy (fp32 master weights, bf16 autocast where the device supports it);
- `config`: the shared sub-configs (`OptimizationConfig`: the `TrainingArguments` fields a trainer exposes;
  `TaskSelection`: which env tasks an online trainer rolls out on);
- `engine`: `fit`, a `transformers.Trainer` over rows with a proctor loss (`RowLoss`);
- `distributed`: rank-0 sampling broadcast to every process;
- `policy`: the model a trainer updates (loaded under the precision policy, fully or with LoRA) and its saving
  (`save_trained`: the state dict gathered under FSDP/ZeRO-3, written float32 unless asked).
"""
