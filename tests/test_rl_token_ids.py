"""Training uses the token ids the policy generated, never a re-tokenization of its text: on SmolLM2's real BPE
tokenizer (../shared/models), a reply the sampler emitted as "g" + "o" + ... decodes to text whose
re-tokenization starts with the single token "go", and proctor's DPO and policy-gradient rows keep (and score)
the generated ids."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from proctor.envs import make
from proctor.prompts import Candidate, Prefix
from proctor.rl.dpo_step import pair_logprobs
from proctor.rl.pairs import CandidatePair, candidate_tokens, prompt_ids, reply_ids
from proctor.rl.step_rows import step_row
from proctor.trajectory import Step, Trajectory

MODELS = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "smollm2-135m-instruct"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = [pytest.mark.data, pytest.mark.slow]


@pytest.fixture(scope="module")
def tokenizer():
    if not (MODELS / GGUF).is_file():
        pytest.skip(f"SmolLM2 not found at {MODELS / GGUF} (see ../shared/models/README.md)")
    pytest.importorskip("gguf", reason="reading a GGUF tokenizer needs the gguf package (dev extra)")
    from transformers import AutoTokenizer

    from proctor.models.loading import prepare_tokenizer

    return prepare_tokenizer(AutoTokenizer.from_pretrained(str(MODELS), gguf_file=GGUF))


def _prefix() -> Prefix:
    env = make("household")
    task = env.task_ids("train")[0]
    obs, info = env.reset(task, 0)
    return Prefix(env="household", task_id=task, task=info["task"], observation=obs,
                  info={"admissible_actions": info["admissible_actions"]})


def test_training_keeps_the_generated_ids_where_retokenizing_differs(tokenizer):
    tok, prefix = tokenizer, _prefix()
    action = "go to cabinet 1"
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    canonical = tok(action, add_special_tokens=False)["input_ids"]
    generated = tok.convert_tokens_to_ids(["g", "o"]) + canonical[1:] + [eos]  # a sampler can emit this split
    assert tok.decode(generated, skip_special_tokens=True) == action
    retokenized = reply_ids(tok, prefix, Candidate(action=action))
    assert retokenized[0] == canonical[0] != generated[0]  # "go" vs "g", "o": the drift a re-tokenization causes
    assert retokenized != generated

    shared = prompt_ids(tok, prefix)
    cand = Candidate(action=action, token_ids=generated, meta={"prompt_tokens": len(shared)})
    assert candidate_tokens(tok, prefix, cand) == (shared, generated, True)

    # policy-gradient rows read Step.token_ids
    traj = Trajectory(id="t", env="household", task_id=prefix.task_id, sample=0, task=prefix.task, split="train",
                      seed=0, agent="hf", success=False, score=0.0, termination="failure",
                      steps=[Step(observation=prefix.observation, action=action, token_ids=generated,
                                  info=dict(prefix.info))])
    assert step_row(tok, traj, 0, None).completion_ids == generated

    # the DPO loss scores exactly the generated ids (a tiny random model with SmolLM2's vocabulary)
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    pair = CandidatePair(shared, generated, retokenized, (True, False), action, action, (1.0, 0.0))
    with torch.no_grad():
        chosen, rejected, _ = pair_logprobs(model, [pair], tok.pad_token_id)
        logp = torch.log_softmax(model(torch.tensor([shared + generated])).logits[0], -1)
    expected = sum(float(logp[len(shared) - 1 + j, t]) for j, t in enumerate(generated))
    assert float(chosen[0]) == pytest.approx(expected, abs=1e-3)
    assert abs(float(chosen[0]) - float(rejected[0])) > 1e-3  # the two tokenizations are different sequences
