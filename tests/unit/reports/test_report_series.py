import numpy as np
import pandas as pd

from reports.series import bucket_size_s, cdf_points, downsample_max, per_bucket


def test_downsampling_keeps_the_peak():
    t = np.arange(10_000, dtype=float)
    usage = np.full(10_000, 0.5)
    usage[7_777] = 0.99
    out = downsample_max(pd.DataFrame({"t_s": t, "usage": usage}), "t_s", ["usage"], max_points=500)
    assert len(out) <= 500 and out["usage"].max() == 0.99


def test_short_series_are_left_alone():
    df = pd.DataFrame({"t_s": [2.0, 1.0], "usage": [0.2, 0.1]})
    assert downsample_max(df, "t_s", ["usage"])["t_s"].tolist() == [1.0, 2.0]


def test_cdf_drops_infinite_values_and_caps_points():
    x, y = cdf_points(pd.Series([3.0, 1.0, np.inf, 2.0]))
    assert x.tolist() == [1.0, 2.0, 3.0] and y.tolist() == [1 / 3, 2 / 3, 1.0]
    x, y = cdf_points(pd.Series(np.arange(100_000, dtype=float)), max_points=400)
    assert len(x) <= 400 and y[-1] == 1.0 and x[-1] == 99_999


def test_buckets_are_round_and_bounded():
    assert bucket_size_s(0, 100) == 1
    assert bucket_size_s(0, 3600, max_buckets=150) == 50
    counts = per_bucket(pd.Series([0.2, 0.7, 1.5]), pd.Series([2.0, None, 5.0]), 1.0)
    assert counts.to_dict() == {0.0: 3.0, 1.0: 5.0}
