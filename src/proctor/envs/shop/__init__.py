"""`shop`: WebShop's page flow, action grammar (search[...], click[...]) and reward formula over a generated
catalog, with an oracle expert, and a server speaking WebShop's HTTP protocol (`proctor.envs.shop.server`).

from proctor.envs import make
env = make("shop", seed=0)
obs, info = env.reset(env.task_ids("test")[0])
"""

from proctor.envs.shop.catalog import Goal, Product, make_catalog, make_goal
from proctor.envs.shop.env import ShopEnv, ShopWorld
from proctor.envs.shop.reward import purchase_reward, shop_reward, type_reward

__all__ = ["Goal", "Product", "ShopEnv", "ShopWorld", "make_catalog", "make_goal", "purchase_reward",
           "shop_reward", "type_reward"]
