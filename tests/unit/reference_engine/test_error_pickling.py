"""kvgate's errors cross process boundaries intact (replay workers hand them to the CLI)."""

import pickle

import pytest

from record.errors import CapacityError, ConfigError, ContextLengthError, KvgateError, RequestError, UnknownNameError


@pytest.mark.parametrize(
    "err",
    [
        KvgateError("the policy cannot serve this trace"),
        ConfigError("kv_cache.guard.warn_at_percent = 150: must be at most 100"),
        UnknownNameError("tenant", "nobody", ["globex", "acme"]),
        ContextLengthError("prompt of 40000 tokens exceeds the context of 32768", param="messages"),
        CapacityError("tenant acme is over its KV share", code="tenant_quota", retry_after_s=2.5, limit="kv_share"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_survives_pickling_with_its_message_and_fields(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert vars(back) == vars(err)
    if isinstance(err, RequestError):
        assert back.to_openai() == err.to_openai()
