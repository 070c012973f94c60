from gates import Outcome


def test_passes_when_no_witness_saw_an_oom(judge, healthy):
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.PASS and result.headline.value == 0


def test_engine_oom_event_fails_it(judge, healthy):
    result = judge(healthy.event("oom", 40.0, request_id="int-3", num_blocks=12), "no_oom")
    assert result.outcome is Outcome.FAIL
    assert result.evidence["oom_events"][0]["request_id"] == "int-3"


def test_client_5xx_out_of_memory_fails_it(judge, healthy):
    healthy.request("oom-1", sent_s=30, status="error", http_status=500, error_code="out_of_memory", ttft_s=None)
    result = judge(healthy.signals(engine_events=False, gpu_memory=False), "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["oom_responses"] == ["oom-1"]


def test_gpu_sample_over_capacity_fails_it(judge, healthy):
    healthy.sample(50.5, 800, gpu_mem_used_bytes=81e9, gpu_mem_total_bytes=80e9)
    result = judge(healthy.signals(engine_events=False, client_requests=False), "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["gpu_peak"]["t_s"] == 50.5


def test_not_measurable_without_any_witness(judge, healthy):
    healthy.signals(engine_events=False, client_requests=False, gpu_memory=False)
    assert judge(healthy, "no_oom").outcome is Outcome.NOT_MEASURABLE


def test_a_client_only_witness_that_saw_nothing_is_not_a_pass(judge, healthy):
    result = judge(healthy.signals(engine_events=False, gpu_memory=False), "no_oom")
    assert result.outcome is Outcome.NOT_MEASURABLE and "target names none" in result.explanation


def test_without_engine_events_a_bare_5xx_is_a_possible_oom_and_a_refusal_is_not(judge, healthy):
    healthy.request("busy-1", sent_s=30, status="error", http_status=503, error_code="overloaded", ttft_s=None)
    healthy.signals(engine_events=False, gpu_memory=False)
    assert judge(healthy, "no_oom").outcome is Outcome.NOT_MEASURABLE
    healthy.request("crash-1", sent_s=31, status="error", http_status=500, error_code="http_500", ttft_s=None)
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["oom_responses"] == ["crash-1"]


def test_with_engine_events_a_bare_5xx_is_left_to_the_engine_witness(judge, healthy):
    healthy.request("crash-1", sent_s=31, status="error", http_status=500, error_code="http_500", ttft_s=None)
    assert judge(healthy, "no_oom").outcome is Outcome.PASS


# ---------------------------------------------------------------- witnesses from outside the engine
def outside(builder, **collectors: bool):
    """A target without engine events or GPU samples; `collectors` says which outside witness it had."""
    from record.run_record import CollectorStatus

    builder.signals(engine_events=False, gpu_memory=False)
    builder.rows["events"].clear()
    return builder.meta(collectors={k: CollectorStatus(available=v, detail="test") for k, v in collectors.items()})


def test_a_restart_watch_that_saw_nothing_makes_a_pass_and_says_what_it_rested_on(tmp_path, healthy):
    from gates import evaluate

    record = outside(healthy, engine_restarts=True, target_log=False).build(tmp_path / "run")
    result = evaluate(record, only=["no_oom"]).result("no_oom")
    assert result.outcome is Outcome.PASS and result.evidence["counts"]["engine restarts (possible OOM)"] == 0
    assert "engine restarts seen from outside (process start time, /health)" in result.sources
    assert not any("log" in s for s in result.sources)


def test_one_restart_seen_by_two_witnesses_counts_once(judge, healthy):
    outside(healthy, engine_restarts=True)
    healthy.event("engine_restart", 30.0, reason="health", latency_s=20.0)
    healthy.event("engine_restart", 50.0, reason="process_start_time")
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.FAIL and result.headline.value == 1
    assert [r["reason"] for r in result.evidence["restarts"]] == ["health", "process_start_time"]


def test_an_oom_line_in_the_log_fails_it_and_pressure_lines_do_not(judge, healthy):
    outside(healthy, target_log=True)
    healthy.event("log_match", 40.0, reason="llamacpp_kv_retry", mode="pressure")
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.PASS and result.evidence["log_pressure"] == {"llamacpp_kv_retry": 1}
    healthy.event("log_match", 41.0, reason="torch_oom", mode="oom")
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.FAIL and result.evidence["log_oom"] == [{"t_s": 41.0, "reason": "torch_oom"}]


def test_preemptions_are_pressure_reported_beside_the_count_never_in_it(judge, healthy):
    outside(healthy, engine_restarts=True, preemptions=True)
    healthy.initial(num_preemptions=4).final(num_preemptions=11)
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.PASS and result.evidence["preemptions"] == 7
    assert "7 preemptions" in result.explanation


def test_a_preemption_counter_alone_cannot_show_there_was_no_oom(judge, healthy):
    outside(healthy, engine_restarts=False, target_log=False, preemptions=True)
    healthy.initial(num_preemptions=0).final(num_preemptions=3)
    result = judge(healthy, "no_oom")
    assert result.outcome is Outcome.NOT_MEASURABLE and result.evidence["preemptions"] == 3
