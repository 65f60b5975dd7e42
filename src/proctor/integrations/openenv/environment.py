"""A proctor env as one OpenEnv session's `Environment` (`ProctorEnvironment`), and what the sessions of one server
share (`EnvService`: the env's splits and tasks, their order, the PRM)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from proctor.envs.base import TextEnv
from proctor.envs.registry import EnvSpec
from proctor.episode import Episode, termination_of
from proctor.integrations.common import TaskOrder, end_reason, finish_episode, start_episode, step_episode
from proctor.integrations.openenv.config import ServeEnvConfig
from proctor.integrations.openenv.schema import ProctorAction, ProctorObservation, ProctorState, bad_action
from proctor.serving.guards import GuardError, internal_error

log = logging.getLogger(__name__)


class EnvService:
    """What every session of one server shares: the config, the env's splits and tasks, their order, the PRM."""

    def __init__(self, cfg: ServeEnvConfig):
        self.cfg = cfg
        self.spec = EnvSpec(cfg.env, dict(cfg.env_kwargs))
        probe = build_env(self.spec)
        try:
            self.splits = tuple(probe.splits())
            if cfg.split not in self.splits:
                raise ValueError(f"{cfg.env}: unknown split {cfg.split!r}; it has {', '.join(self.splits)}")
            self.tasks = {s: probe.task_ids(s) for s in self.splits}
        finally:
            probe.close()
        self.known = {s: set(ids) for s, ids in self.tasks.items()}
        self.orders = {s: TaskOrder(cfg.env, s, ids) for s, ids in self.tasks.items()}
        self.prm = cfg.prm_handle()


def build_env(spec: EnvSpec) -> TextEnv:
    """`spec.make()`, its failures (unknown env, bad arguments, missing data) as one-line ValueErrors."""
    try:
        return spec.make()
    except KeyError as e:
        raise ValueError(str(e.args[0]) if e.args else repr(e)) from None
    except (TypeError, ValueError, OSError, ImportError) as e:
        raise ValueError(f"cannot build env {spec.name!r} with {spec.kwargs}: {e}") from None


@contextmanager
def internal_errors(what: str) -> Iterator[None]:
    """An env or PRM failure inside the block as a 500 `GuardError` that names only a request id (the server log
    has the exception), so that no traceback text reaches a client."""
    try:
        yield
    except GuardError:
        raise
    except Exception as e:  # noqa: BLE001 - logged with its traceback, answered as one line
        _, message = internal_error(log, what, e)
        raise GuardError(500, message, "internal_error") from None


class ProctorEnvironment(Environment[ProctorAction, ProctorObservation, ProctorState]):
    """One session's env (docs/integrations.md); its proctor env is built at the first reset, so the sessions
    OpenEnv opens for `/state`, `/metadata` and `/schema` cost nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, service: EnvService):
        super().__init__()
        self._service = service
        self._env: TextEnv | None = None
        self._episode: Episode | None = None
        self._split = service.cfg.split
        self._state = ProctorState(env=service.cfg.env)

    # -- OpenEnv's interface ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              split: str | None = None, **kwargs: Any) -> ProctorObservation:
        """Start an episode of `task_id` (None: the next task of `split`) with env seed `seed`."""
        svc = self._service
        if kwargs:
            raise GuardError(400, f"unknown reset argument(s) {', '.join(sorted(kwargs))}; reset takes task_id, "
                                  "split, seed and episode_id", "bad_reset")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise GuardError(400, f"seed must be an integer >= 0, got {seed!r}", "bad_reset")
        if split is not None and split not in svc.splits:
            raise GuardError(400, f"{svc.cfg.env}: unknown split {split!r}; it has {', '.join(svc.splits)}",
                             "unknown_split")
        if task_id is None:
            split = split or svc.cfg.split
            try:
                task_id = svc.orders[split].next()
            except ValueError as e:
                raise GuardError(404, str(e), "unknown_task") from None
        else:
            if not isinstance(task_id, str):
                raise GuardError(400, f"task_id must be a string, got {type(task_id).__name__}", "bad_reset")
            searched = [split] if split is not None else [svc.cfg.split, *(s for s in svc.splits
                                                                           if s != svc.cfg.split)]
            split = next((s for s in searched if task_id in svc.known[s]), None)
            if split is None:
                where = f"split {searched[0]!r}" if len(searched) == 1 else "any split"
                raise GuardError(404, f"{svc.cfg.env}: unknown task {task_id!r} in {where}", "unknown_task")
        env = self._proctor_env()
        self._episode = None  # a failed reset leaves no episode to step in
        with internal_errors("reset"):
            self._episode = start_episode(env, task_id, seed, run_seed=svc.cfg.run_seed)
        self._split = split
        self._state = ProctorState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, env=svc.cfg.env,
                                   split=split, task_id=task_id, seed=self._episode.item.seed, done=False)
        return self._observation(None, None)

    def step(self, action: ProctorAction, timeout_s: float | None = None, **kwargs: Any) -> ProctorObservation:
        """Carry out `action.command`; the reward is the env's, or the PRM's score of this step."""
        env, episode, cfg = self._env, self._episode, self._service.cfg
        command = action.command.strip()
        if len(command) > cfg.max_action_chars:
            raise bad_action(f"'command' has {len(command)} characters; this server's limit is "
                              f"{cfg.max_action_chars}")
        if env is None or episode is None:
            raise GuardError(409, "no episode is running in this session: call reset first (OpenEnv's HTTP /step "
                                  "gets a fresh env per request; play episodes over the WebSocket /ws, as "
                                  "OpenEnv's EnvClient does)", "no_episode")
        if env.done:
            raise GuardError(409, f"the episode is over ({end_reason(episode.info, env.max_steps)} after "
                                  f"{len(episode.steps)} steps): call reset to start another", "episode_over")
        with internal_errors("step"):
            result = step_episode(env, episode, command)
        reward, done = result.reward, result.done
        q = None
        if self._service.prm is not None:
            traj = finish_episode(env, episode, split=self._split, agent="openenv", run_seed=cfg.run_seed)
            with internal_errors("PRM scoring"):
                q = self._service.prm.score_trajectories([traj], cfg.prm_prompt)[0][-1]
            episode.steps[-1].scores["prm"] = q
        self._state.step_count = len(episode.steps)
        self._state.done = done
        return self._observation(reward, q)

    @property
    def state(self) -> ProctorState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        from proctor import __version__

        cfg = self._service.cfg
        reward = "the PRM's score of each step" if self._service.prm is not None else "the env's step reward"
        return EnvironmentMetadata(name=f"proctor/{cfg.env}", version=__version__, author="proctor",
                                   description=f"proctor's {cfg.env!r} text environment; action "
                                               f"{{\"command\": \"...\"}}; reward: {reward}")

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env, self._episode = None, None

    # -- proctor's side -----------------------------------------------------------------------------------
    @property
    def episode(self) -> Episode | None:
        """The running (or last) episode, as proctor's rollout engine records it."""
        return self._episode

    def _proctor_env(self) -> TextEnv:
        if self._env is None:
            with internal_errors("building the env"):
                self._env = build_env(self._service.spec)
        return self._env

    def _observation(self, reward: float | None, q: float | None) -> ProctorObservation:
        env, episode = self._env, self._episode
        assert env is not None and episode is not None
        info = episode.info
        termination = termination_of(info) if env.done else None
        return ProctorObservation(
            text=episode.observation, task=episode.task, task_id=episode.item.task_id,
            admissible_actions=info.get("admissible_actions"), step=len(episode.steps), env_reward=reward,
            prm_score=q, valid=bool(info.get("valid", True)), won=bool(info.get("won")),
            score=float(info.get("score", 0.0)), truncated=bool(info.get("truncated")), termination=termination,
            expert_action=info.get("expert_action"), done=env.done, reward=q if q is not None else reward)
