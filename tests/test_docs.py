"""The docs site and the README: `mkdocs build --strict` passes (any warning fails it: a broken link or anchor, a
page missing from the nav, a snippet whose file is gone), and what strict mode does not see is checked here: the
README's and CONTRIBUTING's links, the repository files the pages name, the README's length and CI markers, the
results pages' records, and the generated reference covering every command and registry entry."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: pages that cite other repositories' files (methods.md) or that other work owns
NOT_CHECKED_FOR_PATHS = {"methods.md", "training.md", "vllm.md", "integrations.md"}
REPO_PATH = re.compile(r"(?<![\w/.-])((?:examples|tests|bench|experiments|scripts|src|docs)/[\w./-]+\.(?:py|yaml|sh|md|png))")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_short_and_keeps_the_ci_blocks():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for marker, command in (("install", "pip install torch==2.13.0 && pip install -e . && proctor quickstart"),
                            ("test", 'pip install -e ".[dev]" && python -m pytest -n 2')):
        # what .ci/run reads: the first line of the code block after the marker
        after = text.split(f"<!-- ci:{marker} -->\n", 1)[1]
        assert after.startswith("```bash\n") and after.splitlines()[1] == command, marker
    assert "](docs/vllm.md)" in text and "](docs/guides/gpus.md)" in text  # the GPU / vLLM guide in one click


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_links_resolve(name):
    text = (ROOT / name).read_text()
    broken = []
    for target in MD_LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # external, or an anchor on the same page
        path = (ROOT / name).parent / target.split("#")[0]
        if not path.exists():
            broken.append(target)
    assert broken == []


def test_pages_name_only_files_that_exist():
    missing = {}
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md",
             *(p for p in DOCS.rglob("*.md") if p.name not in NOT_CHECKED_FOR_PATHS)]
    for page in pages:
        names = {p for p in REPO_PATH.findall(page.read_text()) if "NAME" not in p}
        gone = sorted(p for p in names if not (ROOT / p).exists())
        if gone:
            missing[str(page.relative_to(ROOT))] = gone
    assert missing == {}


def test_results_pages_keep_their_record():
    """One page per experiment, dated, with its machine and the package versions (and, moved from the README,
    the commands and the commit)."""
    pages = sorted((DOCS / "results").glob("*.md"))
    assert len(pages) >= 15
    for page in pages:
        if page.name in ("index.md", "benchmarks.md"):
            continue
        text = page.read_text()
        assert re.match(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md$", page.name), page.name
        assert "Machine" in text and ("Packages" in text or "Versions" in text), page.name
        if "Moved from the README" in text:
            for field in ("**Date:**", "**Commit:**", "**Machine:**", "**Packages:**", "**Commands:**"):
                assert field in text, (page.name, field)


def test_the_generated_reference_covers_the_code():
    import proctor.credit
    import proctor.search  # noqa: F401  (both register their entries)
    from proctor.agents.registry import agent_kinds
    from proctor.credit.registry import methods
    from proctor.rl.trainers import TRAINERS
    from proctor.search.registry import search_methods

    ref = hook()
    cli = ref.cli_page()
    for command in ("proctor run", "proctor quickstart", "proctor rollout", "proctor prm train-likelihood",
                    "proctor train", "proctor models convert"):
        assert f"## `{command}`" in cli, command
    assert "--env-module" in cli and "--dry-run" in cli
    trainers, parts = ref.trainers_page(), ref.parts_page()
    for method, entry in TRAINERS.items():
        config, _ = entry.load()
        assert f"## train {method}" in trainers
        for field in config.model_fields:  # in its own table, or in the table of a part it is composed of
            assert f"| `{field}`" in trainers or f"| `{field}`" in parts, (method, field)
    agents, search, credit = ref.agents_page(), ref.search_page(), ref.credit_page()
    assert all(f"## kind: {k}" in agents for k in agent_kinds())
    assert all(f"## method: {m}" in search for m in search_methods())
    assert all(f"## method: {m}" in credit for m in methods())
    for page in (ref.pipeline_page(), ref.prm_page(), ref.rollout_page()):
        assert "| field | type | default | description |" in page and "## Nested sections" in page
    assert "`cli`" in ref.layers_markdown(ROOT / "pyproject.toml")


def build_site(out: Path) -> str:
    """`mkdocs build --strict` into `out`; its log (a failed build fails the calling test)."""
    for module, extra in (("mkdocs", "docs"), ("material", "docs")):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"{module} is not installed (the '{extra}' extra, in 'dev': pip install -e '.[dev]')")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                          str(ROOT / "mkdocs.yml"), "--site-dir", str(out)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=False, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert not re.search(r"^WARNING", log, re.MULTILINE), log[-4000:]
    return log


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    build_site(site)
    for page in ("index.html", "reference/cli/index.html", "reference/config/trainers/index.html",
                 "results/2026-11-28-quickstart-engine/index.html", "vllm/index.html", "search/search_index.json"):
        assert (site / page).is_file(), page
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "proctor rollout" in cli and "--env-module" in cli
    trainers = (site / "reference" / "config" / "trainers" / "index.html").read_text()
    assert "ArCHerConfig" in trainers and "critic_learning_rate" in trainers
    # the snippets are included (a results page shows its examples/ file, not the include line)
    ppo = (site / "results" / "2026-11-24-rl-trainers-household" / "index.html").read_text()
    assert "critic_learning_rate" in ppo and "--8&lt;--" not in ppo and "--8<--" not in ppo


def test_help_texts_are_current():
    """`proctor run --help` shows every stage of the loop (rich markup ate a bracketed list once) and points at an
    example, not a source module; `proctor quickstart --help` says how the household π1 is made now."""
    from typer.testing import CliRunner

    from proctor.cli import app

    runner = CliRunner()
    run = runner.invoke(app, ["run", "--help"], terminal_width=300)
    assert run.exit_code == 0
    text = " ".join(run.output.split())
    assert "rollouts → targets → PRM → evaluations" in text and "× K" in text and "SFT → ×" not in text
    assert "examples/pipeline/quickstart-household.yaml" in text and "proctor.pipeline.config" not in text
    quick = " ".join(runner.invoke(app, ["quickstart", "--help"], terminal_width=300).output.split())
    assert "best-of-8 distilled into Q0's LM" in quick and "online DPO π1" not in quick
