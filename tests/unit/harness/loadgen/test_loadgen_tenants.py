from __future__ import annotations

import pytest

from harness.loadgen.tenants import (
    DEFAULT_SPEC,
    Tenant,
    TenantSet,
    TenantSpecError,
    format_tenants,
    parse_tenants,
    tenants_of_config,
)
from reference_engine import load_config


def test_a_spec_names_key_and_class_and_the_class_defaults_to_interactive() -> None:
    assert parse_tenants("acme=sk-acme:interactive, batchco=sk-batch:batch,me=sk-123") == (
        Tenant("acme", "sk-acme", "interactive"),
        Tenant("batchco", "sk-batch", "batch"),
        Tenant("me", "sk-123", "interactive"),
    )


def test_a_key_may_contain_colons_when_its_class_follows() -> None:
    assert parse_tenants("me=tok:en:x:batch") == (Tenant("me", "tok:en:x", "batch"),)


def test_an_unknown_class_is_refused_not_taken_for_part_of_the_key() -> None:
    with pytest.raises(TenantSpecError, match="not a traffic class") as err:
        parse_tenants("me=sk-acme:vip")
    assert "sk-acme" not in str(err.value)  # a message never shows a key


@pytest.mark.parametrize("spec", ["", "acme", "=sk", "acme="])
def test_a_malformed_spec_says_what_is_expected(spec: str) -> None:
    with pytest.raises(TenantSpecError, match="name=key"):
        parse_tenants(spec)


def test_the_default_spec_is_the_default_configs_tenants_and_round_trips() -> None:
    tenants = parse_tenants(DEFAULT_SPEC)
    assert tenants == tenants_of_config(load_config("configs/default.toml"))
    assert parse_tenants(format_tenants(tenants)) == tenants


FOUR = "acme=k1,globex=k2,initech=k3,umbrella=k4,batchco=k5:batch,nightly=k6:batch"


def test_users_are_spread_round_robin_over_the_tenants_of_their_class() -> None:
    tenants = TenantSet(parse_tenants(FOUR))
    assert [tenants.pick("interactive", i).name for i in range(5)] == ["acme", "globex", "initech", "umbrella", "acme"]
    assert tenants.pick("batch", 3).name == "nightly"


def test_successive_users_of_any_scenario_take_the_next_tenant_of_their_class() -> None:
    # the first user of every scenario must not all land on acme (one tenant, one cap)
    tenants = TenantSet(parse_tenants(FOUR))
    firsts = [tenants.next_of_class("interactive").name for _ in range(5)]
    assert firsts == ["acme", "globex", "initech", "umbrella", "acme"]
    assert [tenants.next_of_class("batch").name for _ in range(3)] == ["batchco", "nightly", "batchco"]


def test_a_target_without_a_tenant_of_the_class_degrades_to_any_tenant() -> None:
    tenants = TenantSet(parse_tenants("me=sk-123"))
    assert tenants.pick("batch", 0) == Tenant("me", "sk-123", "interactive")


def test_an_unknown_tenant_name_lists_the_known_ones() -> None:
    with pytest.raises(TenantSpecError, match="acme"):
        TenantSet(parse_tenants(DEFAULT_SPEC)).named("nobody")
