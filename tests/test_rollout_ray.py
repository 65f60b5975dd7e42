"""The Ray backend on a local 2-CPU Ray cluster: env workers as actors, a crashing and a hung env."""

from __future__ import annotations

import pytest

from proctor.envs.registry import EnvSpec
from proctor.rollout import rollout
from test_rollout_envs import BisectAgent, secret_of

pytestmark = [pytest.mark.extra, pytest.mark.slow]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="the Ray backend needs the 'ray' extra: pip install 'proctor[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_actors_roll_out_and_survive_a_crashing_and_a_hung_env(ray_cluster, tmp_path):
    tasks = [f"test-{i}" for i in range(6)]
    spec = EnvSpec("guess", {"crash_on": ["test-1"], "hang_on": ["test-2"], "hang_s": 60.0})
    store = rollout(spec, BisectAgent(), tasks, tmp_path / "s", batch_size=4, workers=2, backend="ray",
                    step_timeout=5.0, progress=False, backend_options={"cpus_per_worker": 1})
    trajs = {t.task_id: t for t in store.load()}
    assert sorted(trajs) == tasks
    assert trajs["test-1"].termination == "env_error" and "RuntimeError: boom on test-1" in trajs["test-1"].error
    assert trajs["test-2"].termination == "env_error" and "timed out after 5 s" in trajs["test-2"].error
    for k in ("test-0", "test-3", "test-4", "test-5"):
        t = trajs[k]
        assert t.success and t.actions[-1] == f"guess {secret_of(k, t.seed)}"
