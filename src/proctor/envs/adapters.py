"""Registrations of the adapters for third-party environments (each an optional extra, imported lazily)
and of the built-in `shop` env (WebShop's flow over a generated catalog)."""

from proctor.envs import shop  # noqa: F401  (registers "shop")
from proctor.envs.registry import register_lazy

register_lazy("alfworld", "proctor.envs.alfworld:ALFWorldEnv", "alfworld",
              "ALFWorld household games (TextWorld engine) with ALFWorld's handcoded expert")
register_lazy("scienceworld", "proctor.envs.scienceworld:ScienceWorldEnv", "scienceworld",
              "ScienceWorld's 30 science tasks x variations (JVM simulator), graded score, gold-path expert")
register_lazy("detective", "proctor.envs.detective:DetectiveEnv", "jericho",
              "ArCHer's Detective text adventure (Jericho), look+inventory+valid actions, walkthrough expert")
register_lazy("webshop", "proctor.envs.webshop:WebShopHTTPEnv", None,
              "client of a running WebShop server (fixed_<i> sessions, search[...] / click[...])")
register_lazy("textworld", "proctor.envs.textworld_games:TextWorldEnv", "textworld",
              "TextWorld games generated offline from a seed (or your own .z8 files); expert = the walkthrough")
