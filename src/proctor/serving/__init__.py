"""`proctor serve`: an OpenAI-compatible HTTP server for any Hugging Face causal LM proctor can load.

The server and the generator are imported on first use, so importing a module of this package (the guards that
the PRM server and the OpenEnv server share) does not import torch."""

from typing import Any

_LAZY = {"create_app": "proctor.serving.app", "Completion": "proctor.serving.generation",
         "GenerationResult": "proctor.serving.generation", "Generator": "proctor.serving.generation",
         "SamplingParams": "proctor.serving.generation"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'proctor.serving' has no attribute {name!r}")


__all__ = ["Completion", "GenerationResult", "Generator", "SamplingParams", "create_app"]
