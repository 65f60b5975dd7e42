"""Policy training: supervised fine-tuning on demonstrations (`sft`), and the RL math and trainers that improve
a policy against a PRM. Importing this package imports no torch; import the submodules you use
(`from proctor.rl.sft import SFTConfig, train_sft`)."""
