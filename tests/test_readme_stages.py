"""The stage-by-stage block (moved from the README to docs/get-started/stage-by-stage.md) runs as written, at
small sizes, in a fresh folder: the commands are read from that page (so the block cannot drift from what works),
only their sizes are made small (tasks, samples, steps), servers started with `&` run in the background on free
ports, and the PRM config is the one the block names (`examples/stages/prm.yaml`), with fewer steps."""

from __future__ import annotations

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
    assert f'--8<-- "{PRM_YAML}"' in PAGE.read_text(), f"the page no longer shows {PRM_YAML}"
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
        if verb == "rollout":
            agent = tokens[tokens.index("--agent") + 1]
            model_agent = agent in ("hf", "openai")
            self.option(tokens, "--tasks", "1" if model_agent else "3", f"rollout {agent} --tasks")
            self.option(tokens, "--samples", "1" if model_agent else "3", f"rollout {agent} --samples")
            if "--batch" in tokens:
                self.option(tokens, "--batch", "4", "rollout --batch")
            if model_agent:
                self.option(tokens, "--max-steps", "2", f"rollout {agent} --max-steps")
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
    assert cfg["steps"] > 3
    cfg.update(steps=3, batch_size=2)
    return yaml.safe_dump(cfg)


def test_readme_block_parses():
    commands, prm_yaml = readme_blocks()
    verbs = [c[1] if c[1] not in ("prm", "models") else " ".join(c[1:3]) for c in commands]
    assert all(c[0] == "proctor" for c in commands)
    assert verbs[0] == "models tiny" and {"rollout", "targets", "prm train", "prm score", "prm eval"} <= set(verbs)
    cfg = yaml.safe_load(prm_yaml)
    tiny = commands[0][commands[0].index("--out") + 1]
    assert cfg["model"]["backbone"] == tiny  # the backbone prm.yaml names is the folder `models tiny` makes


@pytest.mark.slow
def test_readme_stage_by_stage_block_runs_at_small_sizes(tmp_path, tiny_model_dir):
    commands, prm_yaml = readme_blocks()
    # `models tiny` with the README's sizes reuses a folder built with the same arguments (the session's)
    tiny = commands[0][commands[0].index("--out") + 1]
    shutil.copytree(tiny_model_dir, tmp_path / tiny)
    (tmp_path / PRM_YAML).parent.mkdir(parents=True)
    (tmp_path / PRM_YAML).write_text(small_prm_yaml(prm_yaml))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    small, servers, skipped = Small(), [], []
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
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(30)
    assert {"rollout epsilon --tasks", "rollout epsilon --samples", "rollout --batch", "rollout hf --tasks",
            "serve --port"} <= small.done, small.done
    runs = tmp_path / "runs"
    trajs = TrajectoryStore.open(runs / "r").load()
    assert len(trajs) == 9
    for name in ("hf", "o"):  # a local model, and the same model through `proctor serve`
        model_trajs = TrajectoryStore.open(runs / name).load()
        assert len(model_trajs) == 1 and model_trajs[0].termination != "agent_error", model_trajs[0].error
    labelled = TrajectoryStore.open(runs / "labelled").load()
    assert all("mc-q" in s.targets for t in labelled for s in t.steps)
    assert (runs / "prm" / "prm_config.json").is_file()
    scored = TrajectoryStore.open(runs / "scored").load()
    assert len(scored) == 9 and all(0.0 <= s.scores["prm"] <= 1.0 for t in scored for s in t.steps)
    if skipped:
        pytest.skip(f"ran every command but {skipped}: third-party data not found at {SHARED_DATA}")
