"""`proctor serve`: an OpenAI-compatible HTTP server for any Hugging Face causal LM proctor can load."""

from proctor.serving.app import create_app
from proctor.serving.generation import Completion, GenerationResult, Generator, SamplingParams

__all__ = ["Completion", "GenerationResult", "Generator", "SamplingParams", "create_app"]
