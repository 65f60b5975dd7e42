"""The likelihood PRM (`proctor.prm.likelihood`): its score formula by hand, its data (replayed prefixes left
out, bad targets named), that training on targets favouring one action makes it rank that action first at
states it never saw, that its scorer agrees with itself and with the policy's log-likelihoods, and that search,
the loader and the CLI take its folder like any PRM folder."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from proctor.agents.base import Agent, Candidate, Prefix
from proctor.agents.choice import ChoiceAgent
from proctor.cli import app
from proctor.envs.experts import expert_policy
from proctor.prm.likelihood import (
    LIKELIHOOD_FILE,
    LikelihoodPRMConfig,
    LikelihoodScorer,
    demonstrated_steps,
    labelled_steps,
    likelihood_score,
    train_likelihood_prm,
)
from proctor.prm.ref import PRMRef
from proctor.prm.trajectory_eval import evaluate_trajectories
from proctor.prompts.render import prefix_at
from proctor.rollout import RolloutConfig, run_rollout
from proctor.search.best_of_n import BestOfNAgent
from proctor.store import TrajectoryStore

PROMPT = {"history": 2, "memory": True, "show_admissible": False, "system": ""}
FAVOURED = "examine "  # favoured actions start with it (several tokens; "look" is one)
ENV = {"env": "household", "env_kwargs": {"preset": "small", "max_steps": 6}}


def test_score_formula_by_hand():
    # β = 2, b = −1, ℓ = −0.5: z = −2, σ(−2) = 1/(1 + e²) = 0.11920292
    assert likelihood_score(-0.5, 2.0, -1.0) == pytest.approx(0.11920292, abs=1e-8)
    assert likelihood_score(0.0, 1.0, 0.0) == 0.5
    assert likelihood_score(-1000.0, 1.0, 0.0) == pytest.approx(0.0, abs=1e-300)  # no overflow
    assert likelihood_score(1000.0, 1.0, 0.0) == 1.0


def _labelled_store(root: Path, split: str, tasks: int) -> Path:
    """Random-agent household episodes whose steps carry targets['fav'] = 1 for "examine ...", 0 otherwise."""
    raw = run_rollout(RolloutConfig(**ENV, out=root / f"raw-{split}", split=split, tasks=tasks, samples=2, seed=3,
                                    progress=False)).store.load()
    out = TrajectoryStore(root / f"fav-{split}")
    for t in raw:
        steps = [s.model_copy(update={"targets": {"fav": float(s.action.startswith(FAVOURED))}}) for s in t.steps]
        out.append(t.model_copy(update={"steps": steps}))
    return root / f"fav-{split}"


def test_labelled_steps_leave_out_replayed_prefixes_and_count_unlabelled(tmp_path):
    src = _labelled_store(tmp_path, "train", 2)
    trajs = TrajectoryStore.open(src).load()
    store = TrajectoryStore(tmp_path / "mixed")
    first = trajs[0]
    store.append(first.model_copy(update={"meta": {**(first.meta or {}), "prefix_len": 2}}))
    second = trajs[1]
    unl = [s.model_copy(update={"targets": {}}) if i == 0 else s for i, s in enumerate(second.steps)]
    store.append(second.model_copy(update={"steps": unl}))
    rows, counts = labelled_steps([tmp_path / "mixed"], "fav")
    assert counts == {"replayed": 2, "unlabelled": 1}
    assert len(rows) == len(first.steps) - 2 + len(second.steps) - 1
    assert [i for t, i, _, _ in rows if t.id == first.id] == list(range(2, len(first.steps)))


def test_bad_targets_are_named(tmp_path):
    src = TrajectoryStore.open(_labelled_store(tmp_path, "train", 1)).load()[0]
    bad = TrajectoryStore(tmp_path / "bad")
    steps = [s.model_copy(update={"targets": {"fav": 1.5}}) if i == 1 else s for i, s in enumerate(src.steps)]
    bad.append(src.model_copy(update={"steps": steps}))
    with pytest.raises(ValueError, match=rf"{tmp_path / 'bad'}: trajectory .* step 1: field 'targets.fav' = 1.5"):
        labelled_steps([tmp_path / "bad"], "fav")
    with pytest.raises(ValueError, match="no step has field 'targets.mc-q'"):
        labelled_steps([tmp_path / "bad"], "mc-q")
    with pytest.raises(ValueError, match="not a trajectory store"):
        LikelihoodPRMConfig(policy=str(tmp_path / "bad"), data=[tmp_path / "missing"], output_dir=tmp_path / "o")
    with pytest.raises(ValueError, match="no model folder at"):
        LikelihoodPRMConfig(policy=str(tmp_path / "no-model"), data=[tmp_path / "bad"], output_dir=tmp_path / "o")


class AllAdmissible(Agent):
    """Proposes every admissible action once, in the env's order."""

    name = "all-admissible"

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        return [[Candidate(a, raw_output=a) for a in p.admissible_actions] for p in prefixes]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("likelihood")
    data = _labelled_store(root, "train", 8)
    cfg = LikelihoodPRMConfig(policy=str(tiny_model_dir), prompt=PROMPT, data=[data], target="fav",
                              output_dir=root / "prm", steps=150, batch_size=8, learning_rate=3e-3,
                              warmup_ratio=5 / 150, progress=False)
    summary = train_likelihood_prm(cfg)
    assert summary["examples"] > 0 and summary["skipped"] == {"replayed": 0, "unlabelled": 0}
    return root / "prm", _labelled_store(root, "test", 4)


def _demo_nll(prm: Path, demos: Path, expert: str | None = None) -> float:
    """Mean per-token NLL, under the PRM's LM, of the anchor's actions at their states (`demonstrated_steps`)."""
    agent, total, tokens = ChoiceAgent(prm, prompt=PROMPT), 0.0, 0
    for traj, i, action, _ in demonstrated_steps(demos, expert)[0]:
        prefix = prefix_at(traj, i)
        prefix.info["admissible_actions"] = [action]
        cand = agent.score([prefix])[0][0]
        total, tokens = total - cand.meta["choice_logprob"], tokens + len(cand.token_ids)
    return total / tokens


def test_the_anchor_keeps_the_demonstrated_actions_likely(trained, tmp_path):
    prm, _ = trained
    run_rollout(RolloutConfig(**ENV, out=tmp_path / "demos", split="train", tasks=6, samples=1,
                agent={"kind": "expert"}, progress=False))
    demos = tmp_path / "demos"
    fields = {**json.loads((prm / LIKELIHOOD_FILE).read_text())["config"], "output_dir": tmp_path / "anchored",
              "anchor": demos, "anchor_weight": 1.0, "anchor_batch_size": 3}
    summary = train_likelihood_prm(LikelihoodPRMConfig(**fields))
    episodes = TrajectoryStore.open(demos).load()
    assert summary["anchor_examples"] == sum(len(t.steps) for t in episodes if t.success)
    assert summary["anchor_shown"] == 150 * 3  # 3 demonstrated actions per step, not batch_size 8
    assert summary["skipped"]["anchor_unsuccessful_episodes"] == sum(not t.success for t in episodes)
    # the BCE alone lowers non-"examine" actions everywhere; the anchor holds the expert's up
    anchored, plain = _demo_nll(tmp_path / "anchored", demos), _demo_nll(prm, demos)
    assert anchored < 0.5 * plain, (anchored, plain)
    with pytest.raises(ValueError, match="anchor and anchor_weight go together"):
        LikelihoodPRMConfig(**{**fields, "anchor_weight": 0.0})
    with pytest.raises(ValueError, match="anchor_batch_size: there is no anchor"):
        LikelihoodPRMConfig(**{**fields, "anchor": None, "anchor_weight": 0.0})
    failed = TrajectoryStore(tmp_path / "failed")
    failed.append(episodes[0].model_copy(update={"success": False, "termination": "max_steps", "score": 0.0}))
    with pytest.raises(ValueError, match="no successful episode to anchor on"):
        train_likelihood_prm(LikelihoodPRMConfig(**{**fields, "anchor": tmp_path / "failed",
                                                    "output_dir": tmp_path / "never"}))
    assert not (tmp_path / "never").exists()


def test_anchor_expert_relabels_every_state_of_the_policys_episodes(trained, tmp_path):
    prm, _ = trained
    run_rollout(RolloutConfig(env="household", env_kwargs={**ENV["env_kwargs"], "expert_hints": True},
                              out=tmp_path / "visited", split="train", tasks=6, samples=1, seed=5, progress=False))
    visited = tmp_path / "visited"
    episodes = TrajectoryStore.open(visited).load()
    assert not all(t.success for t in episodes)  # random episodes: unsuccessful ones are kept, not left out
    for kind in ("oracle", "search"):
        steps, left_out = demonstrated_steps(visited, kind)
        assert left_out == 0 and len(steps) == sum(len(t.steps) for t in episodes)
        policy = expert_policy("household", kind)
        assert [a for _, _, a, _ in steps] == [policy(prefix_at(t, i)) for t, i, _, _ in steps]
    oracle = [a for _, _, a, _ in demonstrated_steps(visited, "oracle")[0]]
    assert oracle == [s.info["expert_action"] for t in episodes for s in t.steps]
    assert sum(a != s.action for a, s in zip(oracle, (s for t in episodes for s in t.steps), strict=True)) > 5
    fields = {**json.loads((prm / LIKELIHOOD_FILE).read_text())["config"], "output_dir": tmp_path / "dagger",
              "anchor": visited, "anchor_weight": 1.0, "anchor_expert": "oracle"}
    summary = train_likelihood_prm(LikelihoodPRMConfig(**fields))
    assert summary["anchor_examples"] == len(oracle) and summary["skipped"]["anchor_unsuccessful_episodes"] == 0
    anchored, plain = _demo_nll(tmp_path / "dagger", visited, "oracle"), _demo_nll(prm, visited, "oracle")
    assert anchored < 0.5 * plain, (anchored, plain)
    with pytest.raises(ValueError, match="anchor_expert: there is no anchor"):
        LikelihoodPRMConfig(**{**fields, "anchor": None, "anchor_weight": 0.0})
    run_rollout(RolloutConfig(**ENV, out=tmp_path / "no-hints", split="train", tasks=1, samples=1, progress=False))
    with pytest.raises(ValueError, match=r"no-hints: trajectory .* step 0: anchor_expert 'oracle': .*expert_hints"):
        demonstrated_steps(tmp_path / "no-hints", "oracle")
    with pytest.raises(ValueError, match=rf"{visited}: anchor_expert 'nobody': no expert 'nobody' for env 'household'"):
        demonstrated_steps(visited, "nobody")


def test_training_on_favouring_targets_ranks_those_actions_first_at_unseen_states(trained):
    prm, test = trained
    scorer = PRMRef(prm=prm).open()
    assert isinstance(scorer, LikelihoodScorer)
    states = [prefix_at(t, i) for t in TrajectoryStore.open(test).load() for i in range(len(t.steps))]
    states = [p for p in states if any(a.startswith(FAVOURED) for a in p.admissible_actions)][:20]
    assert len(states) >= 10
    groups = scorer.score_action_groups(states, [p.admissible_actions for p in states])
    top = [p.admissible_actions[max(range(len(g)), key=g.__getitem__)] for p, g in zip(states, groups, strict=True)]
    # untrained: 0 of 20. This fixture is bimodal over training seeds, 11 or 17-20 of 20 (seeds 0-5: the hand-written
    # loop of the previous commit 19, 20, 17, 20, 20, 20; the engine with its schedule 17, 20, 11, 11, 20, 20, and
    # with the old schedule, linear decay from step 0, exactly the hand loop's numbers): seed 0 is asserted
    assert sum(a.startswith(FAVOURED) for a in top) >= 0.85 * len(top), top
    best = BestOfNAgent(AllAdmissible(), scorer, n=1).act(states, 1)
    assert [c[0].action for c in best] == top


def test_scorer_equals_the_policy_loglikelihood_formula_and_agrees_with_itself(trained):
    prm, test = trained
    scorer = LikelihoodScorer(prm)
    meta = json.loads((prm / LIKELIHOOD_FILE).read_text())
    traj = TrajectoryStore.open(test).load()[0]
    per_step = scorer.score_trajectories([traj])[0]
    policy = ChoiceAgent(prm, prompt=PROMPT)
    for i, step in enumerate(traj.steps):
        prefix = prefix_at(traj, i)
        assert scorer.score_actions(prefix, [step.action])[0] == pytest.approx(per_step[i], abs=1e-6)
        prefix.info["admissible_actions"] = [step.action]
        logp = policy.score([prefix])[0][0].meta["choice_logprob"]
        z = meta["beta"] * logp + meta["bias"]
        assert per_step[i] == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-6)
    with pytest.raises(ValueError, match="renders states with the prompt it was trained with"):
        scorer.score_actions(prefix_at(traj, 0), ["look"], {"history": None})


def test_cli_trains_and_names_config_errors(tmp_path, tiny_model_dir):
    data = _labelled_store(tmp_path, "train", 2)
    cfg = {"policy": str(tiny_model_dir), "prompt": PROMPT, "data": [str(data)], "target": "fav",
           "output_dir": str(tmp_path / "prm"), "steps": 3, "batch_size": 4, "progress": False}
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(app, ["prm", "train-likelihood", str(tmp_path / "ok.yaml")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["output_dir"] == str(tmp_path / "prm") and (tmp_path / "prm" / LIKELIHOOD_FILE).is_file()
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**cfg, "beta": -1}))
    res = CliRunner().invoke(app, ["prm", "train-likelihood", str(tmp_path / "bad.yaml")])
    assert res.exit_code != 0 and "beta" in res.output


def test_trajectory_report_takes_a_likelihood_prm(trained):
    prm, test = trained
    report = evaluate_trajectories(PRMRef(prm=prm).open(), TrajectoryStore.open(test).load(), target="fav", n_boot=50)
    assert report["score_at"] == "action"
    assert report["targets"]["auroc"] > 0.9  # the favoured steps score above the others


def test_prm_score_takes_it_on_trajectories_and_on_stepwise_text(trained, tmp_path):
    """On stepwise text it scores the steps as the actions of a `stepwise` episode (as `prm_reward_func` does:
    tests/test_integrations_rewards.py)."""
    from proctor.prm.text_scorer import stepwise_episode

    prm, test = trained
    res = CliRunner().invoke(app, ["prm", "score", str(prm), str(test)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    trajs = TrajectoryStore.open(test).load()
    assert [len(r["scores"]) for r in rows] == [len(t.steps) for t in trajs]
    (tmp_path / "steps.json").write_text(json.dumps([{"prompt": "2+2?", "completions": ["2+2 = 4.", "4"]}]))
    res = CliRunner().invoke(app, ["prm", "score", str(prm), str(tmp_path / "steps.json")])
    assert res.exit_code == 0, res.output
    scores = json.loads(res.stdout.splitlines()[-1])["scores"]
    expected = PRMRef(prm=prm).open().score_trajectories([stepwise_episode("2+2?", ["2+2 = 4.", "4"])])[0]
    assert scores == pytest.approx(expected, rel=1e-5)


def test_one_step_at_lr_1e_6_from_a_bf16_checkpoint_moves_the_weights(tmp_path, bf16_model_dir):
    """Default precision (float32 weights, saved in float32): one AdamW step at lr 1e-6 moves ≥ 90% of the
    LM's weights (the embedding rows of tokens absent from the batch get no gradient and are left out)."""
    from moved_weights import moved_fraction

    data = _labelled_store(tmp_path, "train", 2)
    cfg = LikelihoodPRMConfig(policy=str(bf16_model_dir), prompt=PROMPT, data=[data], target="fav",
                              output_dir=tmp_path / "prm", steps=1, batch_size=4, learning_rate=1e-6,
                              warmup_ratio=0.0, progress=False)  # a 1-step warm-up of `linear` would train at lr 0
    train_likelihood_prm(cfg)
    assert moved_fraction(bf16_model_dir, tmp_path / "prm", skip=("embed_tokens",)) >= 0.9


def test_gradient_checkpointing_trains_the_same_curve(tmp_path, tiny_model_dir):
    data = _labelled_store(tmp_path, "train", 2)
    fields = {"policy": str(tiny_model_dir), "prompt": PROMPT, "data": [data], "target": "fav", "steps": 3,
              "batch_size": 4, "learning_rate": 1e-3, "logging_steps": 1, "progress": False}
    plain = train_likelihood_prm(LikelihoodPRMConfig(**fields, output_dir=tmp_path / "plain"))
    ckpt = train_likelihood_prm(LikelihoodPRMConfig(**fields, output_dir=tmp_path / "ckpt",
                                                    gradient_checkpointing=True))
    assert [r["loss"] for r in ckpt["curve"]] == pytest.approx([r["loss"] for r in plain["curve"]], abs=1e-4)
