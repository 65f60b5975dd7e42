"""`proctor prm serve`: a FastAPI app that scores trajectories or step lists with a PRM (127.0.0.1 default).

POST /score  {"trajectories": [<Trajectory JSON>, ...]}            → {"scores": [[s_0, s_1, ...], ...]}
             {"examples": [{"prompt": str, "steps": [str, ...]}]}  → same
GET  /health → {"status": "ok", "head": ..., "backbone": ...}
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.prm.data import StepwiseExample
from proctor.prm.scoring import PRMScorer
from proctor.trajectory import Trajectory


class ScoreItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str
    steps: list[str] = Field(min_length=1)


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trajectories: list[Trajectory] | None = None
    examples: list[ScoreItem] | None = None

    @model_validator(mode="after")
    def _one(self) -> ScoreRequest:
        if (self.trajectories is None) == (self.examples is None):
            raise ValueError("give exactly one of 'trajectories' or 'examples'")
        return self


def make_app(scorer: PRMScorer) -> FastAPI:
    """The scoring app around a loaded scorer."""
    app = FastAPI(title="proctor PRM")

    @app.get("/health")
    def health() -> dict[str, Any]:
        spec = scorer.prm.spec
        return {"status": "ok", "head": spec.head, "backbone": spec.backbone}

    @app.post("/score")
    def score(req: ScoreRequest) -> dict[str, Any]:
        try:
            if req.trajectories is not None:
                return {"scores": scorer.score_trajectories(req.trajectories)}
            examples = [
                StepwiseExample(prompt=e.prompt, completions=e.steps, labels=[None] * len(e.steps))
                for e in req.examples
            ]
            return {"scores": scorer.score_examples(examples)}
        except ValueError as e:
            raise HTTPException(status_code=422, detail=str(e)) from None

    return app
