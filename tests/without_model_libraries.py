"""Run a snippet in a fresh interpreter where torch, transformers, peft and accelerate cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKER = """
import sys

class NoModelLibraries:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "peft", "accelerate"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, NoModelLibraries())
"""


def run_without_model_libraries(snippet: str) -> subprocess.CompletedProcess:
    """`snippet` (dedented) run after the import blocker; its stdout, stderr and return code."""
    script = BLOCKER + textwrap.dedent(snippet)
    return subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
