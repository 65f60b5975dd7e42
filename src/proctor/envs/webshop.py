"""Client of a running WebShop server (Yao et al., 2022), speaking the protocol ReAct and ArCHer use.

A task is a session `fixed_<i>` (WebShop's goal i; test = the first 500 goals, valid the next 1000, train
the rest, as WebShop splits them). The client keeps where the session is, builds the page URL
(`/search_results/...`, `/item_page/...`, `/done/...`), reads the HTML into a text observation
(`proctor.envs.shop.pages`), and on Buy Now reads the score WebShop shows (0-1, `won` at 1). Actions:
`search[query]` on the search page, `click[button]` for a clickable of the page; 10 steps by default.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from proctor.envs.base import SPLITS, EnvError, StepOutcome, TextEnv
from proctor.envs.shop.env import goal_index, split_ranges
from proctor.envs.shop.flow import transition
from proctor.envs.shop.pages import SCORE_LABEL, Element, Session, clickables, parse_html, to_text

DEFAULT_NUM_TASKS: dict[str, int] = {"test": 500, "valid": 1000, "train": 10587}


def page_url(base_url: str, session_id: str, s: Session) -> str:
    """The URL of the page `s` is on (WebShop's routes; options as a dict literal)."""
    q = lambda x: quote(str(x), safe="")
    opts = q(repr(dict(s.options)))
    base = base_url.rstrip("/")
    if s.page == "init":
        return f"{base}/{q(session_id)}"
    if s.page == "search":
        return f"{base}/search_results/{q(session_id)}/{q(s.query)}/{s.page_num}"
    if s.page == "item":
        return f"{base}/item_page/{q(session_id)}/{q(s.asin)}/{q(s.query)}/{s.page_num}/{opts}"
    if s.page == "item_sub":
        return f"{base}/item_sub_page/{q(session_id)}/{q(s.asin)}/{q(s.query)}/{s.page_num}/{q(s.subpage)}/{opts}"
    return f"{base}/done/{q(session_id)}/{q(s.asin)}/{opts}"


def read_score(elements: list[Element]) -> float:
    """The number after "Your score (min 0.0, max 1.0)" on WebShop's done page."""
    texts = [e.text for e in elements]
    if SCORE_LABEL not in texts or texts.index(SCORE_LABEL) + 1 >= len(texts):
        raise EnvError(f"webshop: the done page shows no score ({SCORE_LABEL!r} missing)")
    value = texts[texts.index(SCORE_LABEL) + 1]
    try:
        return float(value)
    except ValueError as e:
        raise EnvError(f"webshop: the done page's score is not a number: {value!r}") from e


class WebShopHTTPEnv(TextEnv):
    """A WebShop server over HTTP (sessions fixed_<i>; search[...] / click[...]; reward on Buy Now)."""

    name: ClassVar[str] = "webshop"
    copyable: ClassVar[bool] = False  # holds an HTTP client: clone() replays

    def __init__(self, base_url: str = "http://127.0.0.1:3000", num_tasks: dict[str, int] | None = None,
                 max_steps: int = 10, timeout: float = 30.0, expert_hints: bool = False):
        counts = {**DEFAULT_NUM_TASKS, **(num_tasks or {})}
        if set(counts) != set(SPLITS):
            raise ValueError(f"webshop: num_tasks splits must be {SPLITS}, got {sorted(counts)}")
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, base_url=base_url, num_tasks=counts,
                         timeout=timeout)
        self.base_url = base_url
        self.ranges = split_ranges(counts)
        self.client = httpx.Client(timeout=timeout)
        self.session_id = ""
        self.session = Session()
        self.elements: list[Element] = []

    def task_ids(self, split: str) -> list[str]:
        if split not in self.ranges:
            raise ValueError(f"webshop: unknown split {split!r}; known: {SPLITS}")
        return [f"fixed_{i}" for i in self.ranges[split]]

    def _fetch(self, s: Session) -> list[Element]:
        url = page_url(self.base_url, self.session_id, s)
        try:
            response = self.client.get(url)
            response.raise_for_status()
        except httpx.HTTPError as e:
            raise EnvError(f"webshop: GET {url} failed: {e}") from e
        return parse_html(response.text, s.options)

    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        """The episode is the session's goal; the seed does not change it."""
        goal_index(task_id)
        self.session_id, self.session = task_id, Session()
        self.elements = self._fetch(self.session)
        texts = [e.text for e in self.elements]
        if "Instruction:" not in texts or texts.index("Instruction:") + 1 >= len(texts):
            raise EnvError(f"webshop: the search page of {task_id!r} shows no instruction")
        task = texts[texts.index("Instruction:") + 1]
        return to_text(self.elements), {"task": task, "page": "init"}

    def _step(self, action: str) -> StepOutcome:
        nxt = transition(self.session, action, self.elements)
        if nxt is None:
            return StepOutcome(to_text(self.elements), 0.0, terminated=False, valid=False,
                               info={"page": self.session.page})
        self.elements = self._fetch(nxt)
        self.session = nxt
        if nxt.page != "end":
            return StepOutcome(to_text(self.elements), 0.0, terminated=False, info={"page": nxt.page})
        score = read_score(self.elements)
        return StepOutcome(to_text(self.elements), score, terminated=True, won=score >= 1.0,
                           info={"page": nxt.page, "score": score})

    def admissible_actions(self) -> list[str]:
        """The page's clickables; on the search page any search[...] is valid (the task text is offered)."""
        if self.session.page == "init":
            return [f"search[{self.task}]"] if self.task else []
        return [f"click[{c}]" for c in clickables(self.elements)]

    def close(self) -> None:
        self.client.close()
