"""WebShop's purchase reward (Yao et al., 2022, "WebShop", section 3.1), as pure functions.

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price]) / (|U_att| + |U_opt| + 1)

U: the goal (attributes U_att, options U_opt, price bound u_price); Y: the bought product with the options
the agent selected. r_type in {0, 0.1, 0.5, 1} down-weights buying the wrong kind of product (`type_reward`).
WebShop matches attributes and options with fuzzy string matching; here both are matched after
normalisation (lower case, single spaces), which is exact on `shop`'s generated catalog.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from proctor.envs.shop.catalog import Goal, Product


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def title_score(desired_nouns: Sequence[str], bought_nouns: Iterable[str]) -> float:
    """|desired ∩ bought| / |desired| over the product-type nouns (WebShop: nouns of the product names)."""
    desired = {_norm(n) for n in desired_nouns}
    if not desired:
        return 0.2
    return len(desired & {_norm(n) for n in bought_nouns}) / len(desired)


def type_reward(query_match: bool, category_match: bool, title: float) -> float:
    """r_type: 1 if the query or category (>= 2 common levels) match or title score > 0.2, else 0.5;
    then 0.1 if title score < 0.1, and 0 if it is 0 (WebShop's `get_type_reward`)."""
    r = 1.0 if (query_match or category_match or title > 0.2) else 0.5
    if title < 0.1:
        r = 0.1
    if title == 0.0:
        r = 0.0
    return r


def category_match(goal_category: str, bought_category: str) -> bool:
    """At least two levels of the "a › b › c" category paths in common."""
    levels = lambda c: {_norm(x) for x in c.split("›")}
    return len(levels(goal_category) & levels(bought_category)) >= 2


def attribute_matches(goal_attributes: Sequence[str], product_attributes: Iterable[str], product_text: str) -> int:
    """|U_att ∩ Y_att|: goal attributes among the product's attributes or contained in its title/text."""
    have = {_norm(a) for a in product_attributes}
    text = _norm(product_text)
    return sum(1 for a in goal_attributes if _norm(a) in have or _norm(a) in text)


def option_matches(goal_options: Mapping[str, str], chosen_options: Mapping[str, str]) -> int:
    """|U_opt ∩ Y_opt|: goal option values the agent selected (compared by value, as in WebShop)."""
    chosen = {_norm(v) for v in chosen_options.values()}
    return sum(1 for v in goal_options.values() if _norm(v) in chosen)


def purchase_reward(r_type: float, n_attributes: int, attributes_matched: int, n_options: int,
                    options_matched: int, price: float, price_upper: float) -> float:
    """r = r_type * (attributes_matched + options_matched + 1[price <= price_upper]) / (n_att + n_opt + 1).

    A goal without a price bound (`price_upper <= 0`) counts the price term as met."""
    if not (0 <= attributes_matched <= n_attributes and 0 <= options_matched <= n_options):
        raise ValueError(f"matches out of range: {attributes_matched}/{n_attributes} attributes, "
                         f"{options_matched}/{n_options} options")
    price_ok = 1.0 if price_upper <= 0 or price <= price_upper else 0.0
    return r_type * (attributes_matched + options_matched + price_ok) / (n_attributes + n_options + 1)


def shop_reward(goal: Goal, product: Product, chosen_options: Mapping[str, str]) -> float:
    """The WebShop reward of buying `product` with `chosen_options` for `goal` (formula in the module doc)."""
    title = title_score(goal.type_nouns, product.type_nouns)
    r_type = type_reward(goal.query == product_query(product), category_match(goal.category, product.category),
                         title)
    return purchase_reward(
        r_type, len(goal.attributes), attribute_matches(goal.attributes, product.attributes, product.title),
        len(goal.options), option_matches(goal.options, chosen_options), product.price, goal.price_upper)


def product_query(product: Product) -> str:
    """The search query a product was listed under (WebShop's `product['query']`)."""
    return f"{' '.join(product.attributes)} {' '.join(product.type_nouns)}"
