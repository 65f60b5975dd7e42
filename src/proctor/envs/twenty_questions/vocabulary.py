"""The attribute vocabulary of twenty questions: every attribute a question can name, with its synonyms.

Each attribute is a *feature* string `"<namespace>:<name>"` (`kind:mammal`, `flag:edible`,
`material:wood`, `color:red`, `part:wheels`, `use:cooking`, `place:kitchen`, `ability:fly`); an object
either has a feature or not, so every question about one has a deterministic yes/no answer. Sizes are
ordinal classes compared against reference objects (`SIZE_CLASSES`, `REFERENCE_SIZES`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A category ("animal") or sub-category ("mammal"); an object of a sub-category is of its parent too."""

    name: str
    parent: str | None = None
    synonyms: tuple[str, ...] = ()


KINDS: tuple[Kind, ...] = (
    Kind("animal", None, ("animals", "creature")),
    Kind("mammal", "animal", ("mammals",)),
    Kind("bird", "animal", ("birds",)),
    Kind("fish", "animal"),
    Kind("reptile", "animal", ("reptiles",)),
    Kind("amphibian", "animal", ("amphibians",)),
    Kind("insect", "animal", ("insects", "bug")),
    Kind("arachnid", "animal"),
    Kind("crustacean", "animal"),
    Kind("mollusk", "animal", ("mollusc",)),
    Kind("food", None, ("food item", "foodstuff")),
    Kind("fruit", "food", ("fruits",)),
    Kind("vegetable", "food", ("vegetables", "veggie")),
    Kind("dairy", "food", ("dairy product",)),
    Kind("baked good", "food", ("baked goods", "bakery item")),
    Kind("dessert", "food", ("desserts",)),
    Kind("drink", None, ("beverage", "drinks")),
    Kind("fungus", None),
    Kind("plant", None, ("plants",)),
    Kind("tree", "plant", ("trees",)),
    Kind("flower", "plant", ("flowers",)),
    Kind("tool", None, ("tools",)),
    Kind("power tool", "tool", ("electric tool",)),
    Kind("garden tool", "tool", ("gardening tool",)),
    Kind("vehicle", None, ("vehicles", "means of transport", "transport", "transportation")),
    Kind("aircraft", "vehicle", ("flying vehicle",)),
    Kind("boat", "vehicle", ("boats", "watercraft")),
    Kind("furniture", None, ("piece of furniture", "furnishing")),
    Kind("clothing", None, ("clothes", "garment", "item of clothing", "piece of clothing",
                            "article of clothing", "apparel")),
    Kind("footwear", "clothing", ("shoe", "shoes")),
    Kind("headwear", "clothing", ("headgear",)),
    Kind("accessory", None, ("fashion accessory",)),
    Kind("musical instrument", None, ("instrument", "musical instruments")),
    Kind("string instrument", "musical instrument", ("stringed instrument",)),
    Kind("wind instrument", "musical instrument"),
    Kind("brass instrument", "wind instrument", ("brass",)),
    Kind("woodwind instrument", "wind instrument", ("woodwind",)),
    Kind("percussion instrument", "musical instrument", ("percussion",)),
    Kind("keyboard instrument", "musical instrument"),
    Kind("kitchenware", None, ("kitchen item", "cookware", "kitchen tool")),
    Kind("utensil", "kitchenware", ("kitchen utensil", "cutlery", "eating utensil")),
    Kind("container", None, ("containers",)),
    Kind("appliance", None, ("household appliance", "home appliance")),
    Kind("electronic device", None, ("electronics", "gadget", "device")),
    Kind("stationery", None, ("school supply", "office supply", "stationery item")),
    Kind("toy", None, ("toys",)),
    Kind("sports equipment", None, ("sporting goods", "sports gear", "sporting equipment")),
    Kind("ball", None, ("balls",)),
    Kind("household item", None, ("household object",)),
)

#: flag name -> (canonical question, phrases that name it after "Is it ...")
FLAGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "living": ("Is it alive?", ("alive", "living", "a living thing", "living thing", "a living creature")),
    "natural": ("Is it natural?", ("natural", "found in nature", "made by nature")),
    "man-made": ("Is it man-made?", ("man-made", "manmade", "artificial", "made by people", "made by humans",
                                     "human-made", "an artifact")),
    "edible": ("Is it edible?", ("edible", "something you can eat", "something you eat", "eaten")),
    "electric": ("Does it use electricity?", ("electric", "electrical", "electronic", "powered by electricity",
                                              "battery powered", "battery-powered")),
    "sharp": ("Is it sharp?", ("sharp", "pointy", "pointed")),
    "soft": ("Is it soft?", ("soft",)),
    "round": ("Is it round?", ("round", "spherical", "circular", "ball-shaped")),
    "flat": ("Is it flat?", ("flat",)),
    "long": ("Is it long and thin?", ("long", "long and thin", "elongated", "thin and long")),
    "sweet": ("Does it taste sweet?", ("sweet", "sweet-tasting")),
    "sour": ("Does it taste sour?", ("sour",)),
    "salty": ("Does it taste salty?", ("salty",)),
    "spicy": ("Is it spicy?", ("spicy",)),
    "liquid": ("Is it a liquid?", ("liquid", "a liquid", "a fluid", "fluid")),
    "hot": ("Is it hot when used or served?", ("hot", "warm", "served hot", "eaten hot", "hot when used")),
    "cold": ("Is it cold?", ("cold", "served cold", "eaten cold", "frozen", "chilled")),
    "wild": ("Is it a wild animal?", ("wild", "a wild animal", "wild animal")),
    "pet": ("Is it a pet?", ("a pet", "pet", "kept as a pet", "a common pet", "a household pet")),
    "dangerous": ("Is it dangerous?", ("dangerous", "harmful", "deadly", "venomous", "poisonous")),
    "loud": ("Is it loud?", ("loud", "noisy")),
    "fragile": ("Is it fragile?", ("fragile", "breakable", "easy to break")),
    "carnivore": ("Does it eat meat?", ("a carnivore", "carnivore", "carnivorous", "a predator", "predator",
                                        "a meat eater")),
    "nocturnal": ("Is it nocturnal?", ("nocturnal", "active at night")),
    "transparent": ("Is it transparent?", ("transparent", "see-through", "see through", "clear")),
    "wearable": ("Can you wear it?", ("wearable", "something you wear", "something you can wear", "worn")),
}

#: material -> phrases ("Is it made of X?" / "Is it X?")
MATERIALS: dict[str, tuple[str, ...]] = {
    "metal": ("metal", "metallic", "iron", "steel", "aluminium", "aluminum"),
    "wood": ("wood", "wooden", "timber"),
    "plastic": ("plastic",),
    "glass": ("glass",),
    "fabric": ("fabric", "cloth", "cotton", "textile", "fabrics"),
    "leather": ("leather",),
    "paper": ("paper", "cardboard"),
    "ceramic": ("ceramic", "porcelain", "clay", "pottery"),
    "rubber": ("rubber",),
    "wool": ("wool", "woollen", "woolen"),
    "wax": ("wax",),
}

#: colour -> phrases ("Is it (usually) X?" / "Is it X in colour?")
COLORS: dict[str, tuple[str, ...]] = {
    "red": ("red",), "orange": ("orange",), "yellow": ("yellow",), "green": ("green",), "blue": ("blue",),
    "purple": ("purple", "violet"), "pink": ("pink",), "brown": ("brown",), "black": ("black",),
    "white": ("white",), "gray": ("gray", "grey"), "silver": ("silver",), "gold": ("gold", "golden"),
}

#: part -> (canonical phrase after "Does it have", other accepted phrases)
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "legs": ("legs", ("leg", "four legs")), "tail": ("a tail", ("tail", "tails")), "fur": ("fur", ("hair", "furry")),
    "feathers": ("feathers", ("feather",)), "scales": ("scales", ("scale",)), "wings": ("wings", ("wing",)),
    "beak": ("a beak", ("beak", "bill")), "fins": ("fins", ("fin", "flippers")), "claws": ("claws", ("claw", "talons")),
    "hooves": ("hooves", ("hoof", "hoofs")), "horns": ("horns", ("horn",)), "antlers": ("antlers", ("antler",)),
    "mane": ("a mane", ("mane",)), "trunk": ("a trunk", ("trunk",)), "tusks": ("tusks", ("tusk",)),
    "whiskers": ("whiskers", ("whisker",)), "antennae": ("antennae", ("antenna", "antennas")),
    "tentacles": ("tentacles", ("tentacle",)), "shell": ("a shell", ("shell", "shells")),
    "pouch": ("a pouch", ("pouch",)), "hump": ("a hump", ("hump", "humps")), "wool": ("wool", ()),
    "stinger": ("a stinger", ("stinger", "sting")), "teeth": ("teeth", ("tooth",)),
    "stripes": ("stripes", ("stripe",)), "spots": ("spots", ("spot",)), "long neck": ("a long neck", ()),
    "leaves": ("leaves", ("leaf",)), "petals": ("petals", ("petal",)), "thorns": ("thorns", ("thorn",)),
    "stem": ("a stem", ("stem", "stalk")), "seeds": ("seeds", ("seed", "pips", "a pit", "pit", "a stone")),
    "roots": ("roots", ("root",)), "bark": ("bark", ()), "needles": ("needles", ("needle",)),
    "peel": ("a peel", ("peel", "rind", "skin you peel")), "spines": ("spines", ("spine", "prickles")),
    "wheels": ("wheels", ("wheel",)), "engine": ("an engine", ("engine", "motor")),
    "doors": ("doors", ("door",)), "windows": ("windows", ("window",)), "pedals": ("pedals", ("pedal",)),
    "handlebars": ("handlebars", ("handlebar",)), "sails": ("sails", ("sail",)),
    "screen": ("a screen", ("screen", "display")), "buttons": ("buttons", ("button",)),
    "keys": ("keys", ("key",)), "strings": ("strings", ("string",)), "handle": ("a handle", ("handle", "handles")),
    "blade": ("a blade", ("blade", "blades")), "lid": ("a lid", ("lid", "cover")), "spout": ("a spout", ("spout",)),
    "bristles": ("bristles", ("bristle",)), "laces": ("laces", ("lace", "shoelaces")),
    "sleeves": ("sleeves", ("sleeve",)), "pockets": ("pockets", ("pocket",)), "zipper": ("a zipper", ("zipper", "zip")),
    "straps": ("straps", ("strap",)), "buckle": ("a buckle", ("buckle",)), "pages": ("pages", ("page",)),
    "lens": ("a lens", ("lens", "lenses")), "cord": ("a cord", ("cord", "cable", "power cord")),
    "battery": ("a battery", ("battery", "batteries")), "drawers": ("drawers", ("drawer",)),
    "shelves": ("shelves", ("shelf",)), "cushions": ("cushions", ("cushion",)), "prongs": ("prongs", ("prong", "tines")),
    "holes": ("holes", ("hole",)), "brim": ("a brim", ("brim", "visor")), "siren": ("a siren", ("siren",)),
}

#: use -> (canonical phrase after "Is it used for", other accepted phrases incl. verbs after "used to")
USES: dict[str, tuple[str, tuple[str, ...]]] = {
    "cooking": ("cooking", ("cook", "cook food", "cooking food", "baking", "bake")),
    "eating": ("eating", ("eat", "eating food", "eat food", "eat with", "eating with")),
    "drinking": ("drinking", ("drink", "drink from", "drinking from")),
    "cutting": ("cutting", ("cut", "cut things", "cutting things", "chopping", "chop")),
    "cleaning": ("cleaning", ("clean", "clean things", "cleaning things")),
    "writing": ("writing", ("write", "write with", "writing with")),
    "drawing": ("drawing", ("draw", "drawing pictures", "coloring", "colouring")),
    "reading": ("reading", ("read",)),
    "transport": ("transport", ("transportation", "travel", "travelling", "traveling", "getting around",
                                "carrying people", "moving people", "commuting")),
    "riding": ("riding", ("ride", "ride on", "riding on")),
    "music": ("music", ("making music", "make music", "playing music", "play music")),
    "sitting": ("sitting", ("sit", "sit on", "sitting on", "sitting in", "seating")),
    "sleeping": ("sleeping", ("sleep", "sleep on", "sleeping on", "sleep in", "sleeping in", "resting", "rest")),
    "storage": ("storage", ("storing things", "store things", "storing", "keeping things", "holding things")),
    "carrying": ("carrying things", ("carrying", "carry", "carry things", "hauling")),
    "sports": ("sports", ("sport", "playing sports", "play sports", "exercise")),
    "playing": ("playing", ("play", "play with", "playing with", "games", "playing games", "having fun", "fun")),
    "building": ("building", ("build", "building things", "build things", "construction")),
    "fixing": ("fixing things", ("fixing", "fix", "fix things", "repair", "repairs", "repairing things")),
    "gardening": ("gardening", ("garden", "yard work", "working in the garden")),
    "digging": ("digging", ("dig",)),
    "measuring": ("measuring", ("measure", "measure things", "measuring things")),
    "lighting": ("lighting", ("light", "giving light", "making light", "seeing in the dark", "illumination")),
    "keeping warm": ("keeping warm", ("keep warm", "staying warm", "stay warm", "warmth")),
    "cooling": ("cooling", ("cool", "cool things", "keeping cool", "keep cool", "keeping things cold")),
    "communication": ("communication", ("communicating", "communicate", "talking to people", "calling people",
                                        "calling", "sending messages")),
    "entertainment": ("entertainment", ("entertaining", "watching shows", "watching")),
    "telling time": ("telling the time", ("telling time", "tell time", "tell the time", "timekeeping")),
    "grooming": ("grooming", ("hair care", "doing hair", "brushing hair", "personal care")),
    "washing": ("washing", ("wash", "bathing", "washing things", "wash things")),
    "drying": ("drying", ("dry", "drying things", "dry things")),
    "decoration": ("decoration", ("decorating", "decorate", "decor")),
    "protection": ("protection", ("protecting", "protect", "protecting people", "staying dry")),
    "farming": ("farming", ("farm work", "agriculture")),
    "painting": ("painting", ("paint",)),
    "sewing": ("sewing", ("sew",)),
    "photography": ("taking pictures", ("taking photos", "take pictures", "take photos", "photography")),
    "calculating": ("calculating", ("calculate", "math", "doing math", "calculations")),
    "printing": ("printing", ("print",)),
    "heating": ("heating", ("heat", "heating food", "warming", "warming things")),
    "swimming": ("swimming", ("swim",)),
    "opening": ("opening things", ("opening", "open", "unlocking", "unlock", "opening doors", "opening locks")),
    "buying": ("buying things", ("buying", "buy", "paying", "payment", "shopping", "buying things")),
    "seeing": ("seeing better", ("seeing", "see", "see better", "vision")),
    "attaching": ("attaching things", ("attaching", "fastening", "holding paper together", "joining things")),
    "working": ("working", ("work", "office work")),
}

#: place -> (preposition + article used in the canonical question, accepted names)
PLACES: dict[str, tuple[str, tuple[str, ...]]] = {
    "kitchen": ("in a kitchen", ("kitchen",)),
    "bathroom": ("in a bathroom", ("bathroom", "toilet", "restroom")),
    "bedroom": ("in a bedroom", ("bedroom",)),
    "living room": ("in a living room", ("living room", "lounge", "sitting room")),
    "garage": ("in a garage", ("garage", "workshop", "shed")),
    "office": ("in an office", ("office",)),
    "classroom": ("in a classroom", ("classroom", "school")),
    "restaurant": ("in a restaurant", ("restaurant", "cafe", "café", "diner")),
    "shop": ("in a shop", ("shop", "store", "supermarket", "grocery store", "market")),
    "cinema": ("in a cinema", ("cinema", "movie theater", "movie theatre", "theater", "theatre")),
    "hospital": ("in a hospital", ("hospital",)),
    "garden": ("in a garden", ("garden", "yard", "backyard")),
    "farm": ("on a farm", ("farm",)),
    "forest": ("in a forest", ("forest", "woods")),
    "jungle": ("in the jungle", ("jungle", "rainforest", "rain forest")),
    "ocean": ("in the ocean", ("ocean", "sea")),
    "river": ("in a river or lake", ("river", "lake", "pond", "river or lake", "stream")),
    "desert": ("in the desert", ("desert",)),
    "savanna": ("on the savanna", ("savanna", "savannah", "grassland")),
    "mountains": ("in the mountains", ("mountains", "mountain")),
    "arctic": ("in the Arctic", ("arctic", "north pole")),
    "antarctic": ("in Antarctica", ("antarctica", "antarctic", "south pole")),
    "street": ("on the street", ("street", "road", "city street", "streets")),
    "park": ("in a park", ("park",)),
    "beach": ("at the beach", ("beach", "seaside")),
    "sky": ("in the sky", ("sky", "air")),
    "zoo": ("in a zoo", ("zoo",)),
    "cave": ("in a cave", ("cave",)),
    "station": ("at a train station", ("train station", "station", "railway station", "railway")),
}
INDOOR_PLACES: frozenset[str] = frozenset(
    {"kitchen", "bathroom", "bedroom", "living room", "garage", "office", "classroom", "restaurant", "shop",
     "cinema", "hospital"}
)
HOME_PLACES: frozenset[str] = frozenset({"kitchen", "bathroom", "bedroom", "living room", "garage"})
WATER_PLACES: frozenset[str] = frozenset({"ocean", "river"})
#: derived places: (canonical question, accepted names)
DERIVED_PLACES: dict[str, tuple[str, tuple[str, ...]]] = {
    "home": ("Can you find it in a house?", ("house", "home", "someone's home", "a home", "household")),
    "water": ("Is it found in water?", ("water", "the water", "fresh water", "salt water")),
    "indoors": ("Is it found indoors?", ("indoors", "inside", "inside a building", "indoor")),
    "outdoors": ("Is it found outdoors?", ("outdoors", "outside", "outdoor", "outside a building")),
}

#: ability -> (canonical verb phrase after "Can it", accepted verb phrases after "can it"/"does it")
ABILITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "fly": ("fly", ("fly", "flies")),
    "swim": ("swim", ("swim", "swims")),
    "climb": ("climb", ("climb", "climb trees")),
    "jump": ("jump", ("jump", "hop", "leap")),
    "lay eggs": ("lay eggs", ("lay eggs", "lays eggs")),
    "sting": ("sting", ("sting", "stings")),
    "talk": ("talk", ("talk", "speak", "say words")),
    "bounce": ("bounce", ("bounce", "bounces")),
    "roll": ("roll", ("roll", "rolls")),
    "grow on trees": ("grow on trees", ("grow on trees", "grow on a tree", "grows on trees")),
    "grow underground": ("grow underground", ("grow underground", "grow in the ground", "grows underground")),
}

#: ordinal size classes and what each means
SIZE_CLASSES: tuple[str, ...] = (
    "tiny: smaller than a coin",
    "small: fits in a pocket or the palm of a hand",
    "hand-held: about the size of a shoe or a breadbox",
    "medium: about the size of a dog",
    "large: about the size of a person",
    "very large: about the size of a car",
    "huge: bigger than a car",
)
#: reference objects for size questions that are not in the knowledge base (KB objects also work)
REFERENCE_SIZES: dict[str, int] = {
    "coin": 1, "hand": 1, "fist": 1, "pocket": 1, "shoe": 2, "shoebox": 2, "breadbox": 2, "bread box": 2,
    "football": 2, "microwave": 3, "suitcase": 3, "dog": 3, "person": 4, "human": 4, "man": 4, "adult": 4,
    "door": 4, "car": 5, "house": 6, "building": 6, "bus": 6,
}
#: the thresholds the canonical questions ask about ("Is it bigger than X?" for size > class of X)
SIZE_THRESHOLDS: tuple[tuple[str, int], ...] = (
    ("an ant", 0), ("a coin", 1), ("a shoe", 2), ("a dog", 3), ("a person", 4), ("a car", 5),
)
