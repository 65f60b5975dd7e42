"""Registrations of the adapters for third-party environments (each an optional extra, imported lazily)
and of the built-in `shop` env (WebShop's flow over a generated catalog)."""

from proctor.envs import shop  # noqa: F401  (registers "shop")
from proctor.envs.registry import register_lazy

register_lazy("alfworld", "proctor.envs.alfworld:ALFWorldEnv", "alfworld",
              "ALFWorld household games (TextWorld engine) with ALFWorld's handcoded expert")
register_lazy("webshop", "proctor.envs.webshop:WebShopHTTPEnv", None,
              "client of a running WebShop server (fixed_<i> sessions, search[...] / click[...])")
