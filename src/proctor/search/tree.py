"""Step-level beam search and DVTS over agent trajectories, every candidate executed in its own env copy
(docs/methods.md §8.3; search-and-learn, github.com/huggingface/search-and-learn, `sal/search/beam_search.py`
and `diverse_verifier_tree_search.py`; Snell et al., arXiv 2408.03314).

A node is a live episode (an `Episode`) in its own env slot, with the PRM score of each step it took and their
aggregate v (`proctor.search.aggregate`: last, min, prod, mean). One round, for all live nodes of all running
searches together:

1. each node proposes candidates: B·M at the root, M otherwise (one batched `act` call per count); identical
   actions are merged (with counts);
2. the PRM scores every distinct (state, action), batched across all states; a child's value is
   v = aggregate(parent's step scores + [its score]);
3. every child is executed in its own env copy: `fork` of the parent's slot (an in-process clone, or a replay
   of the action prefix for envs that cannot be copied and for copies in another worker), then `step`;
4. selection. Beam search: finished children are kept; the B best unfinished ones (by v) go on; the search
   ends when B children have finished (or none goes on). DVTS (diverse verifier tree search): the B best root
   children start B independent subtrees, each of which keeps only its best child (greedy on the PRM) and
   ends at its first finished node.

The final pick is the finished node of highest v. Ties (in ranking and pick) go to the earlier-created node,
so a search is a deterministic function of its seed, its policy and its PRM. Each node's policy prefix
carries its own sample number (a hash of the episode's sample and the node's actions), so seeded policies draw
independently in different nodes and identically in identical states.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from proctor.agents.base import Agent, AgentError, Candidate, Prefix
from proctor.envs.registry import EnvSpec, entries
from proctor.episode import Episode, WorkItem, termination_of
from proctor.prm.protocol import StepScorer
from proctor.progress import StageProgress
from proctor.rollout.backends import make_pool
from proctor.rollout.pools import HostedEnvPool
from proctor.search.aggregate import StepAggregation, aggregate
from proctor.search.best_of_n import Merged, chosen, merge_candidates
from proctor.search.budget import Budget
from proctor.seeding import stable_seed
from proctor.store import TrajectoryStore

log = logging.getLogger(__name__)

Selection = Literal["beam", "dvts"]


def node_sample(sample: int, actions: Sequence[str]) -> int:
    """The sample number a node's prefix carries: 31 bits of a stable hash of (sample, actions so far)."""
    return stable_seed("search-node", sample, tuple(actions)) >> 32


def env_copyable(spec: EnvSpec) -> bool:
    """Whether the env's `clone()` deep-copies (else it replays the actions); unknown envs count as replaying."""
    entry = entries().get(spec.name)
    if entry is None:
        return False
    try:
        return bool(getattr(entry.factory(), "copyable", False))
    except ImportError:
        return False


@dataclass
class Node:
    """A live or finished episode of one search (see module docstring)."""

    slot: int | None
    episode: Episode
    scores: list[float]
    value: float
    order: int
    group: int = 0
    termination: str | None = None

    @property
    def actions(self) -> list[str]:
        return [s.action for s in self.episode.steps]


@dataclass
class Search:
    """One (task, sample) being searched: its slots, live nodes, finished nodes and budget."""

    item: WorkItem
    slots: list[int]
    root: Episode | None = None
    active: list[Node] = field(default_factory=list)
    finished: list[Node] = field(default_factory=list)
    free: list[int] = field(default_factory=list)
    budget: Budget = field(default_factory=Budget)
    rounds: int = 0
    created: int = 0
    error: tuple[str, str] | None = None
    started: float = field(default_factory=time.monotonic)

    def new_order(self) -> int:
        self.created += 1
        return self.created


@dataclass
class Child:
    """A candidate expansion of a node: the merged candidate, its score and value, its env slot."""

    search: Search
    parent: Node
    merged: Merged
    siblings: list[Merged]
    value: float
    order: int
    slot: int | None = None
    node: Node | None = None


class TreeSearch:
    """Beam search (`selection="beam"`) or DVTS (`"dvts"`) for many (task, sample) pairs at once, `batch`
    searches in flight, each with B·M env slots of one pool."""

    def __init__(self, spec: EnvSpec, agent: Agent, scorer: StepScorer, *, beams: int, expansions: int,
                 aggregation: StepAggregation = "last", selection: Selection = "beam", states_per_pass: int | None = None,
                 split: str = "test", run_seed: int = 0, name: str = "beam"):
        if beams < 1 or expansions < 1:
            raise ValueError(f"beams and expansions must be >= 1, got {beams} and {expansions}")
        self.spec, self.agent, self.scorer = spec, agent, scorer
        self.beams, self.expansions, self.aggregation, self.selection = beams, expansions, aggregation, selection
        self.states_per_pass = states_per_pass
        self.split, self.run_seed, self.name = split, run_seed, name
        self.copyable = env_copyable(spec)

    # -- driving ----------------------------------------------------------------------------------------
    def run(self, items: Sequence[WorkItem], store: TrajectoryStore, *, batch: int = 4, workers: int = 0,
            backend: str = "local", step_timeout: float | None = 60.0, progress: bool = True) -> None:
        """Search every item, `batch` at a time (continuous batching), appending one trajectory per item."""
        if not items:
            return
        width = self.beams * self.expansions
        batch = max(1, min(batch, len(items)))
        todo = deque(items)
        blocks = [list(range(b * width, (b + 1) * width)) for b in range(batch)]
        with (make_pool(self.spec, batch * width, workers, backend, step_timeout) as pool,
              StageProgress(self.name, len(items), enabled=progress, unit="searches") as bar):
            self.pool, self.store, self.bar = pool, store, bar
            self.wins = self.done = 0
            running: list[Search] = []
            while todo or running:
                while todo and blocks:
                    running.append(Search(todo.popleft(), blocks.pop()))
                self._start([s for s in running if s.root is None])
                self._round([s for s in running if s.active])
                for s in [s for s in running if not s.active]:
                    running.remove(s)
                    self._finish(s)
                    blocks.append(s.slots)

    def _start(self, searches: list[Search]) -> None:
        for s in searches:
            s.free = list(s.slots)
            slot = s.free.pop(0)
            self.pool.reset(slot, s.item.task_id, s.item.seed)
            s.active = [Node(slot, None, [], 0.0, 0)]  # placeholder until the reply
        if not searches:
            return
        replies = self.pool.collect()
        for s in searches:
            node = s.active[0]
            reply = replies[node.slot]
            if not reply.ok:
                s.root = Episode(self.spec.name, s.item, "", "", {}, s.started, reset_s=reply.seconds)
                s.error = ("env_error", f"reset failed: {reply.error}")
                s.active = []
                self._release(s, node.slot)
                continue
            obs, info = reply.value
            s.root = Episode.begin(self.spec.name, s.item, obs, info, reply.seconds)
            s.root.started = s.started
            node.episode = s.root
            try:
                self.agent.reset(s.root.prefix())
            except AgentError as e:
                self._fail(s, "agent_error", f"{type(e).__name__}: {e}")

    # -- one round: propose, score, execute, select ------------------------------------------------------
    def _round(self, searches: list[Search]) -> None:
        if not searches:
            return
        nodes = [(s, n) for s in searches for n in s.active]
        draws = self._propose(nodes)
        live = [(s, n, d) for (s, n), d in zip(nodes, draws, strict=True) if d is not None and s.active]
        if not live:
            return
        groups = [merge_candidates(d) for _, _, d in live]
        prefixes = [self._prefix(s, n) for s, n, _ in live]
        try:
            scores = self.scorer.score_action_groups(prefixes, [[m.action for m in g] for g in groups],
                                                     states_per_pass=self.states_per_pass)
        except (ValueError, RuntimeError) as e:
            for s in {id(s): s for s, _, _ in live}.values():
                self._fail(s, "agent_error", f"PRM scoring failed: {type(e).__name__}: {e}")
            return
        children: dict[int, list[Child]] = {}
        for (s, node, d), group, row in zip(live, groups, scores, strict=True):
            s.budget.drew(d)
            s.budget.prm_calls += len(group)
            for m, score in zip(group, row, strict=True):
                m.score = score
            for m in group:
                value = aggregate([*node.scores, m.score], self.aggregation)
                children.setdefault(id(s), []).append(Child(s, node, m, group, value, s.new_order()))
        by_id = {id(s): s for s in searches}
        self._execute(by_id, children)
        for key, kids in children.items():
            s = by_id[key]
            if s.active:  # not failed meanwhile
                self._select(s, [c for c in kids if c.node is not None])
                s.rounds += 1

    def _prefix(self, s: Search, node: Node) -> Prefix:
        return dataclasses.replace(node.episode.prefix(), sample=node_sample(s.item.sample, node.actions))

    def _propose(self, nodes: list[tuple[Search, Node]]) -> list[list[Candidate] | None]:
        """Candidates of every node: one `act` call per count (B·M at a root, M elsewhere)."""
        out: list[list[Candidate] | None] = [None] * len(nodes)
        by_n: dict[int, list[int]] = {}
        for i, (s, _) in enumerate(nodes):
            by_n.setdefault(self.beams * self.expansions if s.rounds == 0 else self.expansions, []).append(i)
        for n, idx in sorted(by_n.items()):
            prefixes = [self._prefix(*nodes[i]) for i in idx]
            start = time.perf_counter()
            try:
                draws = self.agent.act(prefixes, n)
                if len(draws) != len(prefixes) or any(not d for d in draws):
                    raise AgentError(f"agent returned candidates for {len(draws)} of {len(prefixes)} prefixes "
                                     "(or an empty list for some)")
            except AgentError as e:
                for s in {id(nodes[i][0]): nodes[i][0] for i in idx}.values():
                    self._fail(s, "agent_error", f"{type(e).__name__}: {e}")
                continue
            share = (time.perf_counter() - start) / len(idx)
            for i, d in zip(idx, draws, strict=True):
                nodes[i][1].episode.agent_s += share
                out[i] = d
        return out

    def _execute(self, searches: dict[int, Search], children: dict[int, list[Child]]) -> None:
        """Give every child its own env copy (the parent's slot for its first child, forks for the others),
        then step each with its action."""
        forks: list[Child] = []
        for key, kids in children.items():
            s = searches[key]
            if not s.active:
                continue
            seen: set[int] = set()
            for c in kids:
                if id(c.parent) not in seen:
                    seen.add(id(c.parent))
                    c.slot = c.parent.slot
                else:
                    c.slot = s.free.pop()
                    self.pool.fork(c.parent.slot, c.slot)
                    forks.append(c)
        if forks:
            replies = self.pool.collect()
            for c in forks:
                s = c.search
                s.budget.forks += 1
                if self._replays(c):
                    s.budget.replayed_steps += len(c.parent.episode.steps)
                if not replies[c.slot].ok:
                    s.error = ("env_error", f"fork failed: {replies[c.slot].error}")
                    self._release(s, c.slot)
                    c.slot = None
        stepping = [c for kids in children.values() for c in kids if c.slot is not None]
        for c in stepping:
            self.pool.step(c.slot, c.merged.action)
        replies = self.pool.collect() if stepping else {}
        for c in stepping:
            s = c.search
            s.budget.env_steps += 1
            reply = replies[c.slot]
            if not reply.ok:
                s.error = ("env_error", reply.error)
                self._release(s, c.slot)
                continue
            episode = dataclasses.replace(c.parent.episode, steps=list(c.parent.episode.steps))
            episode.env_s += reply.seconds
            result = reply.value  # a StepResult
            cand = chosen(c.merged, c.siblings, aggregate=c.value)
            episode.record(cand, result)
            c.node = Node(c.slot, episode, [*c.parent.scores, c.merged.score], c.value, c.order, c.parent.group)
            if result.done:
                c.node.termination = termination_of(episode.info)
                self._release(s, c.slot)
                c.node.slot = None

    def _replays(self, c: Child) -> bool:
        if not self.copyable:
            return True
        pool = self.pool
        return isinstance(pool, HostedEnvPool) and pool.worker_of(c.parent.slot) != pool.worker_of(c.slot)

    def _select(self, s: Search, kids: list[Child]) -> None:
        """Keep finished children, and the live ones the selection rule keeps; release the rest's slots."""
        ranked = sorted(kids, key=lambda c: (-c.value, c.order))
        keep: list[Node] = []
        if self.selection == "beam":
            s.finished += [c.node for c in ranked if c.node.termination is not None]
            keep = [c.node for c in ranked if c.node.termination is None][: self.beams]
            if len(s.finished) >= self.beams:
                keep = []
        elif s.rounds == 0:  # DVTS: the B best root children start B subtrees
            for g, c in enumerate(ranked[: self.beams]):
                c.node.group = g
                (s.finished if c.node.termination is not None else keep).append(c.node)
        else:  # DVTS: each subtree keeps its best child; a subtree ends at its first finished node
            for g in sorted({c.node.group for c in ranked}):
                best = next(c.node for c in ranked if c.node.group == g)
                (s.finished if best.termination is not None else keep).append(best)
        kept = {id(n) for n in keep}
        for c in kids:
            if c.node.slot is not None and id(c.node) not in kept:
                self._release(s, c.node.slot)
                c.node.slot = None
        s.active = keep

    # -- ending ------------------------------------------------------------------------------------------
    def _release(self, s: Search, slot: int) -> None:
        self.pool.release(slot)
        s.free.append(slot)

    def _fail(self, s: Search, termination: str, message: str) -> None:
        s.error = (termination, message)
        for n in s.active:
            if n.slot is not None:
                self._release(s, n.slot)
        s.active = []

    def _finish(self, s: Search) -> None:
        """The search's trajectory: the finished node of highest value, or, when none finished, the episode
        so far ending in the error that stopped the search."""
        for slot in s.slots:
            if slot not in s.free:
                self.pool.release(slot)
        info = {"method": self.name, "beams": self.beams, "expansions": self.expansions,
                "aggregation": self.aggregation, "rounds": s.rounds, "finished": len(s.finished)}
        if s.finished:
            best = min(s.finished, key=lambda n: (-n.value, n.order))
            info["value"] = best.value
            traj = best.episode.finish(best.termination, split=self.split, agent=self.agent_name,
                                       run_seed=self.run_seed)
        else:
            termination, message = s.error or ("agent_error", "the search ended with no finished episode")
            traj = s.root.finish(termination, split=self.split, agent=self.agent_name, run_seed=self.run_seed,
                                 error=message)
        traj = traj.model_copy(update={"meta": {**traj.meta, "budget": s.budget.as_dict(), "search": info}})
        self.store.append(traj)
        self.done += 1
        self.wins += traj.success
        self.bar.advance(1, f"success {self.wins / self.done:.1%} of {self.done}")

    @property
    def agent_name(self) -> str:
        return f"{self.name}(B={self.beams}, M={self.expansions}, {self.agent.name})"
