"""DB-less key checks for the test LiteLLM proxy (LiteLLM 1.108.7), loaded by litellm.yaml.

Without a database a stock proxy answers a wrong key with 400 `no_db_connection`, and it
cannot enforce per-key budgets. This module restores what a DB-backed proxy does, through
LiteLLM's own code paths, so `harness` can be tested against them:

- `user_api_key_auth` (general_settings.custom_auth): accepts the master key (env
  LITELLM_TEST_MASTER_KEY, set by scripts/litellm-up.sh) and the keys in LITELLM_TEST_KEYS;
  any other or missing key gets LiteLLM's 401
  {"error":{"message":"Invalid API key (custom_auth)","type":"auth_error","param":"None","code":"401"}}.
- LITELLM_TEST_KEYS='sk-user-1,sk-canary-user:0.003' gives keys, optionally with a budget in
  USD. Spend is summed from LiteLLM's own `response_cost` (stream and non-stream) by
  `spend_tracker` (litellm_settings.callbacks). Once spend >= budget, the next request gets
  LiteLLM's real conversion of BudgetExceededError:
  422 {"error":{"message":"Budget has been exceeded! Current cost: ..., Max budget: ...",
  "type":"budget_exceeded","param":null,"code":"422"}}.
  As with a DB, the check runs before each request, so the request that crosses the budget
  still succeeds. Non-stream responses carry x-litellm-key-spend / x-litellm-key-max-budget.

LiteLLM imports this file twice, as two module objects (custom_auth and callbacks), so the
spend table lives on the `litellm` module, not in a global here. Spend is in memory only:
restarting the proxy (or scripts/litellm-up.sh with other keys) resets it.
"""

import os

import litellm
from fastapi import HTTPException, Request
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

_SPEND_ATTR = "_harness_test_key_spend"


def _spend() -> dict:
    table = getattr(litellm, _SPEND_ATTR, None)
    if table is None:
        table = {}
        setattr(litellm, _SPEND_ATTR, table)
    return table


def _keys() -> dict:
    """key -> budget in USD (None: unlimited), from LITELLM_TEST_KEYS."""
    keys = {}
    for item in os.environ.get("LITELLM_TEST_KEYS", "").split(","):
        item = item.strip()
        if not item:
            continue
        key, _, budget = item.partition(":")
        keys[key.strip()] = float(budget) if budget.strip() else None
    return keys


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    master = os.environ.get("LITELLM_TEST_MASTER_KEY", "")
    if master and api_key == master:
        return UserAPIKeyAuth(api_key=api_key, key_alias="master", user_role=LitellmUserRoles.PROXY_ADMIN)
    keys = _keys()
    if not api_key or api_key not in keys:
        # An HTTPException becomes LiteLLM's auth_error ProxyException with this status.
        raise HTTPException(status_code=401, detail="Invalid API key (custom_auth)")
    budget = keys[api_key]
    spent = _spend().get(api_key, 0.0)
    if budget is not None and spent >= budget:
        raise litellm.BudgetExceededError(current_cost=spent, max_budget=budget)
    return UserAPIKeyAuth(
        api_key=api_key,
        key_alias=api_key,
        spend=spent,
        max_budget=budget,
        user_role=LitellmUserRoles.INTERNAL_USER,
    )


class _SpendTracker(CustomLogger):
    """Adds each successful call's response_cost to the calling key's spend."""

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        alias = None
        slo = kwargs.get("standard_logging_object") or {}
        alias = (slo.get("metadata") or {}).get("user_api_key_alias")
        if alias is None:
            meta = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            alias = meta.get("user_api_key_alias")
        if alias is None or alias == "master":
            return
        cost = kwargs.get("response_cost") or 0.0
        table = _spend()
        table[alias] = table.get(alias, 0.0) + float(cost)


spend_tracker = _SpendTracker()
