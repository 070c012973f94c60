"""Shrinking long series for charts without hiding what matters.

A one-hour replay samples every 0.5 s (7,200 rows) and logs millions of events; a page must
stay small. Usage series are bucketed keeping each bucket's *maximum* (a peak that crossed a
watermark must survive downsampling), CDFs keep evenly spaced quantiles, and event streams
become counts per time bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

MAX_POINTS = 1500
MAX_CDF_POINTS = 400
MAX_BUCKETS = 150


def downsample_max(df: pd.DataFrame, t_col: str, columns: Sequence[str], max_points: int = MAX_POINTS) -> pd.DataFrame:
    """At most `max_points` rows: consecutive rows grouped, each column's max kept, time = first."""
    df = df.sort_values(t_col)
    if len(df) <= max_points:
        return df[[t_col, *columns]]
    group = np.arange(len(df)) // math.ceil(len(df) / max_points)
    out = df[list(columns)].groupby(group).max()
    out.insert(0, t_col, df[t_col].groupby(group).first())
    return out


def cdf_points(values: pd.Series, max_points: int = MAX_CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(x, cumulative fraction) of the finite values, at most `max_points` of them."""
    x = np.sort(values[np.isfinite(values)].to_numpy(dtype=float))
    if x.size == 0:
        return x, x
    y = np.arange(1, x.size + 1) / x.size
    if x.size > max_points:
        pick = np.unique(np.linspace(0, x.size - 1, max_points).round().astype(int))
        x, y = x[pick], y[pick]
    return x, y


def bucket_size_s(t_min: float, t_max: float, max_buckets: int = MAX_BUCKETS) -> float:
    """A round bucket width (1, 2, 5 × 10^k seconds) giving at most `max_buckets` buckets."""
    span = max(t_max - t_min, 1.0)
    for exponent in range(-1, 7):
        for mantissa in (1, 2, 5):
            width = mantissa * 10.0**exponent
            if span / width <= max_buckets:
                return width
    return span / max_buckets


def per_bucket(times: pd.Series, weights: pd.Series | None, width_s: float) -> pd.Series:
    """Sum of `weights` (or a count) per time bucket of `width_s`, indexed by bucket start."""
    start = np.floor(times.to_numpy(dtype=float) / width_s) * width_s
    values = pd.Series(1.0 if weights is None else weights.fillna(1.0).to_numpy(dtype=float), index=start)
    return values.groupby(level=0).sum()
