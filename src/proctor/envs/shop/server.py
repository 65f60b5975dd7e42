"""A WebShop-protocol HTTP server for `shop` (FastAPI; bind 127.0.0.1), with WebShop's routes:

    /{session}                                                   search page (session "fixed_<i>" = goal i)
    /search_results/{session}/{keywords}/{page}                  results
    /item_page/{session}/{asin}/{keywords}/{page}/{options}      item page (options: a dict literal)
    /item_sub_page/{session}/{asin}/{keywords}/{page}/{sub}/{options}
    /done/{session}/{asin}/{options}                             buys; the page shows the score

Run: `python -m proctor.envs.shop.server --port 3000 --seed 0`.
"""

from __future__ import annotations

import argparse
import ast

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from proctor.envs.shop.env import ShopWorld, goal_index
from proctor.envs.shop.pages import Session, to_html
from proctor.envs.shop.reward import shop_reward


def parse_options(text: str) -> dict[str, str]:
    """WebShop's options path segment: a Python dict literal of option type -> value."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise HTTPException(400, f"options must be a dict literal, got {text!r}") from e
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise HTTPException(400, f"options must map strings to strings, got {text!r}")
    return value


def parse_keywords(text: str) -> str:
    """WebShop sends keywords raw or as a list literal."""
    if text.startswith("["):
        try:
            return " ".join(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError) as e:
            raise HTTPException(400, f"bad keywords {text!r}") from e
    return text


def create_app(seed: int = 0) -> FastAPI:
    world = ShopWorld(seed)
    app = FastAPI(title="proctor shop (WebShop protocol)")

    def page(session_id: str, s: Session) -> HTMLResponse:
        try:
            goal = world.goal(goal_index(session_id))
        except ValueError as e:
            raise HTTPException(404, str(e)) from e
        if s.asin and s.asin not in world.products:
            raise HTTPException(404, f"unknown product {s.asin!r}")
        if s.page == "end":
            s.reward = shop_reward(goal, world.products[s.asin], s.options)
        return HTMLResponse(to_html(world.page(goal, s)))

    @app.get("/search_results/{session_id}/{keywords}/{page_num}")
    def results(session_id: str, keywords: str, page_num: int) -> HTMLResponse:
        return page(session_id, Session("search", parse_keywords(keywords), page_num))

    @app.get("/item_page/{session_id}/{asin}/{keywords}/{page_num}/{options}")
    def item(session_id: str, asin: str, keywords: str, page_num: int, options: str) -> HTMLResponse:
        return page(session_id, Session("item", parse_keywords(keywords), page_num, asin, parse_options(options)))

    @app.get("/item_sub_page/{session_id}/{asin}/{keywords}/{page_num}/{subpage}/{options}")
    def item_sub(session_id: str, asin: str, keywords: str, page_num: int, subpage: str,
                 options: str) -> HTMLResponse:
        return page(session_id, Session("item_sub", parse_keywords(keywords), page_num, asin,
                                        parse_options(options), subpage))

    @app.get("/done/{session_id}/{asin}/{options}")
    def done(session_id: str, asin: str, options: str) -> HTMLResponse:
        return page(session_id, Session("end", asin=asin, options=parse_options(options)))

    @app.get("/{session_id}")
    def start(session_id: str) -> HTMLResponse:
        return page(session_id, Session())

    return app


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    uvicorn.run(create_app(args.seed), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
