"""The async rollout engine: same episodes as lockstep, bounded concurrency that really overlaps, agent and
env errors that end only their own episode, worker processes, the breaker, and how the engine is chosen."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from proctor.agents import Agent, AgentError, RandomAgent
from proctor.agents.base import Candidate, Prefix
from proctor.agents.experts import ExpertAgent
from proctor.envs.registry import EnvSpec
from proctor.rollout import AgentFailing, RolloutConfig, rollout
from proctor.rollout.engine import choose_engine
from proctor.rollout.starts import completion_items
from proctor.store import TrajectoryStore
from proctor.trajectory import Trajectory
from test_rollout_envs import BisectAgent

HOUSEHOLD = EnvSpec("household", {"max_steps": 4})


def household_tasks(n: int) -> list[str]:
    env = HOUSEHOLD.make()
    try:
        return env.task_ids("test")[:n]
    finally:
        env.close()


def comparable(store: TrajectoryStore) -> dict[tuple[str, int], dict]:
    """Each stored episode by (task, sample), without what differs between two runs (id, timings)."""
    out = {}
    for t in store.load():
        assert t.key not in out, "a (task, sample) pair was stored twice"
        out[t.key] = t.model_dump(exclude={"id", "timings"})
    return out


class CountingAgent(Agent):
    """Random actions after `delay` s; records the most `act` calls that were running at once."""

    name = "counting"

    def __init__(self, delay: float = 0.03, served: bool = False, concurrency: int | None = None):
        self.inner = RandomAgent(seed=0)
        self.delay = delay
        self.served = served
        if concurrency is not None:
            self.concurrency = concurrency
        self.lock = threading.Lock()
        self.running = self.max_running = self.calls = 0
        self.batch_sizes: list[int] = []

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.max_running = max(self.max_running, self.running)
            self.batch_sizes.append(len(prefixes))
        try:
            time.sleep(self.delay)
            return self.inner.act(prefixes, n)
        finally:
            with self.lock:
                self.running -= 1


class FailingAgent(Agent):
    """Random actions, but `AgentError` at step `at_step` of the tasks in `fail_on` (while `broken`)."""

    name = "failing"

    def __init__(self, fail_on: Sequence[str], at_step: int = 1):
        self.inner = RandomAgent(seed=0)
        self.fail_on, self.at_step, self.broken = set(fail_on), at_step, True
        self.lock = threading.Lock()
        self.failed: list[str] = []

    def act(self, prefixes: Sequence[Prefix], n: int = 1) -> list[list[Candidate]]:
        for p in prefixes:
            if self.broken and p.task_id in self.fail_on and p.step_index == self.at_step:
                with self.lock:
                    self.failed.append(p.task_id)
                raise AgentError(f"server answered HTTP 503 for {p.task_id}")
        return self.inner.act(prefixes, n)


# -- same episodes as lockstep -----------------------------------------------------------------------------
@pytest.mark.parametrize("agent", [RandomAgent(seed=3), ExpertAgent("oracle")], ids=["random", "oracle"])
def test_async_stores_the_same_episodes_as_lockstep(tmp_path, agent):
    tasks = household_tasks(5)
    lock = rollout(HOUSEHOLD, agent, tasks, tmp_path / "lock", samples_per_task=2, batch_size=3, seed=7,
                   progress=False, engine="lockstep")
    asyn = rollout(HOUSEHOLD, agent, tasks, tmp_path / "async", samples_per_task=2, seed=7, progress=False,
                   engine="async", concurrency=4)
    assert lock.meta["rollout"] == asyn.meta["rollout"]  # the engine is no part of the run identity
    want = comparable(lock)
    assert len(want) == 10 and comparable(asyn) == want
    assert any(len(t["steps"]) > 1 for t in want.values())


def test_async_completions_from_stored_prefixes_equal_lockstep(tmp_path):
    sources = rollout(HOUSEHOLD, RandomAgent(seed=1), household_tasks(2), tmp_path / "src", seed=2,
                      progress=False, engine="lockstep").load()
    items = completion_items(sources, "states", 2, seed=2)
    assert any(it.start for it in items)
    kwargs = {"seed": 2, "progress": False, "start_from": "src"}
    lock = rollout(HOUSEHOLD, RandomAgent(seed=5), items, tmp_path / "lock", batch_size=4, engine="lockstep",
                   **kwargs)
    asyn = rollout(HOUSEHOLD, RandomAgent(seed=5), items, tmp_path / "async", engine="async", concurrency=3,
                   **kwargs)
    assert comparable(asyn) == comparable(lock) and len(comparable(lock)) == len(items)


# -- concurrency --------------------------------------------------------------------------------------------
def test_concurrency_bounds_the_agent_calls_in_flight_and_they_overlap(tmp_path):
    agent = CountingAgent(delay=0.05)
    store = rollout(HOUSEHOLD, agent, household_tasks(4), tmp_path / "s", samples_per_task=3, progress=False,
                    engine="async", concurrency=4)
    assert len(store.load()) == 12
    assert agent.max_running == 4  # four episodes' calls overlapped, never more
    assert set(agent.batch_sizes) == {1}  # one prefix per call: each episode on its own
    assert agent.calls == sum(len(t.steps) for t in store.load())


def test_auto_engine_follows_the_agent(tmp_path):
    served = CountingAgent(delay=0.05, served=True, concurrency=3)
    assert choose_engine(served) == ("async", 3)
    rollout(HOUSEHOLD, served, household_tasks(3), tmp_path / "served", samples_per_task=2, progress=False)
    assert served.max_running == 3 and set(served.batch_sizes) == {1}

    local = CountingAgent(delay=0.0)
    assert choose_engine(local, batch_size=5) == ("lockstep", 5)
    rollout(HOUSEHOLD, local, household_tasks(3), tmp_path / "local", samples_per_task=2, batch_size=6,
            progress=False)
    assert local.max_running == 1 and local.batch_sizes[0] == 6  # lockstep: one call for the whole batch

    assert choose_engine(CountingAgent(served=True)) == ("async", 32)
    assert choose_engine(local, "async", batch_size=5) == ("async", 5)
    assert choose_engine(served, "async", concurrency=2) == ("async", 2)
    assert choose_engine(served, "lockstep", batch_size=4) == ("lockstep", 4)
    with pytest.raises(ValueError, match="unknown rollout engine"):
        choose_engine(local, "fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="concurrency"):
        choose_engine(local, "async", concurrency=0)


def test_rollout_config_takes_engine_and_concurrency(tmp_path):
    cfg = RolloutConfig(env="household", out=tmp_path / "x", engine="async", concurrency=16)
    assert (cfg.engine, cfg.concurrency) == ("async", 16)
    assert RolloutConfig(env="household", out=tmp_path / "x").engine == "auto"
    with pytest.raises(ValueError, match="engine"):
        RolloutConfig(env="household", out=tmp_path / "x", engine="fast")
    with pytest.raises(ValueError, match="concurrency"):
        RolloutConfig(env="household", out=tmp_path / "x", concurrency=0)


# -- errors ---------------------------------------------------------------------------------------------------
def test_an_agent_error_ends_only_its_episode_and_retry_failed_completes_it(tmp_path):
    tasks = household_tasks(6)
    agent = FailingAgent(fail_on=tasks[2:4], at_step=1)
    store = rollout(HOUSEHOLD, agent, tasks, tmp_path / "s", samples_per_task=2, progress=False, engine="async",
                    concurrency=3)
    trajs = {t.key: t for t in store.load()}
    assert len(trajs) == 12
    failed = {k for k, t in trajs.items() if t.termination == "agent_error"}
    assert failed == {(t, k) for t in tasks[2:4] for k in range(2)}  # only the episodes whose call failed
    for k in failed:
        assert "HTTP 503" in trajs[k].error and len(trajs[k].steps) == 1  # ended at the failing step
    assert all(t.error is None for k, t in trajs.items() if k not in failed)

    agent.broken = False
    rollout(HOUSEHOLD, agent, tasks, tmp_path / "s", samples_per_task=2, progress=False, engine="async",
            concurrency=3)  # resume: nothing to do, errors kept
    assert {t.key for t in TrajectoryStore.open(tmp_path / "s") if t.termination == "agent_error"} == failed
    store = rollout(HOUSEHOLD, agent, tasks, tmp_path / "s", samples_per_task=2, progress=False, engine="async",
                    concurrency=3, retry_failed=True)
    trajs = {t.key: t for t in store.load()}
    assert len(trajs) == 12 and all(t.termination != "agent_error" for t in trajs.values())
    reference = rollout(HOUSEHOLD, agent, tasks, tmp_path / "ref", samples_per_task=2, progress=False,
                        engine="lockstep")
    assert comparable(store) == comparable(reference)  # the retried episodes are the ones a clean run makes


def test_the_breaker_stops_a_dead_agent_and_keeps_the_finished_episodes(tmp_path):
    tasks = household_tasks(8)
    agent = FailingAgent(fail_on=tasks, at_step=0)
    with pytest.raises(AgentFailing, match="first 3 calls.*HTTP 503"):
        rollout(HOUSEHOLD, agent, tasks, tmp_path / "s", progress=False, engine="async", concurrency=2)
    stored = TrajectoryStore.open(tmp_path / "s").load()
    assert 3 <= len(stored) < 8 and {t.termination for t in stored} == {"agent_error"}
    assert len(stored) == len(agent.failed)  # every failed call's episode was stored, nothing else
    agent.broken = False
    store = rollout(HOUSEHOLD, agent, tasks, tmp_path / "s", progress=False, engine="async", concurrency=2,
                    retry_failed=True)
    assert len(store.load()) == 8 and all(t.termination != "agent_error" for t in store.load())


def test_an_unexpected_agent_exception_stops_the_run_and_is_raised(tmp_path):
    class Broken(RandomAgent):
        def act(self, prefixes, n=1):
            if prefixes[0].task_id == tasks[1]:
                raise ValueError("a bug in the agent")
            return super().act(prefixes, n)

    tasks = household_tasks(4)
    with pytest.raises(ValueError, match="a bug in the agent"):
        rollout(HOUSEHOLD, Broken(), tasks, tmp_path / "s", progress=False, engine="async", concurrency=2)
    stored = TrajectoryStore.open(tmp_path / "s").load()
    assert tasks[1] not in {t.task_id for t in stored} and len(stored) < 4
    store = rollout(HOUSEHOLD, RandomAgent(), tasks, tmp_path / "s", progress=False, engine="async", concurrency=2)
    assert len(store.load()) == 4  # the store was released, and the resumed run did the rest


def test_an_env_exception_ends_only_its_episode_in_process(tmp_path):
    tasks = [f"test-{i}" for i in range(6)]
    spec = EnvSpec("guess", {"crash_on": ["test-2"]})
    store = rollout(spec, BisectAgent(), tasks, tmp_path / "s", progress=False, engine="async", concurrency=3)
    trajs: dict[str, Trajectory] = {t.task_id: t for t in store.load()}
    assert sorted(trajs) == tasks
    assert trajs["test-2"].termination == "env_error" and "RuntimeError: boom on test-2" in trajs["test-2"].error
    assert all(t.success for k, t in trajs.items() if k != "test-2")


# -- worker processes -------------------------------------------------------------------------------------------


def test_workers_a_slow_env_does_not_hold_up_the_other_worker(tmp_path):
    # test-0's every step takes 0.5 s; the other slot, on the other worker, plays all the rest meanwhile (the
    # lockstep engine would make it wait for test-0's step at every one of its own steps)
    tasks = [f"test-{i}" for i in range(8)]
    spec = EnvSpec("guess", {"hang_on": ["test-0"], "hang_s": 0.5})
    store = rollout(spec, BisectAgent(), tasks, tmp_path / "s", workers=2, step_timeout=30.0, progress=False,
                    engine="async", concurrency=2)
    order = [t.task_id for t in store]
    assert sorted(order) == tasks and order[-1] == "test-0"
    assert all(t.success for t in store)
    lock = rollout(spec, BisectAgent(), tasks, tmp_path / "lock", workers=2, step_timeout=30.0, progress=False,
                   engine="lockstep", batch_size=2)
    assert comparable(store) == comparable(lock)


# -- the CLI ------------------------------------------------------------------------------------------------------
def test_cli_engine_and_concurrency_options(tmp_path):
    import subprocess

    from test_rollout_cli import cli_env, proctor_rollout

    out = tmp_path / "run"
    proc = subprocess.run(proctor_rollout(out, "--agent", "expert", "--tasks", "4", "--samples", "2", "--engine",
                                          "async", "--concurrency", "3"),
                          env=cli_env(), check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    trajs = TrajectoryStore.open(out).load()
    assert len(trajs) == 8 and all(t.success for t in trajs)
    proc = subprocess.run(proctor_rollout(tmp_path / "bad", "--agent", "expert", "--engine", "fast"),
                          env=cli_env(), check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "engine" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.extra
@pytest.mark.slow
def test_ray_actors_host_the_async_slots(tmp_path):
    ray = pytest.importorskip("ray", reason="the Ray backend needs the 'ray' extra: pip install 'proctor[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        tasks = [f"test-{i}" for i in range(6)]
        store = rollout(EnvSpec("guess", {"crash_on": ["test-1"]}), BisectAgent(), tasks, tmp_path / "s", workers=2,
                        backend="ray", progress=False, engine="async", concurrency=4)
        trajs = {t.task_id: t for t in store.load()}
        assert sorted(trajs) == tasks and trajs["test-1"].termination == "env_error"
        assert all(t.success for k, t in trajs.items() if k != "test-1")
    finally:
        ray.shutdown()
