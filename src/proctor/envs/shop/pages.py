"""WebShop's pages as data: a session state (`Session`) renders to a list of `Element`s, which become the
text observation (`to_text`) or the HTML a WebShop-protocol server sends (`to_html`); `parse_html` turns
such HTML back into elements, so the HTTP client and the in-process env read the same text.

Page flow (WebShop): search page --search[q]--> results (10 per page, Next > / < Prev) --click[ASIN]-->
item page (options, Description / Features / Reviews sub-pages) --click[Buy Now]--> done page with the score.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Literal

from proctor.envs.shop.catalog import Goal, Product

PER_PAGE = 10
MAX_RESULTS = 50
SUBPAGES = ("Description", "Features", "Reviews")
BACK, NEXT, PREV, BUY = "Back to Search", "Next >", "< Prev", "Buy Now"
SCORE_LABEL = "Your score (min 0.0, max 1.0)"
PageType = Literal["init", "search", "item", "item_sub", "end"]
Kind = Literal["text", "button", "product", "option"]


@dataclass(frozen=True)
class Element:
    kind: Kind
    text: str
    group: str = ""  # the option type of an option
    selected: bool = False


@dataclass
class Session:
    """Where one WebShop session is (what its URL encodes)."""

    page: PageType = "init"
    query: str = ""
    page_num: int = 1
    asin: str = ""
    options: dict[str, str] = field(default_factory=dict)
    subpage: str = ""
    reward: float = 0.0


def search(catalog: list[Product], query: str) -> list[Product]:
    """Products ranked by how many distinct query words their text contains (ties by ASIN); top 50."""
    words = set(query.lower().replace(",", " ").split())
    scored = []
    for p in catalog:
        text = set(p.search_text.replace(",", " ").split())
        hits = len(words & text)
        if hits:
            scored.append((-hits, p.asin, p))
    return [p for _, _, p in sorted(scored)[:MAX_RESULTS]]


def render(catalog: dict[str, Product], goal: Goal, s: Session) -> list[Element]:
    """The elements of the page `s` is on."""
    if s.page == "init":
        return [Element("text", "WebShop"), Element("text", "Instruction:"), Element("text", goal.instruction),
                Element("button", "Search")]
    if s.page == "search":
        results = search(list(catalog.values()), s.query)
        shown = results[(s.page_num - 1) * PER_PAGE: s.page_num * PER_PAGE]
        out = [Element("button", BACK), Element("text", f"Page {s.page_num} (Total results: {len(results)})")]
        if s.page_num > 1:
            out.append(Element("button", PREV))
        if s.page_num * PER_PAGE < len(results):
            out.append(Element("button", NEXT))
        for p in shown:
            out += [Element("product", p.asin), Element("text", p.title), Element("text", f"${p.price:.2f}")]
        return out
    p = catalog[s.asin]
    if s.page == "item":
        out = [Element("button", BACK), Element("button", PREV)]
        for kind, values in p.options.items():
            out.append(Element("text", kind))
            out += [Element("option", v, kind, s.options.get(kind) == v) for v in values]
        out += [Element("text", p.title), Element("text", f"Price: ${p.price:.2f}"), Element("text", "Rating: N.A.")]
        return out + [Element("button", b) for b in (*SUBPAGES, BUY)]
    if s.page == "item_sub":
        body = {"Description": [p.description], "Features": list(p.features), "Reviews": ["No reviews yet."]}
        return [Element("button", BACK), Element("button", PREV), *(Element("text", t) for t in body[s.subpage])]
    return [Element("text", "Thank you for shopping with us!"), Element("text", SCORE_LABEL),
            Element("text", f"{s.reward:.4f}")]


def clickables(elements: list[Element]) -> list[str]:
    return [e.text for e in elements if e.kind != "text" and e.text != "Search"]


def to_text(elements: list[Element]) -> str:
    """WebShop's text observation: elements joined by ' [SEP] ', clickables in [..], chosen options in [[..]]."""
    def one(e: Element) -> str:
        if e.kind == "text":
            return e.text
        return f"[[{e.text}]]" if e.selected else f"[{e.text}]"
    return " [SEP] ".join(one(e) for e in elements)


def to_html(elements: list[Element], title: str = "WebShop") -> str:
    """The page as WebShop's server marks it up: <button>, <label> options, <a class="product-link">."""
    rows = []
    for e in elements:
        t = html.escape(e.text)
        if e.kind == "button":
            rows.append(f"<button>{t}</button>")
        elif e.kind == "product":
            rows.append(f'<a class="product-link">{t}</a>')
        elif e.kind == "option":
            checked = " checked" if e.selected else ""
            rows.append(f'<input type="radio" name="{html.escape(e.group)}"{checked}><label>{t}</label>')
        else:
            rows.append(f"<p>{t}</p>")
    body = "\n".join(rows)
    return f"<!DOCTYPE html>\n<html><head><title>{html.escape(title)}</title></head><body>\n{body}\n</body></html>"


class _Parser(HTMLParser):
    """Visible text of a WebShop page, classified the way WebShop agents read it."""

    SKIP = frozenset({"script", "style", "head", "title", "meta"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str | None]]] = []
        self.elements: list[Element] = []
        self.group = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in {"input", "br", "img", "meta", "link", "hr"}:
            self.stack.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        text = " ".join(data.split())
        if not text or any(tag in self.SKIP for tag, _ in self.stack):
            return
        tag, attrs = self.stack[-1] if self.stack else ("", {})
        if tag == "button":
            self.elements.append(Element("button", text))
        elif tag == "label":
            self.elements.append(Element("option", text, self.group))
        elif tag == "a" and "product-link" in (attrs.get("class") or "").split():
            self.elements.append(Element("product", text))
        else:
            self.elements.append(Element("text", text))
            self.group = text


def parse_html(page: str, options: dict[str, str] | None = None) -> list[Element]:
    """Elements of a WebShop page; options whose value is in `options` (the session's choices) are selected."""
    parser = _Parser()
    parser.feed(page)
    chosen = options or {}
    return [Element(e.kind, e.text, e.group, chosen.get(e.group) == e.text) if e.kind == "option" else e
            for e in parser.elements]
