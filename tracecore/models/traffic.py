"""Sec. VI of the paper's analysis notebook: a linear model of the data sent per training step.

The paper regresses MB per step (all workers' sent bytes per mean step) on model size, the
framework_backend pair, the batch size and the topology, one-hot encoded with the first level dropped
(`pd.get_dummies(drop_first=True)`; the batch size is a string there, so it is categorical too), with
an intercept, and reads coefficients and standard errors from statsmodels OLS. We compute the same
OLS with numpy: coef = (XᵀX)⁻¹Xᵀy, SE = sqrt(diag(σ²(XᵀX)⁻¹)) with σ² = RSS/(n − p), R² and adjusted R².

A feature that does not vary (one model size only) or is confounded with earlier ones (every gloo run
is also the only ring run) carries no information of its own; it is dropped and listed, not fitted
to a meaningless number. Too few runs for the remaining features (n ≤ p) is refused. Predictions are
offered for every unmeasured combination of the seen levels, flagged when the data cannot identify
them (the combination breaks a confounding seen in the runs).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tracecore.errors import ModelFitError
from tracecore.ingest.runname import BYTES_PER_PARAM
from tracecore.models.input_checks import numeric

if TYPE_CHECKING:
    import polars as pl

# Sizes the paper uses (seed 000 cell 39: MB of the saved model); others come from the input or the user.
KNOWN_MODEL_SIZE_MB = {"mobilenetv2": 14.0, "densenet201": 80.0, "resnet50": 98.0, "resnet101": 171.0}
CATEGORICAL = ("framework_backend", "batch_size", "topology")
TOLERANCE = 1e-9


@dataclass
class TrafficFit:
    """Result of `fit_traffic`: coefficient table, fit statistics, dropped features, predictions."""

    coefficients: pl.DataFrame
    n_runs: int
    n_coefficients: int
    r2: float
    adj_r2: float
    dropped: list[str] = field(default_factory=list)
    fitted: pl.DataFrame | None = None
    predictions: pl.DataFrame | None = None

    def summary(self) -> pl.DataFrame:
        """One-row table of the fit statistics."""
        import polars as pl

        return pl.DataFrame(
            [
                {
                    "n_runs": self.n_runs,
                    "n_coefficients": self.n_coefficients,
                    "r2": self.r2,
                    "adj_r2": self.adj_r2,
                    "dropped": ", ".join(self.dropped),
                }
            ]
        )


def prepare(runs: pl.DataFrame, model_sizes: dict[str, float] | None = None) -> pl.DataFrame:
    """Normalise a data-per-step table to the model's columns.

    Output: run, model_size_mb, framework_backend, batch_size, topology, mb_per_step.

    Model size comes from `model_size_mb`, else `n_params` (fp32: 4 bytes each), else `grad_bytes`
    (bytes all-reduced per step, from a bench run's metadata), else by model name: `model_sizes`, the
    paper's table, or another run of the same model.
    """
    import polars as pl

    need = ["mb_per_step", "batch_size", "topology"]
    missing = [c for c in need if c not in runs.columns]
    if "framework_backend" not in runs.columns and not {"framework", "backend"} <= set(runs.columns):
        missing.append("framework_backend (or framework and backend)")
    if missing:
        raise ModelFitError(f"traffic input lacks column(s) {', '.join(missing)}")
    df = numeric(runs, ("mb_per_step", "model_size_mb", "n_params", "grad_bytes"), what="traffic input")
    if "framework_backend" not in df.columns:
        df = df.with_columns(
            pl.concat_str(pl.col("framework"), pl.lit("_"), pl.col("backend")).alias("framework_backend")
        )
    if "model_size_mb" not in df.columns and "n_params" in df.columns:
        df = df.with_columns(
            (pl.col("n_params").cast(pl.Float64) * BYTES_PER_PARAM / 1e6).alias("model_size_mb")
        )
    if "model_size_mb" not in df.columns and "grad_bytes" in df.columns:
        df = df.with_columns((pl.col("grad_bytes").cast(pl.Float64) / 1e6).alias("model_size_mb"))
    if "model_size_mb" not in df.columns or df["model_size_mb"].null_count():
        df = _sizes_by_name(df, model_sizes)
    if "run" not in df.columns:
        df = df.with_row_index("run").with_columns(pl.col("run").cast(pl.String))
    df = df.select(
        pl.col("run").cast(pl.String),
        pl.col("model_size_mb").cast(pl.Float64),
        pl.col("framework_backend").cast(pl.String),
        pl.col("batch_size").cast(pl.String),
        pl.col("topology").cast(pl.String),
        pl.col("mb_per_step").cast(pl.Float64),
    )
    bad = df.filter(pl.any_horizontal(pl.all().is_null()) | ~pl.col("mb_per_step").is_finite())
    if bad.height:
        raise ModelFitError(
            f"traffic: run(s) {', '.join(bad['run'].to_list())} have missing values or no data per step"
        )
    return df


def _sizes_by_name(df: pl.DataFrame, model_sizes: dict[str, float] | None) -> pl.DataFrame:
    """Fill missing model sizes by model name: the user's, the paper's, or another run's known size."""
    import polars as pl

    if "model" not in df.columns:
        raise ModelFitError("traffic input needs model_size_mb, n_params, grad_bytes or model")
    sizes = dict(KNOWN_MODEL_SIZE_MB)
    if "model_size_mb" in df.columns:
        known = df.filter(pl.col("model_size_mb").is_not_null())
        sizes.update(zip(known["model"].to_list(), known["model_size_mb"].to_list(), strict=True))
    sizes.update(model_sizes or {})
    unknown = sorted({m for m in df["model"].to_list() if m not in sizes})
    if unknown:
        raise ModelFitError(
            f"traffic: model size unknown for {', '.join(map(str, unknown))}; give it as --model-size NAME=MB"
        )
    by_name = pl.col("model").replace_strict(sizes, return_dtype=pl.Float64)
    size = pl.coalesce(pl.col("model_size_mb"), by_name) if "model_size_mb" in df.columns else by_name
    return df.with_columns(size.alias("model_size_mb"))


RUNS_SQL = """
SELECT d.run, d.mb_per_step, d.steps, m.grad_bytes, m.framework, m.model, m.backend,
       m.batch_size, m.topology, m.loss_pct, m.path
FROM data_per_step AS d
JOIN run_meta AS m USING (run)
ORDER BY d.run
"""


def load_runs(data_dir: Any, *, include_loss: bool = False) -> pl.DataFrame:
    """The `data_per_step` view joined with run metadata, from the dataset's DuckDB catalog.

    Like the paper (delays = "normal"), runs with injected packet loss are left out unless
    `include_loss`: loss changes the traffic for reasons the model has no feature for.
    """
    import polars as pl

    from tracecore.models.catalog_input import catalog_frame

    table = catalog_frame(data_dir, RUNS_SQL, model="traffic")
    if not include_loss:
        table = table.filter(pl.col("loss_pct").fill_null(0.0) == 0.0)
    if table.height == 0:
        raise ModelFitError(f"{data_dir}: no run with logged training steps and packets in data_per_step")
    return table


def _design(df: pl.DataFrame, levels: dict[str, list[str]]) -> tuple[np.ndarray, list[str]]:
    """Intercept, model size, then one dummy per non-first level of each categorical feature."""
    columns = [np.ones(df.height), df["model_size_mb"].to_numpy()]
    names = ["const", "model_size_mb"]
    for feature in CATEGORICAL:
        values = df[feature].to_list()
        for level in levels[feature][1:]:
            columns.append(np.array([1.0 if v == level else 0.0 for v in values]))
            names.append(f"{feature}_{level}")
    return np.column_stack(columns), names


def _levels(df: pl.DataFrame) -> dict[str, list[str]]:
    def key(v: str) -> tuple[int, float | str]:
        try:
            return (0, float(v))
        except ValueError:
            return (1, v)

    # pandas.get_dummies orders levels by sort; batch sizes sort numerically here (64 < 128) as they read.
    return {f: sorted(set(df[f].to_list()), key=key) for f in CATEGORICAL}


def _independent_columns(x: np.ndarray, names: list[str]) -> tuple[list[int], list[str]]:
    """Greedy: keep a column only if it raises the rank; the others are constant or confounded."""
    keep: list[int] = []
    dropped: list[str] = []
    for j in range(x.shape[1]):
        trial = [*keep, j]
        if np.linalg.matrix_rank(x[:, trial], tol=None) == len(trial):
            keep.append(j)
        else:
            dropped.append(names[j])
    return keep, dropped


def fit_traffic(runs: pl.DataFrame, model_sizes: dict[str, float] | None = None) -> TrafficFit:
    """OLS of MB per step on the Sec. VI features, with standard errors, R² and predictions."""
    import polars as pl
    from scipy import stats

    df = prepare(runs, model_sizes)
    levels = _levels(df)
    x_all, names_all = _design(df, levels)
    keep, dropped = _independent_columns(x_all, names_all)
    x = x_all[:, keep]
    names = [names_all[j] for j in keep]
    y = df["mb_per_step"].to_numpy()
    n, p = x.shape
    if n <= p:
        raise ModelFitError(
            f"traffic: {n} run(s) for {p} coefficients ({', '.join(names)}); need at least {p + 1} runs "
            "with these features"
        )
    xtx_inv = np.linalg.inv(x.T @ x)
    coef = xtx_inv @ x.T @ y
    fitted = x @ coef
    resid = y - fitted
    df_resid = n - p
    sigma2 = float(resid @ resid) / df_resid
    se = np.sqrt(np.clip(np.diag(xtx_inv) * sigma2, 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, coef / se, np.nan)
    pvalue = 2 * stats.t.sf(np.abs(t), df_resid)
    tss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(resid @ resid) / tss if tss > 0 else float("nan")
    adj = 1.0 - (1.0 - r2) * (n - 1) / df_resid if tss > 0 else float("nan")

    coefficients = pl.DataFrame({"term": names, "coef": coef, "std_err": se, "t": t, "p_value": pvalue})
    fitted_table = df.with_columns(pl.Series("fitted_mb_per_step", fitted), pl.Series("residual", resid))
    predictions = _predict_unmeasured(df, levels, x_all, keep, coef)
    return TrafficFit(
        coefficients=coefficients,
        n_runs=n,
        n_coefficients=p,
        r2=r2,
        adj_r2=adj,
        dropped=dropped,
        fitted=fitted_table,
        predictions=predictions,
    )


def _predict_unmeasured(
    df: pl.DataFrame, levels: dict[str, list[str]], x_all: np.ndarray, keep: list[int], coef: np.ndarray
) -> pl.DataFrame:
    """Predictions for every unmeasured combination of seen levels; `identifiable` is False when the
    combination's design row is outside the row space of the measured runs (its value then depends on
    which confounded feature was dropped, so it is not a prediction the data supports)."""
    import polars as pl

    sizes = sorted(set(df["model_size_mb"].to_list()))
    measured = set(zip(*(df[c].to_list() for c in ("model_size_mb", *CATEGORICAL)), strict=True))
    combos = [c for c in itertools.product(sizes, *(levels[f] for f in CATEGORICAL)) if c not in measured]
    schema = {
        "model_size_mb": pl.Float64,
        "framework_backend": pl.String,
        "batch_size": pl.String,
        "topology": pl.String,
        "predicted_mb_per_step": pl.Float64,
        "identifiable": pl.Boolean,
    }
    if not combos:
        return pl.DataFrame(schema=schema)
    new = pl.DataFrame(combos, schema=list(schema)[:4], orient="row")
    x_new_all, _ = _design(new, levels)
    # A row is identifiable when projecting it on the measured rows' span leaves it unchanged.
    projector = np.linalg.pinv(x_all) @ x_all
    residual = np.abs(x_new_all - x_new_all @ projector).max(axis=1)
    scale = np.abs(x_new_all).max(axis=1)
    identifiable = residual <= 1e-8 * np.maximum(scale, 1.0)
    predicted = x_new_all[:, keep] @ coef
    return new.with_columns(
        pl.Series("predicted_mb_per_step", predicted), pl.Series("identifiable", identifiable)
    ).sort("identifiable", "predicted_mb_per_step", descending=[True, False])


def chart(fit: TrafficFit) -> Any:
    """Measured vs fitted MB per step, one point per run, with the identity line."""
    import altair as alt

    from tracecore.figures._data import inline, rows

    data = fit.fitted
    top = float(max(data["mb_per_step"].max(), data["fitted_mb_per_step"].max())) * 1.05
    points = (
        alt.Chart(inline(rows(data)))
        .mark_circle(size=60)
        .encode(
            x=alt.X("mb_per_step:Q", title="measured MB per step"),
            y=alt.Y("fitted_mb_per_step:Q", title="fitted MB per step"),
            color=alt.Color("framework_backend:N"),
            shape=alt.Shape("topology:N"),
            tooltip=[
                "run:N",
                "model_size_mb:Q",
                "framework_backend:N",
                "batch_size:N",
                "topology:N",
                "mb_per_step:Q",
            ],
        )
    )
    line = (
        alt.Chart(inline([{"v": 0.0}, {"v": top}]))
        .mark_line(color="gray", strokeDash=[4, 4])
        .encode(x="v:Q", y="v:Q")
    )
    return alt.layer(line, points).properties(
        width=360, height=360, title=f"Data per step: linear model, R² = {fit.r2:.3f} (n = {fit.n_runs})"
    )
