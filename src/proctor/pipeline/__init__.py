"""The iterated AgentPRM loop (`proctor run CONFIG.yaml`): demonstrations → SFT → [rollouts → targets → PRM →
evaluation → online DPO]×K, with lineage in `manifest.json` and resume at stage granularity."""

from proctor.pipeline.config import PipelineConfig
from proctor.pipeline.run import run_pipeline

__all__ = ["PipelineConfig", "run_pipeline"]
