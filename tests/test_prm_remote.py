"""A PRM head behind `proctor prm serve` (real uvicorn on 127.0.0.1, a tiny PRM) scores through
`RemotePRMScorer` exactly as the local scorer does, many states per request, and the groups of concurrent
requests are scored together (`GroupBatcher`)."""

from __future__ import annotations

import threading

import pytest

from proctor.agents.registry import ServerRef
from proctor.envs import make
from proctor.prm.protocol import StepScorer
from proctor.prm.ref import PRMRef
from proctor.prm.remote import RemotePRMScorer
from proctor.prm.scoring import PRMScorer, ScoringError
from proctor.prm.server import make_app
from proctor.prompts.turns import Prefix
from proctor.serving.background import BackgroundServer


@pytest.fixture(scope="module")
def local(scalar_prm_dir) -> PRMScorer:
    return PRMRef(prm=scalar_prm_dir, prm_batch=4, device="cpu", dtype="float32").open()


@pytest.fixture(scope="module")
def server(local):
    with BackgroundServer(make_app(local)) as srv:
        yield srv


@pytest.fixture(scope="module")
def states() -> tuple[list[Prefix], list[list[str]]]:
    env = make("household")
    prefixes, actions = [], []
    for i, task in enumerate(env.task_ids("test")[:6]):
        obs, info = env.reset(task, seed=i)
        prefixes.append(Prefix(env="household", task_id=task, task=info["task"], observation=obs, seed=i))
        actions.append(env.admissible_actions()[:4])
    return prefixes, actions


def test_remote_scores_equal_local_ones(server, local, states, scalar_prm_dir):
    prefixes, actions = states
    remote = PRMRef(prm=scalar_prm_dir, prm_server=ServerRef(base_url=server.url)).open()
    assert isinstance(remote, RemotePRMScorer) and remote.head == local.prm.spec.head
    assert isinstance(remote, StepScorer) and isinstance(local, StepScorer)
    got = remote.score_action_groups(prefixes, actions, states_per_pass=4)  # 2 requests: 4 + 2 states
    want = local.score_action_groups(prefixes, actions)
    for a, b in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    assert remote.score_actions(prefixes[0], actions[0]) == pytest.approx(want[0], abs=1e-5)
    with pytest.raises(ValueError, match="cfg=None"):
        remote.score_action_groups(prefixes, actions, cfg=local_prompt())
    # stepwise text through /score, batch_size examples per request
    from proctor.prm.text_scorer import text_example

    examples = [text_example(f"What is {i} + {i}?", [f"{i} + {i} = {2 * i}.", f"The answer is {2 * i}."])
                for i in range(20)]
    text = remote.score_examples(examples)
    assert [len(s) for s in text] == [2] * 20
    for a, b in zip(text, local.score_examples(examples), strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def local_prompt():
    from proctor.prompts.render import PromptConfig

    return PromptConfig()


def test_concurrent_requests_are_scored_in_one_batch(server, local, states):
    prefixes, actions = states
    batcher = server._server.config.app.state.batcher
    batcher.batch_sizes.clear()
    remote = RemotePRMScorer(server.url)
    results: dict[int, list[list[float]]] = {}
    barrier = threading.Barrier(6)

    def client(i: int) -> None:
        barrier.wait()
        results[i] = remote.score_action_groups(prefixes[i:i + 1], actions[i:i + 1])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = local.score_action_groups(prefixes, actions)
    for i in range(6):
        assert results[i][0] == pytest.approx(want[i], abs=1e-5)
    assert sum(batcher.batch_sizes) == 6 and max(batcher.batch_sizes) >= 2  # requests shared a scoring call


def test_an_unreachable_server_is_one_clear_error():
    with pytest.raises(ScoringError, match="could not reach http://127.0.0.1:9/health"):
        RemotePRMScorer("http://127.0.0.1:9", max_retries=0)


def test_every_scorer_class_has_the_step_scorer_methods_with_its_parameters():
    import inspect

    from proctor.prm.likelihood import LikelihoodScorer
    from proctor.prm.text_scorer import TextStepScorer

    for cls in (PRMScorer, TextStepScorer, LikelihoodScorer, RemotePRMScorer):
        for name in ("score_action_groups", "score_actions", "score_trajectories"):
            want = list(inspect.signature(getattr(StepScorer, name)).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == want, (cls.__name__, name)
