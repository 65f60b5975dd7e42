"""The question grammar of twenty questions: parse a free-text yes/no question into a `Query`.

A question is normalised (case, punctuation, hyphens and filler words such as "usually" are ignored;
"the object"/"this" read as "it") and matched against these forms, in order; `X` must name something in
the vocabulary or the knowledge base, otherwise the question is invalid:

    Is it a kind of X? / Is it a type of X?          kind (animal, mammal, fruit, vehicle, ...)
    Is it bigger|larger|smaller than X?              size class vs. a reference object or any KB object
    Is it the same size as X?   Can you hold it in one hand?   Does it fit in a pocket?
    Is it made of X?                                 material (metal, wood, plastic, glass, ...)
    Does it have X?                                  part (legs, wheels, a tail, a screen, ...)
    Is it used for X? / Can you use it to X?         use (cooking, transport, music, ...)
    Can you find it in X? / Is it found in X?        place (a kitchen, the ocean, a house, ...)
    Is it found indoors? / outdoors?
    Can you wear|eat|drink|ride|sit on it?
    Can it X? / Does it X?                           ability (fly, swim, lay eggs, ...)
    Does it taste sweet? / Does it use electricity? / Does it eat meat?
    Is it X?                                         kind, flag (alive, edible, ...), material, colour,
                                                     or a guess of an object ("Is it a dog?")

With an article ("Is it an orange?") a name is read as a kind or a guess first; without one ("Is it
orange?") as a flag, material or colour first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache

from proctor.envs.twenty_questions import vocabulary as V
from proctor.envs.twenty_questions.knowledge import KBObject, load_objects


@dataclass(frozen=True)
class Query:
    """A parsed question. `op`: feature | bigger | smaller | same_size | at_most | guess."""

    op: str
    value: str | int

    def holds(self, obj: KBObject) -> bool:
        if self.op == "feature":
            return self.value in obj.features
        if self.op == "guess":
            return obj.name == self.value
        size = int(self.value)
        if self.op == "bigger":
            return obj.size > size
        if self.op == "smaller":
            return obj.size < size
        if self.op == "same_size":
            return obj.size == size
        if self.op == "at_most":
            return obj.size <= size
        raise ValueError(f"unknown query op {self.op!r}")


_FILLERS = frozenset(
    ["usually", "typically", "normally", "generally", "commonly", "often", "mostly", "mainly", "primarily", "always", "really", "actually", "please", "maybe", "perhaps"]
)


def normalize(text: str) -> str:
    """Lower-case, strip accents and punctuation, hyphens to spaces, drop filler words."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = text.lower().replace("-", " ")
    text = re.sub(r"[^a-z0-9' ]+", " ", text)
    return " ".join(w for w in text.split() if w not in _FILLERS)


def _table(pairs: list[tuple[str, str]]) -> dict[str, str]:
    return {normalize(k): v for k, v in pairs}


@cache
def lexicon() -> dict[str, dict[str, str]]:
    """Normalised phrase -> feature (or object name) tables, one per thing a question can name."""
    objects = load_objects()
    kinds = [(k.name, f"kind:{k.name}") for k in V.KINDS]
    kinds += [(s, f"kind:{k.name}") for k in V.KINDS for s in k.synonyms]
    flags = [(p, f"flag:{f}") for f, (_, phrases) in V.FLAGS.items() for p in (f, *phrases)]
    flags += [("striped", "part:stripes"), ("spotted", "part:spots"), ("furry", "part:fur"),
              ("hairy", "part:fur"), ("feathered", "part:feathers"), ("hot when used or served", "flag:hot")]
    parts = [(p, f"part:{n}") for n, (canon, other) in V.PARTS.items() for p in (n, canon, *other)]
    uses = [(p, f"use:{n}") for n, (canon, other) in V.USES.items() for p in (n, canon, *other)]
    places = [(p, f"place:{n}") for n, (_, names) in V.PLACES.items() for p in names]
    places += [(p, f"place:{n}") for n, (_, names) in V.DERIVED_PLACES.items() for p in names]
    abilities = [(p, f"ability:{n}") for n, (canon, other) in V.ABILITIES.items() for p in (n, canon, *other)]
    return {
        "kind": _table(kinds),
        "flag": _table(flags),
        "material": _table([(p, f"material:{m}") for m, ps in V.MATERIALS.items() for p in ps]),
        "color": _table([(p, f"color:{c}") for c, ps in V.COLORS.items() for p in ps]),
        "part": _table(parts),
        "use": _table(uses),
        "place": _table(places),
        "ability": _table(abilities),
        "object": _table([(n, o.name) for o in objects for n in o.names]),
    }


@cache
def _sizes() -> dict[str, int]:
    sizes = {normalize(k): v for k, v in V.REFERENCE_SIZES.items()}
    sizes.update({normalize(n): o.size for o in load_objects() for n in o.names})
    return sizes


_ARTICLE = re.compile(r"^(a|an|the|some|any)\s+")


def _strip_article(x: str) -> tuple[bool, str]:
    m = _ARTICLE.match(x)
    return (True, x[m.end():]) if m else (False, x)


def _lookup(table: str, x: str) -> Query | None:
    tab = lexicon()[table]
    for key in (x, _strip_article(x)[1]):
        if key in tab:
            return Query("guess", tab[key]) if table == "object" else Query("feature", tab[key])
    return None


def _first(x: str, tables: tuple[str, ...]) -> Query | None:
    for t in tables:
        q = _lookup(t, x)
        if q is not None:
            return q
    return None


def _is_it(x: str) -> Query | None:
    """'Is it X?': with an article prefer kinds and guesses, without one flags, materials and colours."""
    has_article, _ = _strip_article(x)
    m = re.fullmatch(r"(.+?) in colou?r", x) or re.fullmatch(r"colou?red (.+)", x)
    if m:
        return _lookup("color", m.group(1))
    order = ("kind", "object", "flag", "material", "color") if has_article else (
        "flag", "material", "color", "kind", "object")
    return _first(x, order)


def _size(op: str) -> Callable[[str], Query | None]:
    def parse(x: str) -> Query | None:
        size = _sizes().get(_strip_article(x)[1])
        return None if size is None else Query(op, size)

    return parse


_YOU_VERBS: dict[str, str] = {
    "wear": "flag:wearable", "eat": "flag:edible", "drink": "kind:drink", "ride": "use:riding",
    "ride on": "use:riding", "sit on": "use:sitting", "sit in": "use:sitting", "sleep on": "use:sleeping",
    "sleep in": "use:sleeping", "play with": "use:playing", "cook with": "use:cooking",
    "write with": "use:writing", "eat with": "use:eating", "drink from": "use:drinking", "cut with": "use:cutting",
}


def _you_verb(x: str) -> Query | None:
    feature = _YOU_VERBS.get(x)
    return None if feature is None else Query("feature", feature)


def _const(query: Query) -> Callable[[str], Query]:
    return lambda _x: query


_SUBJECT = re.compile(
    r"^(is|does|can|could|would|will|do) (the object|the thing|the secret object|the secret|the item|"
    r"this object|this thing|this|that|the answer)\b"
)
_WHO = r"(?:you|i|one|we|people|a person|someone)"
#: (pattern, parser of its first group); tried in order, a parser returning None lets later rules try
_RULES: tuple[tuple[re.Pattern[str], Callable[[str], Query | None]], ...] = tuple(
    (re.compile(p), f) for p, f in (
        (r"is it (?:a |an )?(?:kind|type|sort|form) of (.+)", lambda x: _lookup("kind", x)),
        (r"is it (?:bigger|larger) than (.+)", _size("bigger")),
        (r"is it smaller than (.+)", _size("smaller")),
        (r"is it (?:about )?(?:the same size as|as big as|as large as) (.+)", _size("same_size")),
        (rf"(?:can|could) {_WHO} (?:hold|carry) it in (one|your|a|my|one's) hand", _const(Query("at_most", 2))),
        (r"(?:does|would|can|will) it fit in (a|your|my|one's) hand", _const(Query("at_most", 2))),
        (r"(?:does|would|can|will) it fit in (a|your|my|one's) pocket", _const(Query("at_most", 1))),
        (r"is it (?:made|built) (?:out )?(?:of|from) (.+)", lambda x: _lookup("material", x)),
        (r"does it have (.+)", lambda x: _lookup("part", re.sub(r"^(four|two|many|lots of) ", "", x))
         or _lookup("part", x)),
        (r"does it (?:use|need|run on|require|consume) (electricity|power|batteries|a battery)",
         _const(Query("feature", "flag:electric"))),
        (r"does it (?:need to be|have to be) (plugged in)", _const(Query("feature", "flag:electric"))),
        (r"does it taste (.+)", lambda x: _lookup("flag", x)),
        (r"does it (?:eat|hunt) (meat|other animals|animals)", _const(Query("feature", "flag:carnivore"))),
        (r"does it (get hot|produce heat|give off heat|make heat)", _const(Query("feature", "flag:hot"))),
        (r"does it make (?:a lot of |much )?(noise|sound|noises|sounds)", _const(Query("feature", "flag:loud"))),
        ((r"(?:is it|can you find it|is it found|is it kept|is it used|would you find it|does it live|"
         r"does it stay|is it located) (indoors|outdoors|inside|outside|indoor|outdoor)"),
         lambda x: _lookup("place", x)),
        (rf"(?:can|could|would|do|will|might) {_WHO} (?:find|see) it (?:in|on|at|inside) (.+)",
         lambda x: _lookup("place", x)),
        (r"is it (?:found|kept|seen|located|used|stored|common) (?:in|on|at|inside) (.+)",
         lambda x: _lookup("place", x)),
        (r"does it live (?:in|on|at) (.+)", lambda x: _lookup("place", x)),
        (r"(?:is it|can it be|could it be) used (?:for|to|in|as) (.+)", lambda x: _lookup("use", x)),
        (rf"(?:do|can|would|could) {_WHO} use it (?:for|to|in) (.+)", lambda x: _lookup("use", x)),
        (r"is it (?:meant|designed|made|intended) (?:for|to) (.+)", lambda x: _lookup("use", x)),
        (rf"is it (?:something|a thing|an object|an item) (?:that )?{_WHO} uses? (?:for|to) (.+)",
         lambda x: _lookup("use", x)),
        (r"is it for (.+)", lambda x: _lookup("use", x)),
        (rf"(?:can|do|would|could) {_WHO} (.+?) it", _you_verb),
        (rf"is it (?:something|a thing|an object|an item) (?:that )?{_WHO} (?:can |could |would )?(.+)", _you_verb),
        (r"(?:can|does|could|will|do) it (.+)",
         lambda x: _lookup("ability", x) or (_lookup("flag", x[3:]) if x.startswith("be ") else None)),
        (r"(?:are you thinking (?:of|about)|my guess is|i guess|i think it is|is it called|is it named) (.+)",
         lambda x: _lookup("object", x)),
        (r"is it (.+)", _is_it),
        (r"is its colou?r (.+)", lambda x: _lookup("color", x)),
    )
)


@lru_cache(maxsize=65536)
def parse_question(text: str) -> Query | None:
    """The `Query` a question asks, or None when it is outside the grammar (see module docstring)."""
    q = _SUBJECT.sub(r"\1 it", normalize(text))
    for pattern, parse in _RULES:
        m = pattern.fullmatch(q)
        if m:
            query = parse(m.group(1))
            if query is not None:
                return query
    return None


@cache
def canonical_questions() -> tuple[tuple[str, Query], ...]:
    """One question per attribute of the vocabulary (the questions the information-gain expert chooses
    from), with the query each parses to."""
    texts = [f"Is it a kind of {k.name}?" for k in V.KINDS]
    texts += [f"Is it bigger than {ref}?" for ref, _ in V.SIZE_THRESHOLDS]
    texts += [question for question, _ in V.FLAGS.values()]
    texts += [f"Is it made of {m}?" for m in V.MATERIALS]
    texts += [f"Is it usually {c}?" for c in V.COLORS]
    texts += [f"Does it have {canon}?" for canon, _ in V.PARTS.values()]
    texts += [f"Is it used for {canon}?" for canon, _ in V.USES.values()]
    texts += [f"Can you find it {where}?" for where, _ in V.PLACES.values()]
    texts += [question for question, _ in V.DERIVED_PLACES.values()]
    texts += [f"Can it {verb}?" for verb, _ in V.ABILITIES.values()]
    out = []
    for t in texts:
        query = parse_question(t)
        if query is None:
            raise ValueError(f"canonical question {t!r} does not parse")
        out.append((t, query))
    return tuple(out)


def guess_question(name: str) -> str:
    """The canonical guess for an object ("Is it a dog?", "Is it an apple?")."""
    article = "an" if name[0] in "aeiou" else "a"
    return f"Is it {article} {name}?"


def question_grammar() -> str:
    """The documented grammar, for humans and for prompts (the module docstring)."""
    return (__doc__ or "").strip()
