"""Shared test set-up: one torch thread per test process, and the path to ../shared/data."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a hard dependency
    pass

SHARED_DATA = Path(os.environ.get("PROCTOR_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip with a message naming the missing folder."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"third-party data not found at {SHARED_DATA} (see docs/guides/real-envs.md: Data)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Llama (hidden 64, 2 layers) + locally trained tokenizer, built once per test session.

    Load it with `proctor.models.load(tiny_model_dir)` or `HFAgent(tiny_model_dir)`."""
    from proctor.models import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny_model") / "llama", hidden_size=64, layers=2, heads=4,
                      vocab_size=2000)


@pytest.fixture(scope="session")
def problems_file(tmp_path_factory):
    """Three plain-text problems (JSON lines) for the `stepwise` env, with answers."""
    path = tmp_path_factory.mktemp("stepwise") / "problems.jsonl"
    rows = [{"problem": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "7"},
            {"problem": "What is 12 times 11?", "answer": 132},
            {"problem": "A book costs $5. How much do 200 books cost?", "answer": "$1,000", "id": "books"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="session")
def shop_server():
    """The built-in `shop` env served over HTTP with WebShop's protocol (what the `webshop` client talks to)."""
    import uvicorn

    from proctor.envs.shop.server import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(create_app(seed=0), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "shop server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="session")
def bf16_model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model saved in bfloat16, as Llama and Qwen checkpoints ship (the precision tests start here)."""
    from proctor.models.loading import load

    model, tokenizer = load(tiny_model_dir, dtype="bfloat16")
    out = tmp_path_factory.mktemp("tiny_bf16") / "llama"
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def scalar_prm_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A PRM on the tiny backbone with a random scalar head (seed 0): its preferences are arbitrary but fixed."""
    import torch

    from proctor.prm.model import ProcessRewardModel

    torch.manual_seed(0)
    return ProcessRewardModel.build(tiny_model_dir, head="scalar").save_pretrained(
        tmp_path_factory.mktemp("prm") / "prm")


@pytest.fixture(scope="session")
def random_states_store(tmp_path_factory) -> Path:
    """States to train at: 3 household episodes (`small` preset, at most 3 steps) of a random agent."""
    from proctor.rollout import RolloutConfig, run_rollout

    out = tmp_path_factory.mktemp("states") / "states"
    run_rollout(RolloutConfig(env="household", env_kwargs={"preset": "small", "max_steps": 3}, out=out,
                              split="train", tasks=3, agent={"kind": "random"}, progress=False))
    return out
