"""WebShop's action grammar and page transitions, shared by the `shop` env and the WebShop HTTP client.

Actions are `search[query]` (on the search page) and `click[button]` where `button` is a clickable of the
current page: Back to Search, Next >, < Prev, a product ASIN, an option value, Description / Features /
Reviews, Buy Now. Anything else is invalid and leaves the session where it was.
"""

from __future__ import annotations

import re
from dataclasses import replace

from proctor.envs.shop.pages import BACK, BUY, NEXT, PREV, SUBPAGES, Element, Session

_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.DOTALL)


def parse_action(action: str) -> tuple[str, str] | None:
    """("search" | "click", argument), or None if the text is not in the grammar."""
    m = _ACTION.match(action)
    if m is None or not m.group(2).strip():
        return None
    return m.group(1), m.group(2).strip()


def transition(s: Session, action: str, page: list[Element]) -> Session | None:
    """The session after `action` on the page `page` (the elements `s` renders to), or None if invalid."""
    parsed = parse_action(action)
    if parsed is None:
        return None
    verb, arg = parsed
    if verb == "search":
        return Session(page="search", query=arg) if s.page == "init" else None
    clickable = {e.text: e for e in page if e.kind != "text"}
    if s.page in ("init", "end") or arg not in clickable:
        return None
    element = clickable[arg]
    if arg == BACK:
        return Session()
    if arg == NEXT:
        return replace(s, page_num=s.page_num + 1)
    if arg == PREV:
        if s.page == "search":
            return replace(s, page_num=s.page_num - 1)
        if s.page == "item":
            return replace(s, page="search", asin="", options={})
        return replace(s, page="item", subpage="")
    if element.kind == "product":
        return replace(s, page="item", asin=arg, options={})
    if element.kind == "option":
        return replace(s, options={**s.options, element.group: arg})
    if arg in SUBPAGES:
        return replace(s, page="item_sub", subpage=arg)
    if arg == BUY:
        return replace(s, page="end")
    return None
