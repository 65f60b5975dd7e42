"""The config parts that name an env and its tasks, each field declared once: `EnvRef` (`env`, `env_kwargs`,
`env_module`: which env, checked when the config is validated) and `TaskChoice` (`split`, `tasks`: which of its
tasks). Rollout, evaluation, search runs, the online trainers and the pipeline compose them (`proctor.parts`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from proctor.envs.registry import EnvSpec, check_spec, entry, import_env_module
from proctor.parts import Part


class EnvRef(Part):
    """Which env: a registered name, its constructor arguments, and the module that registers it (your own env).
    The module is imported, the env's extra and its arguments checked when the config is validated (nothing is
    built)."""

    env_module: str | None = Field(default=None, description="module imported first, a dotted name or a .py "
                                   "file's path (it registers your own envs)")
    env: str = Field(description="registered env name (`proctor envs`); a missing extra is an error naming it")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, validate_default=True, description="env constructor "
                                       "arguments (checked against the env's own: a misspelt one is an error)")

    @field_validator("env_module")
    @classmethod
    def _env_module(cls, v: str | None) -> str | None:
        if v:
            try:
                import_env_module(v)
            except ImportError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: str) -> str:
        try:
            entry(v).factory()
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        except ImportError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("env_kwargs")
    @classmethod
    def _env_kwargs(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "env" in info.data:
            check_spec(info.data["env"], v)
        return v

    def env_ref(self) -> dict[str, Any]:
        """This part's fields, for another config that takes them (`RolloutConfig(**cfg.env_ref(), ...)`)."""
        return {name: getattr(self, name) for name in EnvRef.model_fields}

    def env_spec(self) -> EnvSpec:
        """The env to build, its module imported (validation imported it in this process; a config sent to another
        process imports it there)."""
        if self.env_module:
            import_env_module(self.env_module)
        return EnvSpec(self.env, dict(self.env_kwargs))


class TaskChoice(Part):
    """Which of the env's tasks: the first N of a split, a list of task ids, or all of them."""

    split: str = Field(default="test", description="the env's task split the tasks come from (e.g. train, test; "
                       "`proctor envs` lists an env's splits)")
    tasks: int | list[str] | None = Field(default=None, description="the first N tasks of the split, a list of "
                                          "task ids, or None: all of them")

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: int | list[str] | None) -> int | list[str] | None:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        if isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("has duplicate task ids")
        return v
