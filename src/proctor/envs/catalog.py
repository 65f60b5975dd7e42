"""Every env proctor ships: the built-in pure-Python envs (registered by importing their packages) and the
adapters for third-party environments (each an optional extra, registered by import path and imported only
when made)."""

import proctor.envs.arithmetic
import proctor.envs.household
import proctor.envs.shop
import proctor.envs.stepwise_text
import proctor.envs.twenty_questions  # noqa: F401  (the imports above register the built-in envs)
from proctor.envs.registry import register_lazy

register_lazy("alfworld", "proctor.envs.alfworld:ALFWorldEnv", "alfworld",
              "ALFWorld household games (TextWorld engine) with ALFWorld's handcoded expert",
              requires=("alfworld", "textworld"))
register_lazy("scienceworld", "proctor.envs.scienceworld:ScienceWorldEnv", "scienceworld",
              "ScienceWorld's 30 science tasks x variations (JVM simulator), graded score, gold-path expert",
              requires=("scienceworld",))
register_lazy("detective", "proctor.envs.detective:DetectiveEnv", "jericho",
              "ArCHer's Detective text adventure (Jericho), look+inventory+valid actions, walkthrough expert",
              requires=("jericho",))
register_lazy("webshop", "proctor.envs.webshop:WebShopHTTPEnv", None,
              "client of a running WebShop server (fixed_<i> sessions, search[...] / click[...])")
register_lazy("textworld", "proctor.envs.textworld_games:TextWorldEnv", "textworld",
              "TextWorld games generated offline from a seed (or your own .z8 files); expert = the walkthrough",
              requires=("textworld", "filelock"))
