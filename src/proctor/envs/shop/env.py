"""`ShopEnv`: WebShop's page flow, action grammar and reward over a generated catalog, in pure Python."""

from __future__ import annotations

from typing import Any

from proctor.envs.base import SPLITS, StepOutcome, TextEnv
from proctor.envs.registry import register
from proctor.envs.shop.catalog import Goal, make_catalog, make_goal
from proctor.envs.shop.flow import transition
from proctor.envs.shop.pages import (
    BACK,
    BUY,
    NEXT,
    PREV,
    Element,
    Session,
    clickables,
    render,
    search,
    to_text,
)

DEFAULT_NUM_TASKS: dict[str, int] = {"test": 200, "valid": 200, "train": 1000}


def split_ranges(num_tasks: dict[str, int]) -> dict[str, range]:
    """Goal indices per split, laid out as WebShop does: test first (fixed_0...), then valid, then train."""
    out, start = {}, 0
    for split in ("test", "valid", "train"):
        out[split] = range(start, start + num_tasks[split])
        start += num_tasks[split]
    return out


def goal_index(task_id: str) -> int:
    prefix, _, index = task_id.partition("_")
    if prefix != "fixed" or not index.isdigit():
        raise ValueError(f"shop: task id must be 'fixed_<i>' (a WebShop session), got {task_id!r}")
    return int(index)


class ShopWorld:
    """The catalog and goals of one seed, and the pages of a session (shared by the env and the server)."""

    def __init__(self, seed: int = 0, per_family: int = 12):
        self.seed = seed
        self.products = {p.asin: p for p in make_catalog(seed, per_family)}
        self._catalog = list(self.products.values())

    def goal(self, index: int) -> Goal:
        return make_goal(self._catalog, self.seed, index)

    def page(self, goal: Goal, session: Session) -> list[Element]:
        return render(self.products, goal, session)

    def expert_action(self, goal: Goal, s: Session, page: list[Element]) -> str:
        """The oracle: search the goal's query, open the target (paging on), pick its options, buy."""
        if s.page == "init":
            return f"search[{goal.query}]"
        if s.page == "item_sub" or (s.page == "item" and s.asin != goal.asin):
            return f"click[{PREV}]"
        if s.page == "search":
            if any(e.kind == "product" and e.text == goal.asin for e in page):
                return f"click[{goal.asin}]"
            if any(e.text == NEXT for e in page):
                return f"click[{NEXT}]"
            return f"click[{BACK}]"
        for kind, value in goal.options.items():
            if s.options.get(kind) != value:
                return f"click[{value}]"
        return f"click[{BUY}]"


@register("shop", "WebShop's page flow, actions and reward over a generated catalog (built-in, offline)")
class ShopEnv(TextEnv):
    """WebShop's page flow, actions and reward over a generated catalog (built-in, offline)."""

    def __init__(self, seed: int = 0, num_tasks: dict[str, int] | None = None, max_steps: int = 10,
                 expert_hints: bool = False):
        counts = {**DEFAULT_NUM_TASKS, **(num_tasks or {})}
        if set(counts) != set(SPLITS):
            raise ValueError(f"shop: num_tasks splits must be {SPLITS}, got {sorted(counts)}")
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, seed=seed, num_tasks=counts)
        self.world = ShopWorld(seed)
        self.ranges = split_ranges(counts)
        self.goal: Goal | None = None
        self.session = Session()
        self.elements: list[Element] = []

    def task_ids(self, split: str) -> list[str]:
        if split not in self.ranges:
            raise ValueError(f"shop: unknown split {split!r}; known: {SPLITS}")
        return [f"fixed_{i}" for i in self.ranges[split]]

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        """The episode is determined by the task id (the goal); the reset seed does not change it."""
        self.goal = self.world.goal(goal_index(task_id))
        self.session = Session()
        self.elements = self.world.page(self.goal, self.session)
        return to_text(self.elements), {"task": self.goal.instruction, "page": "init"}

    def _step(self, action: str) -> StepOutcome:
        assert self.goal is not None
        nxt = transition(self.session, action, self.elements)
        if nxt is None:
            return StepOutcome(to_text(self.elements), 0.0, terminated=False, valid=False,
                               info={"page": self.session.page})
        if nxt.page == "end":
            from proctor.envs.shop.reward import shop_reward

            nxt.reward = round(shop_reward(self.goal, self.world.products[nxt.asin], nxt.options), 4)  # as shown
        self.session = nxt
        self.elements = self.world.page(self.goal, nxt)
        done = nxt.page == "end"
        info: dict[str, Any] = {"page": nxt.page}
        if done:
            info["score"] = nxt.reward
        return StepOutcome(to_text(self.elements), nxt.reward if done else 0.0, terminated=done,
                           won=done and nxt.reward >= 1.0, info=info)

    def admissible_actions(self) -> list[str]:
        """On the search page any `search[...]` is valid; the list offers the instruction as the query."""
        if self.session.page == "init":
            assert self.goal is not None
            return [f"search[{self.goal.instruction}]"]
        return [f"click[{c}]" for c in clickables(self.elements)]

    def expert_action(self) -> str:
        assert self.goal is not None
        return self.world.expert_action(self.goal, self.session, self.elements)

    def search(self, query: str) -> list[str]:
        """ASINs a query finds, best first (for inspection and tests)."""
        return [p.asin for p in search(list(self.world.products.values()), query)]
