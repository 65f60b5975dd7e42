"""The stage-by-stage block (docs/get-started/stage-by-stage.md) runs as written, at small sizes, in a fresh folder:
the commands are read from that page (so the block cannot drift from what works), only their sizes are made small
(tasks, samples, steps, the PRM's optimizer steps), servers started with `&` run in the background on free ports, and
the configs are the ones the block names (`examples/stages/candidates.yaml` as shipped, `examples/stages/prm.yaml`
with fewer steps). What the page claims is checked at that size: the PRM trained on the candidate pairs ranks the
candidates at held-out test states above chance, as `prm eval` reports it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import SHARED_DATA
from proctor.store import TrajectoryStore

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "get-started" / "stage-by-stage.md"
PRM_YAML = "examples/stages/prm.yaml"
CANDIDATES_YAML = "examples/stages/candidates.yaml"
#: the small sizes: the train and test tasks of the epsilon rollouts (candidates at 4 states of each), and the
#: PRM's optimizer steps; at these sizes (about 40 s of CPU for the PRM) it orders 73% of the 110 held-out pairs
#: (95% Wilson interval 64-80%)
TRAIN_TASKS, TEST_TASKS, PRM_STEPS = 40, 12, 30
PROCTOR = Path(sys.executable).parent / "proctor"


def readme_blocks() -> tuple[list[list[str]], str]:
    """The commands of the stage-by-stage bash block (continuations joined, comments dropped, as token lists)
    and the text of the PRM config it trains (`proctor prm train examples/stages/prm.yaml`)."""
    bash = re.search(r"```bash\n(.*?)```", PAGE.read_text(), re.DOTALL)
    assert bash, f"{PAGE.relative_to(ROOT)}: the stage-by-stage block is gone"
    commands = []
    for line in bash.group(1).replace("\\\n", " ").splitlines():
        tokens = shlex.split(line, comments=True)
        if tokens:
            commands.append(tokens)
    assert ["proctor", "prm", "train", PRM_YAML] in commands, f"the block no longer trains {PRM_YAML}"
    for shown in (PRM_YAML, CANDIDATES_YAML):
        assert f'--8<-- "{shown}"' in PAGE.read_text(), f"the page no longer shows {shown}"
    return commands, (ROOT / PRM_YAML).read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {log.read_text()[-2000:]}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"server on port {port} did not start: {log.read_text()[-2000:]}")


class Small:
    """Rewrites a README command to small sizes, recording each rewrite (so a README change that drops a
    rewritten option fails the test instead of silently running at full size)."""

    def __init__(self) -> None:
        self.ports = {"serve": free_port(), "prm serve": free_port()}
        self.done: set[str] = set()

    def option(self, tokens: list[str], name: str, value: str, tag: str) -> None:
        if name in tokens:
            tokens[tokens.index(name) + 1] = value
            self.done.add(tag)
        else:
            tokens += [name, value]

    def __call__(self, tokens: list[str]) -> list[str]:
        tokens = list(tokens)
        verb = " ".join(tokens[1:3]) if tokens[1] in ("prm", "models") else tokens[1]
        if verb == "rollout" and "--config" in tokens:
            pass  # candidate completions: the config's states and candidates, from stores already small
        elif verb == "rollout":
            agent = tokens[tokens.index("--agent") + 1]
            split = tokens[tokens.index("--split") + 1]
            if agent in ("hf", "openai"):
                self.option(tokens, "--tasks", "1", f"rollout {agent} --tasks")
                self.option(tokens, "--max-steps", "2", f"rollout {agent} --max-steps")
            else:
                tasks = TRAIN_TASKS if split == "train" else TEST_TASKS
                self.option(tokens, "--tasks", str(tasks), f"rollout {agent} {split} --tasks")
            tokens = [t.replace(":8000/", f":{self.ports['serve']}/") for t in tokens]
        elif verb == "serve":
            self.option(tokens, "--port", str(self.ports["serve"]), "serve --port")
        elif verb == "prm serve":
            self.option(tokens, "--port", str(self.ports["prm serve"]), "prm serve --port")
        elif verb == "prm eval":
            self.option(tokens, "--limit", "4", "prm eval --limit")
            tokens = [t.replace("../shared/data", str(SHARED_DATA)) for t in tokens]
        return [str(PROCTOR), *tokens[1:]]


def small_prm_yaml(text: str) -> str:
    cfg = yaml.safe_load(text)
    assert cfg["steps"] > PRM_STEPS
    cfg.update(steps=PRM_STEPS)
    return yaml.safe_dump(cfg)


def test_readme_block_parses():
    commands, prm_yaml = readme_blocks()
    verbs = [c[1] if c[1] not in ("prm", "models") else " ".join(c[1:3]) for c in commands]
    assert all(c[0] == "proctor" for c in commands)
    assert verbs[0] == "models tiny" and {"rollout", "targets", "prm train", "prm score", "prm eval"} <= set(verbs)
    cfg = yaml.safe_load(prm_yaml)
    tiny = commands[0][commands[0].index("--out") + 1]
    assert cfg["model"]["backbone"] == tiny  # the backbone prm.yaml names is the folder `models tiny` makes
    candidates = yaml.safe_load((ROOT / CANDIDATES_YAML).read_text())
    rollouts = [c for c in commands if c[1] == "rollout" and "--config" not in c]
    assert candidates["start"]["source"] == rollouts[0][rollouts[0].index("--out") + 1]  # the first rollout's states
    pairs = next(c for c in commands if c[1] == "targets")
    assert cfg["data"]["train"] == f"{pairs[pairs.index('--out') + 1]}/targets.parquet"
    assert cfg["data"]["trajectories"] == [candidates["out"]]


@pytest.mark.slow
def test_readme_stage_by_stage_block_runs_at_small_sizes(tmp_path, tiny_model_dir):
    commands, prm_yaml = readme_blocks()
    # `models tiny` with the page's sizes reuses a folder built with the same arguments (the session's)
    tiny = commands[0][commands[0].index("--out") + 1]
    shutil.copytree(tiny_model_dir, tmp_path / tiny)
    (tmp_path / PRM_YAML).parent.mkdir(parents=True)
    (tmp_path / PRM_YAML).write_text(small_prm_yaml(prm_yaml))
    shutil.copy(ROOT / CANDIDATES_YAML, tmp_path / CANDIDATES_YAML)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    small, servers, skipped, printed = Small(), [], [], {}
    try:
        for tokens in commands:
            background = tokens[-1] == "&"
            cmd = small(tokens[:-1] if background else tokens)
            if "--processbench" in cmd and not SHARED_DATA.is_dir():
                skipped.append(shlex.join(tokens))  # needs ../shared/data (docs/guides/real-envs.md: data)
                continue
            if background:
                log = tmp_path / f"server{len(servers)}.log"
                proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
                servers.append(proc)
                wait_for_port(int(cmd[cmd.index("--port") + 1]), proc, log)
                continue
            res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                                 check=False)
            assert res.returncode == 0, f"{shlex.join(tokens)}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
            printed[shlex.join(tokens)] = res.stdout
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(30)
    assert {"rollout epsilon train --tasks", "rollout epsilon test --tasks", "rollout hf --tasks",
            "rollout openai --tasks", "serve --port"} <= small.done, small.done
    runs = tmp_path / "runs"
    trajs = TrajectoryStore.open(runs / "r").load()
    assert len(trajs) == TRAIN_TASKS and all("expert_action" in s.info for t in trajs for s in t.steps)
    for name in ("hf", "o"):  # a local model, and the same model through `proctor serve`
        model_trajs = TrajectoryStore.open(runs / name).load()
        assert len(model_trajs) == 1 and model_trajs[0].termination != "agent_error", model_trajs[0].error
    assert (runs / "prm" / "prm_config.json").is_file()
    scored = TrajectoryStore.open(runs / "scored").load()
    assert len(scored) == TRAIN_TASKS and all("prm" in s.scores for t in scored for s in t.steps)
    # the claim: at held-out test states the PRM orders the candidates (mostly the expert's action against random
    # ones) above chance; `prm eval`'s own report, its 95% Wilson interval above 0.5
    report = next(json.loads(out) for cmd, out in printed.items() if "--candidates" in cmd)
    ranking = report["ranking"]
    assert ranking["tasks"] == TEST_TASKS and ranking["prm"]["pairs"] >= 50, ranking
    assert ranking["better_is_expert"] > 0.7, ranking  # the pairs are mostly the expert's action against another
    assert ranking["prm"]["ci95_wilson"][0] > 0.5, ranking["prm"]
    if skipped:
        pytest.skip(f"ran every command but {skipped}: third-party data not found at {SHARED_DATA}")
