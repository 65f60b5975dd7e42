"""The in-process rollout engine: continuous batching, the recorded trajectories, errors, seeds, resume,
and the summary math."""

from __future__ import annotations

import pytest

from proctor.agents import Agent, AgentError, RandomAgent
from proctor.agents.experts import ExpertAgent
from proctor.envs import make
from proctor.envs.registry import EnvSpec
from proctor.rollout import episode_seed, plan, rollout, summarize, wilson_interval
from proctor.store import TrajectoryStore
from proctor.trajectory import Step, Trajectory
from test_rollout_envs import BisectAgent, SeededGuessAgent, secret_of

TASKS = [f"test-{i}" for i in range(5)]


def by_key(store: TrajectoryStore) -> dict[tuple[str, int], Trajectory]:
    trajs = store.load()
    keys = [t.key for t in trajs]
    assert len(keys) == len(set(keys)), "a (task, sample) pair was stored twice"
    return dict(zip(keys, trajs, strict=True))


# -- the math ------------------------------------------------------------------------------------------
def test_wilson_interval_hand_computed():
    # 8/10, z=1.96: center = (0.8 + 0.19208)/1.38416 = 0.716738; half = 1.416021*sqrt(0.025604) = 0.226580
    lo, hi = wilson_interval(8, 10, z=1.96)
    assert lo == pytest.approx(0.490158, abs=1e-5) and hi == pytest.approx(0.943318, abs=1e-5)
    # 0/10: center = 0.19208/1.38416 = 0.138770 = half, so [0, 0.277540]
    lo, hi = wilson_interval(0, 10, z=1.96)
    assert lo == 0.0 and hi == pytest.approx(0.277540, abs=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


def test_summarize_counts_by_hand():
    def traj(i: int, term: str, valid: list[bool]) -> Trajectory:
        steps = [Step(observation="o", action="a", info={"valid": v}) for v in valid]
        return Trajectory(id=str(i), env="guess", task_id=f"t{i}", sample=0, task="", split="test", seed=0, agent="x",
                          steps=steps, success=term == "success", score=1.0 if term == "success" else 0.0,
                          termination=term, error="e" if term.endswith("error") else None)

    s = summarize([traj(0, "success", [True, False]), traj(1, "max_steps", [False, False, True]),
                   traj(2, "env_error", []), traj(3, "success", [True])])
    assert (s.episodes, s.successes, s.success_rate) == (4, 2, 0.5)
    assert s.mean_steps == 6 / 4 and s.steps == 6
    assert s.invalid_action_rate == 3 / 6
    assert s.success_ci95 == wilson_interval(2, 4)
    assert s.terminations == {"success": 2, "failure": 0, "max_steps": 1, "env_error": 1, "agent_error": 0}


def test_episode_seeds_are_deterministic_and_plan_skips_done_pairs():
    assert episode_seed(0, "a", 0) == episode_seed(0, "a", 0)
    seeds = {episode_seed(0, t, k) for t in TASKS for k in range(3)} | {episode_seed(1, "test-0", 0)}
    assert len(seeds) == 16 and all(0 <= s < 2**31 for s in seeds)
    todo = plan(["a", "b"], 2, run_seed=5, done={("a", 1)})
    assert [(w.task_id, w.sample) for w in todo] == [("a", 0), ("b", 0), ("b", 1)]
    assert todo[2].seed == episode_seed(5, "b", 1)
    with pytest.raises(ValueError, match="duplicate"):
        plan(["a", "a"], 1, 0)


# -- the loop --------------------------------------------------------------------------------------------
def test_continuous_batching_keeps_the_batch_full_and_records_steps(tmp_path):
    agent = BisectAgent()
    store = rollout(EnvSpec("guess"), agent, TASKS, tmp_path / "s", samples_per_task=2, batch_size=4, seed=3,
                    progress=False)
    trajs = by_key(store)
    assert set(trajs) == {(t, k) for t in TASKS for k in range(2)}
    total_steps = sum(len(t.steps) for t in trajs.values())
    # one agent call per step for all active envs; a finished env is replaced at once, so the batch only
    # shrinks once the queue of (task, sample) pairs is empty
    assert sum(agent.batch_sizes) == total_steps
    assert agent.batch_sizes[0] == 4 and agent.batch_sizes == sorted(agent.batch_sizes, reverse=True)
    assert len(agent.batch_sizes) < total_steps
    for (task_id, sample), t in trajs.items():
        assert t.seed == episode_seed(3, task_id, sample)
        assert t.success and t.termination == "success" and t.score == 1.0 and t.error is None
        assert t.final_observation == "Correct!" and t.agent == "bisect" and t.split == "test"
        assert t.task == f"Find the number ({task_id})."
        assert t.steps[0].observation == "I picked a number from 0 to 9."
        assert [s.observation for s in t.steps[1:]] == [
            "higher" if int(a.split()[1]) < secret_of(task_id, t.seed) else "lower" for a in t.actions[:-1]]
        assert t.actions[-1] == f"guess {secret_of(task_id, t.seed)}" and len(t.steps) <= 4
        first = t.steps[0]
        assert (first.reason, first.raw_output, first.logprobs) == ("halve the range", "guess 4", [-0.5, -0.25])
        assert first.info["valid"] and first.info["parsed"]
        assert first.info["admissible_actions"] == [f"guess {k}" for k in range(10)]
        assert [s.done for s in t.steps] == [False] * (len(t.steps) - 1) + [True]
        assert set(t.timings) == {"reset_s", "env_s", "agent_s", "wall_s"}


def test_unparsed_actions_are_sent_and_recorded_and_terminations_follow_the_env(tmp_path):
    store = rollout(EnvSpec("guess", {"max_steps": 3}), SeededGuessAgent(), TASKS, tmp_path / "s",
                    samples_per_task=3, batch_size=4, progress=False)
    trajs = store.load()
    unparsed = [s for t in trajs for s in t.steps if not s.info["parsed"]]
    assert unparsed and all(s.action == "hmm" and not s.valid for s in unparsed)
    for t in trajs:
        replies = [s.observation for s in t.steps[1:]] + [t.final_observation]
        assert all(r == "Say `guess <digit>`." for s, r in zip(t.steps, replies, strict=True) if s.action == "hmm")
    for t in trajs:
        assert t.termination == ("success" if t.success else "max_steps")
        assert t.termination == "success" or len(t.steps) == 3
    s = summarize(trajs)
    assert s.invalid_action_rate == len(unparsed) / s.steps
    assert s.terminations["success"] + s.terminations["max_steps"] == 15


def test_done_without_a_win_is_failure_and_oracle_gets_expert_hints(tmp_path):
    quit_store = rollout(EnvSpec("guess"), ExpertAgent("quitter"), TASKS, tmp_path / "q", progress=False)
    for t in quit_store.load():
        assert t.termination == "failure" and not t.success and t.score == 0.0 and len(t.steps) == 1
        assert t.final_observation == f"It was {secret_of(t.task_id, t.seed)}."
    oracle_store = rollout(EnvSpec("guess"), ExpertAgent("oracle"), TASKS, tmp_path / "o", progress=False)
    assert oracle_store.meta["rollout"]["env_kwargs"] == {"expert_hints": True}
    for t in oracle_store.load():
        assert t.success and len(t.steps) == 1 and t.steps[0].info["expert_action"] == t.actions[0]


def test_agent_error_ends_that_batch_and_the_run_goes_on(tmp_path):
    agent = BisectAgent(fail_on=["test-2"])
    tasks = [f"test-{i}" for i in range(6)]
    trajs = by_key(rollout(EnvSpec("guess"), agent, tasks, tmp_path / "s", batch_size=2, progress=False))
    assert set(trajs) == {(t, 0) for t in tasks}
    failed = {k for k, t in trajs.items() if t.termination == "agent_error"}
    assert ("test-2", 0) in failed and len(failed) == 2
    assert all("model failed on ['test-2']" in trajs[k].error for k in failed)
    assert all(t.success for k, t in trajs.items() if k not in failed)


def test_seeds_make_runs_reproducible(tmp_path):
    def actions(out, seed):
        store = rollout(EnvSpec("guess"), SeededGuessAgent(), TASKS, tmp_path / out, samples_per_task=2,
                        batch_size=3, seed=seed, progress=False)
        return {k: (t.seed, t.actions) for k, t in by_key(store).items()}

    assert actions("a", 7) == actions("b", 7)
    assert actions("a", 7) != actions("c", 8)


def test_resume_skips_stored_pairs_and_refuses_a_different_run(tmp_path):
    agent = BisectAgent()
    rollout(EnvSpec("guess"), agent, TASKS[:2], tmp_path / "s", samples_per_task=2, progress=False)
    first_calls = len(agent.batch_sizes)
    store = rollout(EnvSpec("guess"), agent, TASKS, tmp_path / "s", samples_per_task=2, progress=False)
    assert set(by_key(store)) == {(t, k) for t in TASKS for k in range(2)}
    before = len(agent.batch_sizes)
    rollout(EnvSpec("guess"), agent, TASKS, tmp_path / "s", samples_per_task=2, progress=False)
    assert len(agent.batch_sizes) == before > first_calls  # nothing left to do: no agent call
    with pytest.raises(ValueError, match=r"holds the trajectories of another run \(field 'seed' is 0 there and 1 "
                                         r"here\)"):
        rollout(EnvSpec("guess"), agent, TASKS, tmp_path / "s", samples_per_task=2, seed=1, progress=False)


def test_progress_counts_success_and_errors():
    import io

    from proctor.rollout.progress import RolloutProgress

    def traj(term: str) -> Trajectory:
        return Trajectory(id="x", env="guess", task_id="t", sample=0, task="", split="test", seed=0, agent="a",
                          success=term == "success", score=0.0, termination=term,
                          error="boom" if term == "env_error" else None)

    sink = io.StringIO()
    with RolloutProgress(total=4, already_done=1, stream=sink) as bar:
        for term in ("success", "env_error", "failure"):
            bar.episode_done(traj(term))
    assert (bar.episodes, bar.successes, bar.errors) == (3, 1, 1) and bar.success_rate == 1 / 3
    # not a terminal: plain lines (the first at once, then every few seconds, and a final one)
    lines = sink.getvalue().splitlines()
    assert lines[0].startswith("[rollout] 2/4 episodes") and "success 100.0% of 1" in lines[0]
    assert lines[-1].startswith("[rollout] 4/4 episodes") and "success 33.3% of 3, 1 errors (done)" in lines[-1]


def test_a_rollout_shows_its_agent_steps_before_any_episode_ends(tmp_path, capfd):
    """Long first episodes are not silent: the line counts the agent steps, in both engines."""
    import io

    from proctor.rollout.progress import RolloutProgress

    sink = io.StringIO()
    with RolloutProgress(total=2, stream=sink, label="rollout") as bar:
        bar.interval_s = 0.0
        bar.steps_taken(5)
        bar.steps_taken(12)
    lines = sink.getvalue().splitlines()
    assert "0/2 episodes" in lines[0] and "no episode ended yet, 5 steps" in lines[0]
    assert "12 steps" in lines[1]
    tasks = make("household").task_ids("test")[:2]
    for engine in ("lockstep", "async"):
        store = rollout(EnvSpec("household", {"max_steps": 3}), RandomAgent(seed=0), tasks, tmp_path / engine,
                        engine=engine)
        steps = sum(len(t.steps) for t in store.load())
        assert f", {steps} steps (done)" in capfd.readouterr().err, engine


class _FlakyAgent(Agent):
    """Random actions, but every call fails while `broken` is set."""

    name = "flaky"

    def __init__(self) -> None:
        self.broken = True
        self.inner = RandomAgent(seed=0)

    def act(self, prefixes, n=1):
        if self.broken:
            raise AgentError("model server down")
        return self.inner.act(prefixes, n)


def test_retry_failed_reruns_only_errored_pairs_and_the_breaker_stops_a_dead_agent(tmp_path):
    from proctor.rollout import AgentFailing

    agent = _FlakyAgent()
    spec = EnvSpec("household", {"max_steps": 3})
    tasks = EnvSpec("household").make().task_ids("test")[:4]
    with pytest.raises(AgentFailing, match="first 3 calls.*model server down"):
        rollout(spec, agent, tasks, tmp_path / "s", batch_size=1, progress=False)
    failed = TrajectoryStore.open(tmp_path / "s").load()
    assert len(failed) == 3 and {t.termination for t in failed} == {"agent_error"}
    agent.broken = False
    store = rollout(spec, agent, tasks, tmp_path / "s", batch_size=2, progress=False)  # resume: only the 4th
    by_task = {t.task_id: t.termination for t in store}
    assert len(by_task) == 4 and by_task[tasks[3]] != "agent_error"
    assert [by_task[t] for t in tasks[:3]] == ["agent_error"] * 3
    store = rollout(spec, agent, tasks, tmp_path / "s", batch_size=2, progress=False, retry_failed=True)
    trajs = store.load()
    assert len(trajs) == 4 and all(t.termination != "agent_error" for t in trajs)
