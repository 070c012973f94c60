"""The names `harness.replay` promises; everything else is importable but not promised."""

import harness.replay


def test_public_face_is_pinned():
    assert sorted(harness.replay.__all__) == [
        "ASSIGNERS",
        "AssignmentSpecError",
        "LOADERS",
        "MaxTokens",
        "ReplayResult",
        "ReplaySettings",
        "ReplayStalled",
        "ReplaySummary",
        "Trace",
        "TraceError",
        "TraceRequest",
        "load_trace",
        "make_assigner",
        "run_replay",
    ]
    assert all(hasattr(harness.replay, name) for name in harness.replay.__all__)
