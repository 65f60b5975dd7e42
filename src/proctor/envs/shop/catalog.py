"""The `shop` catalog and goals: generated deterministically from a seed, in WebShop's shape.

A product has an ASIN, a title, a category path ("a › b › c"), its product-type nouns, attributes,
option types with values, a price and description/feature texts. A goal (WebShop's "instruction") names a
target product's type, some of its attributes, one value per option type and a price upper bound; goal `i`
is the task of session `fixed_{i}`, as in WebShop.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

#: product families: category path, type nouns, attribute pool, option pool, price range (dollars)
FAMILIES: tuple[dict, ...] = (
    {"category": "beauty & personal care › hair care › shampoo", "type": "shampoo",
     "attributes": ["sulfate free", "paraben free", "for dry hair", "natural ingredients", "long lasting"],
     "options": {"size": ["8 fl oz", "16 fl oz", "32 fl oz"], "scent": ["lavender", "citrus", "unscented"]},
     "price": (6, 40)},
    {"category": "clothing › men › t-shirt", "type": "t-shirt",
     "attributes": ["machine wash", "cotton", "slim fit", "short sleeve", "moisture wicking"],
     "options": {"color": ["black", "navy", "white", "heather grey"], "size": ["small", "medium", "large"]},
     "price": (9, 45)},
    {"category": "electronics › audio › headphones", "type": "headphones",
     "attributes": ["noise cancelling", "wireless", "long battery life", "foldable", "with microphone"],
     "options": {"color": ["black", "silver", "blue"]},
     "price": (20, 200)},
    {"category": "grocery › snacks › granola bars", "type": "granola bars",
     "attributes": ["gluten free", "low sugar", "high protein", "non gmo", "vegan"],
     "options": {"flavor": ["peanut butter", "chocolate chip", "honey oat"], "count": ["6 count", "12 count"]},
     "price": (4, 30)},
    {"category": "home & kitchen › bedding › pillow", "type": "pillow",
     "attributes": ["memory foam", "hypoallergenic", "machine washable", "cooling", "firm support"],
     "options": {"size": ["standard", "queen", "king"]},
     "price": (15, 90)},
    {"category": "sports & outdoors › hiking › water bottle", "type": "water bottle",
     "attributes": ["bpa free", "insulated", "leak proof", "stainless steel", "dishwasher safe"],
     "options": {"capacity": ["500 ml", "750 ml", "1 liter"], "color": ["green", "red", "black"]},
     "price": (8, 50)},
)
BRANDS: tuple[str, ...] = ("acme", "nordwind", "lumina", "verda", "oakridge", "pelican", "zephyr", "kitely")


@dataclass(frozen=True)
class Product:
    asin: str
    title: str
    category: str
    type_nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: float
    description: str
    features: tuple[str, ...]

    @property
    def search_text(self) -> str:
        return " ".join([self.title, *self.attributes, self.description]).lower()


@dataclass(frozen=True)
class Goal:
    asin: str
    instruction: str
    query: str
    category: str
    type_nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, str] = field(default_factory=dict)
    price_upper: float = 0.0


def _asin(rng: random.Random) -> str:
    return "B0" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(8))


def make_catalog(seed: int, per_family: int = 12) -> list[Product]:
    """`per_family` products of every family, a deterministic function of `seed`."""
    rng = random.Random(f"shop-catalog/{seed}")
    products, used = [], set()
    for fam in FAMILIES:
        for _ in range(per_family):
            asin = _asin(rng)
            while asin in used:
                asin = _asin(rng)
            used.add(asin)
            attrs = tuple(sorted(rng.sample(fam["attributes"], 2)))
            options = {k: tuple(sorted(rng.sample(v, max(1, len(v) - rng.randint(0, 1)))))
                       for k, v in fam["options"].items()}
            brand = rng.choice(BRANDS)
            title = f"{brand.title()} {fam['type'].title()}, {attrs[0].title()} and {attrs[1].title()}"
            lo, hi = fam["price"]
            price = round(rng.uniform(lo, hi), 2)
            products.append(Product(
                asin=asin, title=title, category=fam["category"], type_nouns=tuple(fam["type"].split()),
                attributes=attrs, options=options, price=price,
                description=f"A {attrs[0]} {fam['type']} by {brand}, {attrs[1]}.",
                features=tuple(f"{a.capitalize()}." for a in attrs),
            ))
    return products


def make_goal(catalog: list[Product], seed: int, index: int) -> Goal:
    """Goal `index` of the catalog made with `seed`: a target product, its attributes, options and a budget."""
    rng = random.Random(f"shop-goal/{seed}/{index}")
    p = rng.choice(catalog)
    opts = {k: rng.choice(v) for k, v in sorted(p.options.items())}
    upper = float(math.ceil(p.price * rng.uniform(1.1, 1.6) / 10) * 10)
    noun = " ".join(p.type_nouns)
    attrs = " and ".join(p.attributes)
    opt_text = ", and ".join(f"{k}: {v}" for k, v in opts.items())
    instruction = f"i need {noun} that is {attrs}, with {opt_text}, and price lower than {upper:.2f} dollars"
    return Goal(asin=p.asin, instruction=instruction, query=f"{' '.join(p.attributes)} {noun}",
                category=p.category, type_nouns=p.type_nouns, attributes=p.attributes, options=opts,
                price_upper=upper)
