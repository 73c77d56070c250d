"""Optimus-style models: loss-curve fit, convergence point, speed models and time to convergence.

From the Optimus paper (Peng et al., EuroSys 2018), its prototype (`scheduler/estimator.py`) and
the reference Optimus notebook (a course notebook that reproduces it on ResNets on K80/P100/V100):

- loss `l(k) = 1/(b0·k + b1) + b2` with b ≥ 0, fitted by bounded non-linear least squares (TRF). The
  prototype weights later points more: three consecutive segments, point i has σ = 1/4^segment, i.e.
  its residual counts 4^segment times; `weighted=True` does the same.
- convergence point: the first k (from `start`) where the fitted loss changed by at most `threshold`
  (0.05) over the last `window` (10) units, capped (100) — the prototype returns −1 past the cap, we
  return None.
- synchronous speed (steps/s) `f(w,p) = 1/(θ0·M/w + θ1 + θ2·w/p + θ3·w + θ4·p)` with M the global
  batch, θ ≥ 0, ≥ 5 distinct points; asynchronous `f(w,p) = w/(θ0 + θ1·w/p + θ2·w + θ3·p)`, ≥ 4 points.
- time to convergence `total_steps / f(w,p)`. The reference notebook divides the steps by the
  denominator of f, i.e. multiplies them by the speed; `time_to_convergence` reports that number too,
  as `steps_over_denominator`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tracecore.errors import ModelFitError
from tracecore.models.input_checks import numeric

if TYPE_CHECKING:
    import polars as pl

MIN_LOSS_POINTS = 3
# How both bounded fits call scipy's least_squares. The loss curve's valley is flat: the default
# tolerances (1e-8) stop 1e-3 short of the minimum, where depends on scipy's version; 1e-12 runs to it.
BOUNDED_FIT = {
    "method": "trf",
    "x_scale": "jac",
    "max_nfev": 20_000,
    "ftol": 1e-12,
    "xtol": 1e-12,
    "gtol": 1e-12,
}
MIN_SYNC_POINTS = 5
MIN_ASYNC_POINTS = 4
NUM_SEGMENTS = 3


@dataclass(frozen=True)
class LossFit:
    """Fitted `l(k) = 1/(b0·k + b1) + b2`."""

    b0: float
    b1: float
    b2: float
    n_points: int
    rmse: float

    def predict(self, k: Any) -> np.ndarray:
        """Loss at k (array-like)."""
        k = np.asarray(k, dtype=float)
        with np.errstate(divide="ignore"):
            return 1.0 / (self.b0 * k + self.b1) + self.b2


def _loss_curve(params: np.ndarray, k: np.ndarray) -> np.ndarray:
    b0, b1, b2 = params
    return 1.0 / (b0 * k + b1) + b2


def segment_weights(n: int, segments: int = NUM_SEGMENTS) -> np.ndarray:
    """The prototype's residual weights: 4^segment over `segments` consecutive runs of points."""
    size = math.ceil(n / segments)
    return np.array([4.0 ** (i // size) for i in range(n)])


def fit_loss_curve(k: Any, loss: Any, *, weighted: bool = False) -> LossFit:
    """Bounded least-squares fit of the Optimus loss curve to (k, loss) points (k = step or epoch)."""
    from scipy.optimize import least_squares

    k = np.asarray(k, dtype=float)
    loss = np.asarray(loss, dtype=float)
    keep = np.isfinite(k) & np.isfinite(loss)
    k, loss = k[keep], loss[keep]
    if k.size < MIN_LOSS_POINTS:
        raise ModelFitError(f"loss curve: {k.size} finite point(s); the fit needs at least {MIN_LOSS_POINTS}")
    if np.any(k < 0):
        raise ModelFitError("loss curve: steps/epochs must be ≥ 0")
    weights = segment_weights(k.size) if weighted else np.ones(k.size)
    # Start from the straight-line inverse of the first and last points above the floor.
    b2_0 = max(0.0, float(loss.min()) * 0.5)
    inv = 1.0 / np.maximum(loss - b2_0, 1e-9)
    span = max(float(k.max() - k.min()), 1.0)
    b0_0 = max((inv[-1] - inv[0]) / span, 1e-6)
    b1_0 = max(float(inv[0] - b0_0 * k[0]), 1e-3)
    x0 = np.array([b0_0, b1_0, b2_0])

    def residuals(params: np.ndarray) -> np.ndarray:
        return (_loss_curve(params, k) - loss) * weights

    # b1 > 0 keeps 1/(b0·k + b1) finite at k = 0; the prototype's bound is 0 and it never sits there.
    lower = np.array([0.0, 1e-12, 0.0])
    result = least_squares(residuals, x0, bounds=(lower, np.inf), **BOUNDED_FIT)
    if not result.success or not np.all(np.isfinite(result.x)):
        raise ModelFitError(f"loss curve fit did not converge: {result.message}")
    b0, b1, b2 = (float(v) for v in result.x)
    rmse = float(np.sqrt(np.mean((_loss_curve(result.x, k) - loss) ** 2)))
    return LossFit(b0=b0, b1=b1, b2=b2, n_points=int(k.size), rmse=rmse)


def convergence_point(
    fit: LossFit, *, start: int = 0, window: int = 10, threshold: float = 0.05, cap: int = 100
) -> int | None:
    """First k ≥ start + window − 1 whose last `window` fitted losses exceed l(k) by ≤ threshold.

    The prototype starts at `max(0, progress − 10)` with progress the last epoch seen; pass that as
    `start`. None when no such k ≤ cap exists (the prototype's −1).
    """
    start = max(0, int(start))
    k = start + window - 1
    while k <= cap:
        ks = np.arange(k - window + 1, k + 1, dtype=float)
        values = fit.predict(ks)
        if np.all(values - values[-1] <= threshold):
            return k
        k += 1
    return None


def loss_fit_table(fit: LossFit, convergence: int | None) -> pl.DataFrame:
    """The fit as a one-row table."""
    import polars as pl

    return pl.DataFrame(
        [
            {
                "b0": fit.b0,
                "b1": fit.b1,
                "b2": fit.b2,
                "n_points": fit.n_points,
                "rmse": fit.rmse,
                "convergence_point": convergence,
            }
        ],
        schema_overrides={"convergence_point": pl.Int64},
    )


def ridge_loss_params(fits: pl.DataFrame, predict_for: pl.DataFrame, *, alpha: float = 1.0) -> pl.DataFrame:
    """Ridge regression of b0, b1, b2 on model depth and GPU type (one-hot, all levels), as the notebook.

    `fits` has columns depth, gpu, b0, b1, b2; `predict_for` has depth, gpu. GPU types in
    `predict_for` must appear in `fits`. The reference notebook builds its prediction frame with columns in a
    different order than it fitted with (depth, K80, V100, P100 vs depth, K80, P100, V100); sklearn of
    2019 matched them by position, so its printed "P100" column is V100's prediction and vice versa.
    Here columns are matched by name.
    """
    import polars as pl
    from sklearn.linear_model import Ridge

    for name, frame, cols in (
        ("fits", fits, ("depth", "gpu", "b0", "b1", "b2")),
        ("predict_for", predict_for, ("depth", "gpu")),
    ):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ModelFitError(f"ridge: {name} lacks column(s) {', '.join(missing)}")
    fits = numeric(fits, ("depth", "b0", "b1", "b2"), what="ridge fits")
    predict_for = numeric(predict_for, ("depth",), what="ridge prediction rows")
    fits = fits.with_columns(pl.col("gpu").cast(pl.String))
    gpus = sorted(set(fits["gpu"].to_list()))
    unknown = sorted(set(predict_for["gpu"].to_list()) - set(gpus))
    if unknown:
        raise ModelFitError(f"ridge: GPU type(s) {unknown} not among the fitted ones {gpus}")
    if fits.height < 2:
        raise ModelFitError("ridge: needs at least 2 fitted curves")

    def design(frame: pl.DataFrame) -> np.ndarray:
        depth = frame["depth"].cast(pl.Float64).to_numpy()[:, None]
        onehot = np.array([[1.0 if g == level else 0.0 for level in gpus] for g in frame["gpu"].to_list()])
        return np.hstack([depth, onehot])

    x_fit, x_new = design(fits), design(predict_for)
    out = predict_for.select("depth", "gpu")
    for param in ("b0", "b1", "b2"):
        model = Ridge(alpha=alpha).fit(x_fit, fits[param].cast(pl.Float64).to_numpy())
        out = out.with_columns(pl.Series(param, model.predict(x_new)))
    return out


CURVE_NAME = re.compile(r"optimus_(?P<depth>\d+)_(?P<gpu>[A-Za-z0-9]+)\.csv$")


def fits_from_curves(paths: list[Any], *, weighted: bool = False, drop_tail: int = 0) -> pl.DataFrame:
    """Fit every `optimus_<depth>_<gpu>.csv` loss curve (the notebook's files) → depth, gpu, b0, b1, b2.

    GPU names are upper-cased (the notebook mixes `k80` and `K80`). It drops the last 5 rows of each
    file before fitting; `drop_tail=5` does the same.
    """
    import polars as pl

    from tracecore.models.loss_input import loss_points

    rows = []
    for path in paths:
        match = CURVE_NAME.search(str(path))
        if match is None:
            raise ModelFitError(f"{path}: name must be optimus_<depth>_<gpu>.csv to give depth and GPU type")
        points = loss_points(path)
        if drop_tail:
            points = points.head(max(points.height - drop_tail, 0))
        fit = fit_loss_curve(points["step"].to_numpy(), points["loss"].to_numpy(), weighted=weighted)
        rows.append(
            {
                "depth": int(match["depth"]),
                "gpu": match["gpu"].upper(),
                "b0": fit.b0,
                "b1": fit.b1,
                "b2": fit.b2,
            }
        )
    return pl.DataFrame(rows).sort("depth", "gpu")


@dataclass(frozen=True)
class SpeedModel:
    """Fitted speed model; `kind` is "sync" (θ0..θ4, needs M) or "async" (θ0..θ3)."""

    kind: str
    theta: tuple[float, ...]
    batch: float | None = None  # M, the global batch size (sync only)

    def denominator(self, w: Any, p: Any) -> np.ndarray:
        """The sum under the fraction bar of f (sync) or of f/w (async)."""
        w = np.asarray(w, dtype=float)
        p = np.asarray(p, dtype=float)
        t = self.theta
        if self.kind == "sync":
            return t[0] * self.batch / w + t[1] + t[2] * w / p + t[3] * w + t[4] * p
        return t[0] + t[1] * w / p + t[2] * w + t[3] * p

    def speed(self, w: Any, p: Any) -> np.ndarray:
        """Training speed in steps per second."""
        d = self.denominator(w, p)
        return 1.0 / d if self.kind == "sync" else np.asarray(w, dtype=float) / d


def _speed_features(kind: str, w: np.ndarray, p: np.ndarray, batch: float | None) -> np.ndarray:
    if kind == "sync":
        return np.column_stack([batch / w, np.ones_like(w), w / p, w, p])
    return np.column_stack([np.ones_like(w), w / p, w, p])


def fit_speed(points: pl.DataFrame, *, kind: str = "sync", batch: float | None = None) -> SpeedModel:
    """Fit θ ≥ 0 of the sync or async speed model to measured (workers, ps, speed) points.

    Distinct (workers, ps) pairs are averaged first, as Optimus does with repeated measurements.
    The NNLS solution of the linearised model (1/f for sync, w/f for async) seeds a bounded
    least-squares fit of f itself, the quantity the prototype fits.
    """
    import polars as pl
    from scipy.optimize import least_squares, nnls

    if kind not in ("sync", "async"):
        raise ModelFitError(f"speed model kind must be sync or async, not {kind!r}")
    if kind == "sync" and (batch is None or batch <= 0):
        raise ModelFitError("sync speed model needs the global batch size M > 0")
    missing = [c for c in ("workers", "ps", "speed") if c not in points.columns]
    if missing:
        raise ModelFitError(f"speed points lack column(s) {', '.join(missing)}")
    points = numeric(points, ("workers", "ps", "speed"), what="speed points")
    pts = points.group_by("workers", "ps").agg(pl.col("speed").mean()).sort("workers", "ps")
    need = MIN_SYNC_POINTS if kind == "sync" else MIN_ASYNC_POINTS
    if pts.height < need:
        raise ModelFitError(
            f"{kind} speed model: {pts.height} distinct (workers, ps) point(s); needs at least {need}"
        )
    w = pts["workers"].cast(pl.Float64).to_numpy()
    p = pts["ps"].cast(pl.Float64).to_numpy()
    f = pts["speed"].to_numpy()
    if np.any(w <= 0) or np.any(p <= 0) or np.any(f <= 0):
        raise ModelFitError("speed points need workers > 0, ps > 0 and speed > 0")
    a = _speed_features(kind, w, p, batch)
    target = 1.0 / f if kind == "sync" else w / f
    theta0, _ = nnls(a, target)

    def residuals(theta: np.ndarray) -> np.ndarray:
        d = a @ theta
        return (1.0 / d if kind == "sync" else w / d) - f

    result = least_squares(residuals, theta0, bounds=(0.0, np.inf), **BOUNDED_FIT)
    # TRF nudges a start on the bound strictly inside; keep the NNLS answer when it fits at least as well.
    better = result.success and np.sum(residuals(result.x) ** 2) < np.sum(residuals(theta0) ** 2)
    theta = result.x if better else theta0
    return SpeedModel(kind=kind, theta=tuple(float(t) for t in theta), batch=batch)


def time_to_convergence(model: SpeedModel, *, total_steps: float, workers: Any, ps: Any) -> pl.DataFrame:
    """Seconds to run `total_steps` at f(w, p) for every (workers, ps) pair, the notebook's number beside.

    `steps_over_denominator` is total_steps / denominator, which the reference Optimus notebook plots as
    time: it is steps × speed (steps²/s), not a time. It is only defined for the sync model, the
    notebook's case.
    """
    import polars as pl

    if min(np.atleast_1d(ps)) < 1 or min(np.atleast_1d(workers)) < 1:
        raise ModelFitError("time to convergence: workers and parameter servers must be ≥ 1")
    rows = []
    for p in np.atleast_1d(ps):
        for w in np.atleast_1d(workers):
            speed = float(model.speed(w, p))
            denom = float(model.denominator(w, p))
            rows.append(
                {
                    "ps": int(p),
                    "workers": int(w),
                    "speed_steps_s": speed,
                    "time_s": total_steps / speed,
                    "steps_over_denominator": total_steps / denom if model.kind == "sync" else None,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"steps_over_denominator": pl.Float64})


REFERENCE_THETA = (1.02, 2.78, 4.92, 0.0, 0.02)
REFERENCE_BATCH = 128
REFERENCE_STEPS_PER_EPOCH = 391  # 50000 / 128, rounded as the notebook does
REFERENCE_EPOCHS = 85


def reference_speed_model() -> SpeedModel:
    """The reference notebook's sync speed model (θ from its table, M = 128)."""
    return SpeedModel(kind="sync", theta=REFERENCE_THETA, batch=REFERENCE_BATCH)


def loss_chart(k: Any, loss: Any, fit: LossFit, convergence: int | None = None, unit: str = "step") -> Any:
    """Observed loss points and the fitted curve, extended to the convergence point."""
    import altair as alt

    from tracecore.figures._data import inline
    from tracecore.json_values import json_rows

    k = np.asarray(k, dtype=float)
    end = max(float(k.max()), float(convergence or 0))
    grid = np.linspace(float(k.min()), end, 200)
    observed = json_rows(
        [{"k": float(x), "loss": float(y)} for x, y in zip(k, np.asarray(loss, float), strict=True)]
    )
    fitted = json_rows(
        [{"k": float(x), "loss": float(y)} for x, y in zip(grid, fit.predict(grid), strict=True)]
    )
    points = (
        alt.Chart(inline(observed))
        .mark_point(size=12, opacity=0.6)
        .encode(x=alt.X("k:Q", title=unit), y="loss:Q")
    )
    line = (
        alt.Chart(inline(fitted))
        .mark_line(color="firebrick")
        .encode(x="k:Q", y=alt.Y("loss:Q", title="loss", scale=alt.Scale(zero=False)))
    )
    title = f"l(k) = 1/({fit.b0:.3g}·k + {fit.b1:.3g}) + {fit.b2:.3g}"
    layers = [points, line]
    if convergence is not None:
        rule = alt.Chart(inline([{"k": convergence}])).mark_rule(strokeDash=[4, 4]).encode(x="k:Q")
        layers.append(rule)
    return alt.layer(*layers).properties(width=420, height=260, title=title)


def time_chart(table: pl.DataFrame) -> Any:
    """Time to convergence vs workers, one line per number of parameter servers (log scale)."""
    import altair as alt

    from tracecore.figures._data import inline, rows

    return (
        alt.Chart(inline(rows(table)))
        .mark_line(point=True)
        .encode(
            x=alt.X("workers:Q", title="workers"),
            y=alt.Y("time_s:Q", title="time to convergence [s]", scale=alt.Scale(type="log")),
            color=alt.Color("ps:N", title="parameter servers"),
            tooltip=["workers:Q", "ps:N", alt.Tooltip("time_s:Q", format=".4g")],
        )
        .properties(width=420, height=260, title="Time to convergence = total steps / f(w, p)")
    )
