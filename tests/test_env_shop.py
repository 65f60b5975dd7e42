"""The built-in `shop` env (WebShop's flow and reward), its WebShop-protocol server and the HTTP client."""

from __future__ import annotations

import httpx
import pytest

from proctor.envs import make
from proctor.envs.base import EnvError
from proctor.envs.shop.reward import (
    attribute_matches,
    category_match,
    option_matches,
    purchase_reward,
    shop_reward,
    title_score,
    type_reward,
)


def test_purchase_reward_hand_computed():
    # 2 of 3 attributes, 1 of 2 options, price within budget: (2 + 1 + 1) / (3 + 2 + 1) = 4/6
    assert purchase_reward(1.0, 3, 2, 2, 1, 19.99, 20.0) == pytest.approx(4 / 6)
    # over budget and r_type 0.5: 0.5 * (3 + 2 + 0) / 6
    assert purchase_reward(0.5, 3, 3, 2, 2, 25.0, 20.0) == pytest.approx(5 / 12)
    # no price bound: the price term counts as met
    assert purchase_reward(1.0, 1, 0, 0, 0, 99.0, 0.0) == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="out of range"):
        purchase_reward(1.0, 1, 2, 0, 0, 1.0, 2.0)


def test_type_reward_cases():
    assert type_reward(False, False, 1.0) == 1.0
    assert type_reward(False, False, 0.2) == 0.5  # no query/category match, title score not > 0.2
    assert type_reward(True, False, 0.05) == 0.1
    assert type_reward(True, True, 0.0) == 0.0
    assert title_score(["water", "bottle"], ["bottle"]) == 0.5
    assert title_score([], ["x"]) == 0.2
    assert category_match("a › b › c", "a › b › d") and not category_match("a › b › c", "a › x › y")


def test_attribute_and_option_matches():
    assert attribute_matches(["Gluten Free", "vegan", "low sugar"], ["gluten  free"], "Bars, Vegan and tasty") == 2
    assert option_matches({"size": "Large", "color": "red"}, {"size": "large", "color": "blue"}) == 1


def test_shop_reward_of_wrong_options_and_product():
    env = make("shop", seed=0)
    goal = env.world.goal(0)
    target = env.world.products[goal.asin]
    assert shop_reward(goal, target, goal.options) == 1.0
    wrong = {k: next(v for v in target.options[k] if v != goal.options[k]) if len(target.options[k]) > 1
             else goal.options[k] for k in goal.options}
    n_wrong = sum(wrong[k] != goal.options[k] for k in goal.options)
    expected = (len(goal.attributes) + len(goal.options) - n_wrong + 1) / (len(goal.attributes) + len(goal.options) + 1)
    assert shop_reward(goal, target, wrong) == pytest.approx(expected)
    other = next(p for p in env.world.products.values() if p.category != target.category)
    assert shop_reward(goal, other, {}) == 0.0  # different product type: r_type = 0


def test_expert_wins_every_test_goal_within_ten_steps():
    env = make("shop", seed=0, num_tasks={"test": 60}, expert_hints=True)
    steps = []
    for task in env.task_ids("test"):
        _, info = env.reset(task)
        step = None
        while not env.done:
            step = env.step((step.info if step else info)["expert_action"])
        assert step.won and step.reward == 1.0 and step.info["score"] == 1.0, task
        steps.append(len(env.actions))
    assert max(steps) <= 10


def test_page_flow_and_invalid_actions():
    env = make("shop", seed=1)
    obs, info = env.reset("fixed_0")
    assert obs.startswith("WebShop [SEP] Instruction: [SEP] i need") and info["task"] in obs
    assert env.step("click[Buy Now]").valid is False  # nothing to click on the search page
    goal = env.goal
    step = env.step(f"search[{goal.query}]")
    assert "Page 1 (Total results:" in step.observation and f"click[{goal.asin}]" in step.admissible_actions
    assert env.step("search[again]").valid is False  # search only from the search page
    assert "[Buy Now]" in env.step(f"click[{goal.asin}]").observation
    assert env.step("click[Description]").observation.startswith("[Back to Search] [SEP] [< Prev]")
    env.step("click[< Prev]")
    step = env.step("click[Buy Now]")  # no options chosen
    n_att, n_opt = len(goal.attributes), len(goal.options)
    assert step.terminated and step.reward == pytest.approx(round((n_att + 1) / (n_att + n_opt + 1), 4))
    assert step.info["score"] == step.reward and not step.won and "Your score (min 0.0, max 1.0)" in step.observation
    with pytest.raises(ValueError, match="fixed_"):
        env.reset("goal-3")


def test_http_client_matches_in_process_env(shop_server):
    local = make("shop", seed=0, expert_hints=True)
    remote = make("webshop", base_url=shop_server)
    for task in local.task_ids("test")[:8]:
        obs_l, info_l = local.reset(task)
        obs_r, info_r = remote.reset(task)
        assert obs_l == obs_r and info_l["task"] == info_r["task"]
        action = "click[Back to Search]"  # invalid on the search page, then the expert's actions
        while not local.done:
            step_l, step_r = local.step(action), remote.step(action)
            assert (step_l.observation, step_l.reward, step_l.terminated, step_l.truncated) == (
                step_r.observation, step_r.reward, step_r.terminated, step_r.truncated), action
            assert step_l.valid == step_r.valid
            assert step_l.admissible_actions == step_r.admissible_actions
            action = step_l.info.get("expert_action")
        assert remote.done and step_r.reward == 1.0 and step_r.won
    # a partial purchase: the score read from the done page equals the formula's
    local.reset("fixed_5")
    remote.reset("fixed_5")
    for a in [f"search[{local.goal.query}]", f"click[{local.goal.asin}]", "click[Buy Now]"]:
        step_l, step_r = local.step(a), remote.step(a)
    assert step_r.reward == step_l.reward < 1.0 and not step_r.won


def test_server_rejects_bad_requests(shop_server):
    assert httpx.get(f"{shop_server}/session-x").status_code == 404
    assert httpx.get(f"{shop_server}/done/fixed_0/NOPE/%7B%7D").status_code == 404
    assert httpx.get(f"{shop_server}/done/fixed_0/B0X/not-a-dict").status_code == 400


def test_http_client_reports_a_dead_server():
    env = make("webshop", base_url="http://127.0.0.1:9", timeout=2.0)
    with pytest.raises(EnvError, match="GET http://127.0.0.1:9/fixed_0 failed"):
        env.reset("fixed_0")
