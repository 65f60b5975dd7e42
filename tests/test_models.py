"""proctor.models: the tiny model builder (tokenizer trained locally, cache) and `load()`."""

from __future__ import annotations

import json

import pytest

from proctor.models import STEP_MARKER, add_step_marker, build_tiny, load, load_tokenizer
from proctor.models.tiny import IM_END, IM_START, MARKER_FILE, SPECIAL_TOKENS

CORPUS = [
    "You arrive at drawer 2. The drawer 2 is closed.\nACTION: open drawer 2",
    "Thought: the key may be in the cabinet.\nAction: go to cabinet 1",
    "<think>17 + 25 = 42</think><action>answer 42</action> Is it an animal? yes",
] * 30
SAMPLE = (f"{IM_START}user\nTask: put a clean mug in the cabinet. héllo 日本 {STEP_MARKER} 42 + 7"
          f"{IM_END}\n{IM_START}assistant\nREASON: none\nACTION: go to cabinet 1{IM_END}")


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def small_dir(request, tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp(request.param) / "m", arch=request.param, hidden_size=32,
                      layers=1, heads=2, vocab_size=400, corpus=CORPUS)


def test_ids_are_identical_after_reload(small_dir):
    """A locally trained tokenizer keeps its ids through save → load (qwen2's AutoTokenizer would not)."""
    from tokenizers import Tokenizer

    trained = Tokenizer.from_file(str(small_dir / "tokenizer.json"))
    model, tok = load(small_dir)
    expected = trained.encode(SAMPLE, add_special_tokens=False).ids
    assert tok.encode(SAMPLE, add_special_tokens=False) == expected
    assert tok.decode(expected) == SAMPLE
    assert model.config.model_type == json.loads((small_dir / MARKER_FILE).read_text())["args"]["arch"]
    assert model.get_input_embeddings().weight.shape[0] == len(tok)


def test_special_tokens_are_single_tokens_and_roles_are_set(small_dir):
    tok = load_tokenizer(small_dir)
    for special in SPECIAL_TOKENS:
        assert len(tok.encode(special, add_special_tokens=False)) == 1, special
    assert (tok.bos_token, tok.eos_token, tok.pad_token, tok.unk_token) == ("<s>", IM_END, "<pad>", "<unk>")
    assert tok.padding_side == "left"
    assert add_step_marker(tok) == tok.convert_tokens_to_ids(STEP_MARKER)


def test_chat_template_renders_chatml(small_dir):
    tok = load_tokenizer(small_dir)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
            {"role": "assistant", "content": "A"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n")
    assert tok.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True).endswith(
        "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n")


def test_model_runs_and_is_deterministic_in_seed(tmp_path):
    import torch

    a = build_tiny(tmp_path / "a", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS, seed=5)
    b = build_tiny(tmp_path / "b", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS, seed=5)
    c = build_tiny(tmp_path / "c", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS, seed=6)
    (ma, tok), (mb, _), (mc, _) = load(a), load(b), load(c)
    ids = torch.tensor([tok.encode(SAMPLE, add_special_tokens=False)])
    la, lb, lc = (m(ids).logits for m in (ma, mb, mc))
    assert la.shape == (1, ids.shape[1], len(tok))
    assert torch.equal(la, lb) and not torch.allclose(la, lc)


def test_same_arguments_reuse_the_folder_and_other_arguments_are_refused_or_replaced(tmp_path):
    from typer.testing import CliRunner

    from proctor.cli import app
    from proctor.outputs import CHOICES

    out = build_tiny(tmp_path / "m", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    again = build_tiny(tmp_path / "m", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS)
    assert again == out and (out / "model.safetensors").stat().st_mtime_ns == stamp
    res = CliRunner().invoke(app, ["models", "tiny", "--out", str(out), "--hidden-size", "64"])
    assert res.exit_code == 2 and res.output.strip().splitlines() == [
        f"error: {out}: holds the tiny model of another run (field 'hidden_size' is 32 there and 64 here); {CHOICES}"]
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # left as it was
    first = json.loads((out / MARKER_FILE).read_text())["args"]
    with pytest.raises(ValueError, match=r"holds the tiny model of another run \(field 'corpus' is \"sha256:"):
        build_tiny(tmp_path / "m", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS[:3])
    build_tiny(tmp_path / "m", hidden_size=32, layers=1, heads=2, vocab_size=400, corpus=CORPUS[:3], overwrite=True)
    rebuilt = json.loads((out / MARKER_FILE).read_text())["args"]
    assert rebuilt == {**first, "corpus": rebuilt["corpus"]} and rebuilt["corpus"] != first["corpus"]
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        build_tiny(tmp_path / "busy", corpus=CORPUS)
    assert not list(tmp_path.glob(".*tmp-*"))  # no half-built folder left behind


def test_bad_build_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown arch"):
        build_tiny(tmp_path / "x", arch="gpt9", corpus=CORPUS)
    with pytest.raises(ValueError, match="divisible"):
        build_tiny(tmp_path / "x", hidden_size=30, heads=4, corpus=CORPUS)
    with pytest.raises(ValueError, match="non-empty iterable of strings"):
        build_tiny(tmp_path / "x", corpus=[])


def test_default_tiny_model_is_trained_on_the_builtin_envs(tiny_model_dir):
    """The session fixture: a tokenizer trained on env text encodes env text in few tokens."""
    marker = json.loads((tiny_model_dir / MARKER_FILE).read_text())
    assert marker["args"]["corpus"].startswith("default")
    tok = load_tokenizer(tiny_model_dir)
    text = "You arrive at countertop 1. On the countertop 1, you see a toiletpaper 1."
    assert len(tok.encode(text, add_special_tokens=False)) <= len(text) / 3


def test_default_size_is_a_few_million_parameters(tmp_path):
    from transformers import AutoModelForCausalLM

    from proctor.models.tiny import tiny_config, train_tokenizer

    tok = train_tokenizer(CORPUS, 400)
    config = tiny_config("llama", tok, hidden_size=256, layers=4, heads=4, intermediate_size=None,
                         max_position_embeddings=8192)
    n = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    # 4 layers x (4·256² attention + 3·256·1024 MLP + 2·256 norms) + 256 final norm + 400·256 tied embedding
    assert n == 4 * (4 * 256 * 256 + 3 * 256 * 1024 + 2 * 256) + 256 + len(tok) * 256


def test_load_errors_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="proctor models tiny"):
        load(tmp_path / "missing" / "model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load(tmp_path / "empty")
    with pytest.raises(OSError, match="offline"):
        load("proctor-no-such-org/no-such-model")  # offline (HF_HUB_OFFLINE=1 in conftest)


def test_a_missing_local_path_is_reported_at_once_not_tried_on_the_hub(tmp_path, monkeypatch):
    """`runs/tiny` under an existing `runs/` is a local path: no hub request (which retries for ~60 s)."""
    import time

    from proctor.models import load_tokenizer

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for offline in ("", "1"):
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        t0 = time.monotonic()
        with pytest.raises(FileNotFoundError, match="the path does not exist") as err:
            load_tokenizer("runs/tiny")
        assert time.monotonic() - t0 < 1.0
        assert ("offline" in str(err.value)) == bool(offline)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="offline .*no copy in the Hugging Face cache"):
        load_tokenizer("proctor-no-such-org/no-such-model")


def test_load_dtype_and_pad_token(small_dir):
    import torch

    model, tok = load(small_dir, dtype="bfloat16", device="cpu")
    assert model.dtype == torch.bfloat16 and not model.training
    assert model.generation_config.pad_token_id == tok.pad_token_id
    with pytest.raises(ValueError, match="unknown dtype"):
        load(small_dir, dtype="float12")


def test_cli_models_tiny_builds_a_loadable_folder(tmp_path):
    from typer.testing import CliRunner

    from proctor.cli import app

    out = tmp_path / "tiny"
    args = ["models", "tiny", "--out", str(out), "--hidden-size", "32", "--layers", "1", "--heads", "2",
            "--vocab-size", "300"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["model"] == str(out)
    model, tok = load(out)
    assert model.config.hidden_size == 32 and tok.convert_tokens_to_ids("<|step|>") != tok.unk_token_id
    bad = CliRunner().invoke(app, ["models", "tiny", "--out", str(tmp_path / "x"), "--hidden-size", "33"])
    assert bad.exit_code == 2 and "not divisible" in bad.output
