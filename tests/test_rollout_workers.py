"""Envs in worker processes: a crashing, a hung and a dying env each end only their own episode with
env_error; the worker is replaced and the envs it also hosted go on (re-created by replay)."""

from __future__ import annotations

import pytest

from proctor.envs.registry import EnvSpec
from proctor.rollout import ProcessEnvPool, rollout, summarize
from test_rollout_envs import BisectAgent, secret_of


@pytest.mark.parametrize("engine", ["lockstep", "async"])
def test_crashing_hanging_and_dying_envs_in_workers_end_only_their_episodes(tmp_path, engine):
    tasks = [f"test-{i}" for i in range(8)]
    spec = EnvSpec("guess", {"crash_on": ["test-1"], "hang_on": ["test-4"], "die_on": ["test-6"], "hang_s": 60.0})
    store = rollout(spec, BisectAgent(), tasks, tmp_path / "s", samples_per_task=1, batch_size=4, workers=2,
                    step_timeout=3.0, progress=False, engine=engine, concurrency=4)
    trajs = {t.task_id: t for t in store.load()}
    assert sorted(trajs) == sorted(tasks)
    errors = {k: t.error for k, t in trajs.items() if t.termination == "env_error"}
    assert set(errors) == {"test-1", "test-4", "test-6"}
    assert "RuntimeError: boom on test-1" in errors["test-1"]
    assert "timed out after 3 s" in errors["test-4"] and "task 'test-4'" in errors["test-4"]
    assert "worker process died (exit code 3)" in errors["test-6"]
    for k, t in trajs.items():
        if k not in errors:  # including the envs that shared a worker with the hung and the dead one
            assert t.success and t.actions[-1] == f"guess {secret_of(k, t.seed)}" and len(t.steps) <= 4
    assert summarize(trajs.values()).terminations["env_error"] == 3


def test_a_replaced_worker_recreates_its_other_envs_by_replay():
    spec = EnvSpec("guess", {"hang_on": ["test-1"], "hang_s": 60.0})
    with ProcessEnvPool(spec, n_slots=2, workers=1, step_timeout=2.0) as pool:
        pool.reset(0, "test-0", 11)
        pool.reset(1, "test-1", 12)
        assert all(r.ok for r in pool.collect().values())
        secret = secret_of("test-0", 11)
        wrong = (secret + 1) % 10
        pool.step(0, f"guess {wrong}")
        assert pool.collect()[0].value.observation == ("lower" if wrong > secret else "higher")
        pool.step(0, f"guess {wrong}")  # answered before slot 1 hangs the worker
        pool.step(1, "guess 0")
        replies = pool.collect()
        assert replies[0].ok and not replies[1].ok and "timed out" in replies[1].error
        assert pool.replacements == 1
        pool.step(0, f"guess {secret}")  # slot 0's env was replayed on the new worker: same secret, 2 actions
        result = pool.collect()[0].value  # a StepResult, pickled from the worker process
        assert (result.observation, result.reward, result.terminated, result.won) == ("Correct!", 1.0, True, True)
        assert result.admissible_actions is None and result.info == {"score": 1.0}


def test_make_pool_picks_the_pool_and_its_earlier_import_path_warns():
    """`make_pool` lives apart from the pools the worker modules build on (no import circle); the old path
    `proctor.rollout.pools.make_pool` still imports, naming the new one."""
    from proctor.rollout import InProcessEnvPool, make_pool

    spec = EnvSpec("guess", {})
    assert isinstance(make_pool(spec, 2), InProcessEnvPool)
    with pytest.raises(ValueError, match="unknown rollout backend 'slurm'"):
        make_pool(spec, 2, workers=1, backend="slurm")
    with pytest.warns(DeprecationWarning, match="proctor.rollout.pools.make_pool is now proctor.rollout.backends"):
        from proctor.rollout.pools import make_pool as old
    assert old is make_pool
