"""Preflight: one minimal request before any run, and a plain answer when it fails.

It is the check people otherwise do by hand with curl before a load test: a non-streamed chat
completion of one token. What a failure means, said plainly:

    connection refused / no route   the address (scheme, host, port): is the server up there?
    401 / 403                       the API key (the key is shown masked)
    404                             the base URL (give the server root, kvgate appends /v1/...) or
                                    the model name; the models the server lists are shown
    200 without `choices`           not an OpenAI completion: the body is printed
    anything else                   the status and the body

A 429 with an OpenAI error body passes: the address, the key and the model are right, and the
target refuses for capacity now (a tenant at its cap, a pool at the reject rung), which is what
the run's gates judge, not a setup mistake.

Every failure is a `PreflightError` (a KvgateError: `kvgate run` exits 2 with its message).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NoReturn

import httpx

from harness.loadgen.exchange import CHAT_PATH
from record.errors import KvgateError

MODELS_PATH = "/v1/models"
MAX_BODY_CHARS = 2000


class PreflightError(KvgateError):
    """The target failed the preflight request; the message says what to check."""


@dataclass(frozen=True)
class Preflight:
    model: str
    served_models: tuple[str, ...]


def mask(key: str) -> str:
    return key[:5] + "…" + key[-2:] if len(key) > 10 else "…"


def served_models(client: httpx.Client, base_url: str, key: str) -> tuple[str, ...] | None:
    """The ids GET /v1/models lists, or None when it does not answer with a model list."""
    try:
        resp = client.get(base_url + MODELS_PATH, headers={"Authorization": f"Bearer {key}"})
        return tuple(str(m["id"]) for m in resp.json()["data"]) if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


def preflight(
    base_url: str, *, key: str, model: str = "", timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None
) -> Preflight:
    """Send one minimal request; return the model to use (the first served one when `model` is
    empty) or raise PreflightError saying what is wrong. `transport`: a test seam
    (httpx.MockTransport)."""
    base = base_url.rstrip("/")
    with httpx.Client(timeout=timeout_s, transport=transport) as client:
        models = served_models(client, base, key)
        model = model or (models[0] if models else "")
        url = base + CHAT_PATH
        body = {"model": model, "messages": [{"role": "user", "content": "Reply with OK"}], "max_tokens": 1}
        try:
            resp = client.post(url, json=body, headers={"Authorization": f"Bearer {key}"})
        except httpx.ConnectError as err:
            raise PreflightError(
                f"cannot connect to {base} ({err}): check the address — is the server running, "
                f"and are the scheme, host and port right? (try: curl {base}{MODELS_PATH})"
            ) from err
        except httpx.TimeoutException as err:
            raise PreflightError(
                f"no answer from POST {url} within {timeout_s:.0f} s: the server accepted the "
                f"connection but did not reply; is it overloaded or still loading the model?"
            ) from err
        except httpx.HTTPError as err:
            raise PreflightError(f"POST {url} failed: {type(err).__name__}: {err}") from err
    refused_for_capacity = resp.status_code == 429 and _has_error(resp)
    if not refused_for_capacity and (resp.status_code != 200 or not _has_choices(resp)):
        _fail(resp, url=url, base=base, key=key, model=model, models=models)
    return Preflight(model, models or ())


def _has_choices(resp: httpx.Response) -> bool:
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("choices"), list) and bool(body["choices"])


def _has_error(resp: httpx.Response) -> bool:
    """An OpenAI error body: {"error": {...}}."""
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def _fail(
    resp: httpx.Response, *, url: str, base: str, key: str, model: str, models: tuple[str, ...] | None
) -> NoReturn:
    status, text = resp.status_code, resp.text[:MAX_BODY_CHARS]
    if status in (401, 403):
        raise PreflightError(
            f"the target refused the API key {mask(key)} (HTTP {status}: {_message(text)}): check "
            f"the key — for the reference engine a tenant key from the config's [tenants.*] api_keys; "
            f"kvgate run takes them with --tenants or KVGATE_TENANTS"
        )
    if status == 404:
        listed = (
            f"the server lists these models: {', '.join(models)}"
            if models
            else f"GET {base}{MODELS_PATH} lists no models"
        )
        if models and model not in models:
            raise PreflightError(
                f"HTTP 404 from POST {url}: the model {model!r} is not served here; {listed}. "
                f"Pass one of them with --model"
            )
        hint = " (it ends in /v1: give the server root, kvgate appends /v1/... itself)" if base.endswith("/v1") else ""
        raise PreflightError(
            f"HTTP 404 from POST {url}: check the base URL{hint} — it must be the server root, "
            f"e.g. http://127.0.0.1:8000 — and the model name {model!r}; {listed}. "
            f"The answer was: {_message(text)}"
        )
    if status == 200:
        raise PreflightError(
            f"POST {url} answered 200 but the body has no `choices`, so it is not an OpenAI chat "
            f"completion (a proxy page, or another API at this URL?). The body was:\n{text}"
        )
    raise PreflightError(f"HTTP {status} from POST {url} (model {model!r}). The body was:\n{text}")


def _message(text: str) -> str:
    try:
        err = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return text.strip()[:300] or "empty body"
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err or text)[:300]
