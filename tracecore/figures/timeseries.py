"""Load over time: Figs. 6, 7, 9 and the burstiness of each link, as Altair charts.

Builders take view results (pyarrow Tables) and return Altair charts; throughput is in Gbit/s on
a time axis in seconds after the run's first packet, as in the paper, or in UTC wall-clock time.
Link utilization is drawn as small multiples (a panel per directed link, or per sender) on one
shared time axis, since twelve lines in one panel cannot be told apart.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import altair as alt
import pyarrow as pa

from tracecore.errors import UsageError
from tracecore.figures._data import HEIGHT, WIDTH, as_arrow, empty_chart, inline, pair_label, rows
from tracecore.figures.style import (
    CATEGORICAL,
    CATEGORY_COLORS,
    DASHES,
    runs_caption,
    short_runs,
    worker_colors,
    worker_key,
)

TIME_TITLE = "Time since first packet [s]"
_LINK = re.compile(r"^\s*(\S+?)\s*(?:→|->|>|-)\s*(\S+)\s*$")
IDLE_SHARE = 0.05  # bins under 5 % of a run's busiest bin, before its first busy one, are set-up
HEADER = alt.Header(
    labelAngle=0, labelAlign="left", labelAnchor="start", labelOrient="top", labelFontWeight="bold"
)


def parse_link(text: str) -> tuple[str, str]:
    """('W1', 'W2') from 'W1→W2', 'W1->W2', 'W1>W2' or 'W1-W2'."""
    match = _LINK.match(text)
    if not match:
        raise UsageError(f"a link is SRC→DST, e.g. W1→W2 or W1-W2, not {text!r}")
    return match.group(1), match.group(2)


def link_util_chart(
    link_util: pa.Table,
    title: str | None = None,
    *,
    links: tuple[str, ...] | list[str] = (),
    top: int | None = None,
    layout: str = "facet",
    clock: str = "relative",
    trim: bool = True,
) -> alt.Chart | alt.FacetChart:
    """Fig. 7: per-link throughput in Gbit/s over time.

    layout "facet": a panel per directed link (rows by sender); "by-source": a panel per sender, a
    line per receiver; "overlay": every link in one panel. Several runs share each panel, a line
    per run. `links` ("W1→W2", …) and `top` (the k busiest) pick links. With `trim`, each run's
    set-up and tear-down (bins under 5 % of its busiest before and after the busy ones) are left
    out, and the subtitle says from when. `clock` "utc" puts wall-clock time on the axis.
    """
    title = title or "Link utilization per directed worker pair"
    data = rows(link_util, ["run", "src_worker", "dst_worker", "bin_start_ns", "t_s", "gbps"])
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    bin_ms = as_arrow(link_util).column("bin_ns")[0].as_py() / 1e6
    data, note = _pick_links(data, links, top)
    if trim:
        kept = trim_idle(data)
        start = min(r["t_s"] for r in kept)
        if start > min(r["t_s"] for r in data):
            trimmed = f"set-up before {start:.1f} s left out"
            note = f"{note} · {trimmed}" if note else trimmed
        data = kept
    labels = short_runs(r["run"] for r in data)
    several = len(labels) > 1
    for r in data:
        r["link"] = pair_label(r["src_worker"], r["dst_worker"])
        r["label"] = labels[r["run"]]
        ns = r.pop("bin_start_ns")
        if clock == "utc":  # a date string per row costs time and page weight: only when drawn
            r["time"] = _utc(ns)
    order = sorted({r["link"] for r in data}, key=lambda k: tuple(map(worker_key, k.split("→"))))
    senders = sorted({r["src_worker"] for r in data}, key=worker_key)
    x = (
        alt.X("time:T", title="Time (UTC)", scale=alt.Scale(type="utc"), axis=alt.Axis(format="%H:%M:%S"))
        if clock == "utc"
        else alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False, zero=False))
    )
    y = alt.Y(
        "gbps:Q",
        title="Throughput [Gbit/s]" if layout != "overlay" else f"Throughput [Gbit/s] ({bin_ms:g} ms bins)",
    )
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("link:N"),
        alt.Tooltip("t_s:Q", format=".3f", title="t [s]"),
        alt.Tooltip("gbps:Q", format=".4f", title="Gbit/s"),
    ]
    if clock == "utc":
        tooltip.insert(3, alt.Tooltip("time:T", format="%H:%M:%S.%L", title="UTC"))
    if several:
        color = alt.Color("label:N", title="Run", scale=alt.Scale(scheme=CATEGORICAL))
    elif layout == "by-source":
        color = alt.Color("dst_worker:N", title="Receiver", sort=senders, scale=worker_colors(_workers(data)))
    elif layout == "overlay" and len(order) > len(CATEGORY_COLORS):
        color = alt.Color("src_worker:N", title="Sender", sort=senders, scale=worker_colors(_workers(data)))
    elif layout == "overlay":
        color = alt.Color("link:N", title="Link", sort=order, scale=alt.Scale(scheme=CATEGORICAL))
    else:
        color = alt.Color("src_worker:N", title="Sender", sort=senders, scale=worker_colors(_workers(data)))
    encoding = {"x": x, "y": y, "color": color, "tooltip": tooltip}
    if layout == "overlay" and not several and len(order) > len(CATEGORY_COLORS):
        receivers = sorted({r["dst_worker"] for r in data}, key=worker_key)
        encoding["strokeDash"] = alt.StrokeDash(
            "dst_worker:N",
            title="Receiver",
            sort=receivers,
            scale=alt.Scale(range=list(DASHES)),
            legend=alt.Legend(
                symbolType="stroke", symbolStrokeColor="#333", symbolStrokeWidth=2, symbolSize=300
            ),
        )
        encoding["detail"] = alt.Detail("link:N")
    line = alt.Chart().mark_line(strokeWidth=1.1, interpolate="step-after").encode(**encoding)
    subtitle = [f"{bin_ms:g} ms bins" + (f" · {note}" if note else ""), runs_caption(labels)]
    heading = alt.Title(title, subtitle=subtitle)
    if layout == "overlay":
        chart = line.properties(width=WIDTH + 160, height=HEIGHT - 60)
        if not several:
            return chart.properties(data=inline(data), title=heading)
        return chart.facet(
            data=inline(data), row=alt.Row("label:N", title=None, header=HEADER), title=heading
        )
    if layout == "by-source":
        header = alt.Header(**HEADER.to_dict(), labelExpr="'from ' + datum.value")
        facet, columns = alt.Facet("src_worker:N", title=None, sort=senders, header=header), 2
        panel = {"width": 380, "height": 130}
    else:
        columns = max(1, min(4, len(senders) - 1, len(order)))
        facet = alt.Facet("link:N", title=None, sort=order, header=HEADER)
        panel = {"width": max(190, min(320, 900 // columns)), "height": 130}
    return line.properties(**panel).facet(facet=facet, columns=columns, data=inline(data), title=heading)


def nic_util_chart(nic_util: pa.Table, title: str | None = None) -> alt.Chart | alt.FacetChart:
    """NIC throughput from the counters: a panel per worker (and run), sent and received in Gbit/s,
    a line per port (the interface, its RDMA port)."""
    title = title or "NIC throughput per worker, from the interface and RDMA counters"
    data = rows(nic_util, ["run", "worker", "source", "device", "port", "direction", "t_s", "gbps"])
    if not data:
        return empty_chart(
            title, 'no NIC counters in the selected runs (capture.method = "both" samples them)'
        )
    bin_ms = as_arrow(nic_util).column("bin_ns")[0].as_py() / 1e6
    labels = short_runs(r["run"] for r in data)
    several = len(labels) > 1
    for r in data:
        port = "" if r["port"] is None else f"/{r['port']}"
        r["nic"] = f"{r['device']}{port}"
        r["panel"] = f"{labels[r['run']]} · {r['worker']}" if several else r["worker"]
        r["sent"] = "sent" if r["direction"] == "tx" else "received"
    panels = sorted({r["panel"] for r in data}, key=lambda p: tuple(map(worker_key, p.split(" · "))))
    line = (
        alt.Chart()
        .mark_line(strokeWidth=1.1, interpolate="step-after")
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False, zero=False)),
            y=alt.Y("gbps:Q", title="Throughput [Gbit/s]"),
            color=alt.Color(
                "sent:N",
                title="Direction",
                sort=["sent", "received"],
                scale=alt.Scale(range=list(CATEGORY_COLORS[:2])),
            ),
            strokeDash=alt.StrokeDash("nic:N", title="Port", scale=alt.Scale(range=list(DASHES))),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("worker:N"),
                alt.Tooltip("nic:N", title="port"),
                alt.Tooltip("sent:N", title="direction"),
                alt.Tooltip("t_s:Q", format=".3f", title="t [s]"),
                alt.Tooltip("gbps:Q", format=".4f", title="Gbit/s"),
            ],
        )
        .properties(width=WIDTH, height=110)
    )
    subtitle = [f"{bin_ms:g} ms bins · each sample's bytes spread over its interval", runs_caption(labels)]
    return line.facet(
        row=alt.Row("panel:N", title=None, sort=panels, header=HEADER), data=inline(data),
        title=alt.Title(title, subtitle=subtitle),
    )  # fmt: skip


CONGESTION_SIGNALS = (  # roce_congestion's columns, drawn in this order, as the legend names them
    ("cnp_sent", "CNPs sent"),
    ("cnp_handled", "CNPs handled"),
    ("ecn_marked", "ECN-marked received"),
    ("pfc_pauses_rx", "PFC pauses received"),
    ("pfc_pauses_tx", "PFC pauses sent"),
    ("out_of_sequence", "out of sequence"),
    ("seq_errors", "sequence errors"),
    ("ack_timeouts", "ACK timeouts"),
)


def congestion_chart(roce_congestion: pa.Table, title: str | None = None) -> alt.Chart | alt.FacetChart:
    """The NIC's congestion counters per logged step: a panel per worker (and run), a line per signal
    the NIC has (a counter it lacks is NULL in roce_congestion and drawn nowhere)."""
    title = title or "RoCE congestion signals per step, from the NIC counters"
    names = dict(CONGESTION_SIGNALS)
    data = []
    for r in rows(roce_congestion, ["run", "worker", "step", *names]):
        if r["step"] is None:
            continue  # the whole run's row
        data += [{"run": r["run"], "worker": r["worker"], "step": r["step"], "signal": names[key],
                  "count": r[key]} for key in names if r[key] is not None]  # fmt: skip
    if not data:
        why = "no congestion counters in the selected runs' logged steps (an RDMA port, ethtool's PFC)"
        return empty_chart(title, why)
    labels = short_runs(r["run"] for r in data)
    several = len(labels) > 1
    for r in data:
        r["panel"] = f"{labels[r['run']]} · {r['worker']}" if several else r["worker"]
    panels = sorted({r["panel"] for r in data}, key=lambda p: tuple(map(worker_key, p.split(" · "))))
    shown = [label for key, label in CONGESTION_SIGNALS if any(r["signal"] == label for r in data)]
    line = (
        alt.Chart()
        .mark_line(strokeWidth=1.1, point=alt.OverlayMarkDef(size=14))
        .encode(
            x=alt.X("step:Q", title="Training step", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("count:Q", title="Count per step"),
            color=alt.Color(
                "signal:N",
                title="Signal",
                sort=shown,
                scale=alt.Scale(domain=shown, range=list(CATEGORY_COLORS[: len(shown)])),
            ),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("worker:N"),
                alt.Tooltip("step:Q"),
                alt.Tooltip("signal:N"),
                alt.Tooltip("count:Q", format=","),
            ],
        )
        .properties(width=WIDTH, height=110)
    )
    subtitle = ["each sample's counts in the step holding its time (roce_congestion)", runs_caption(labels)]
    return line.facet(
        row=alt.Row("panel:N", title=None, sort=panels, header=HEADER), data=inline(data),
        title=alt.Title(title, subtitle=subtitle),
    )  # fmt: skip


def _utc(ns: int) -> str:
    """ISO 8601 UTC with milliseconds: what Vega reads as a date, and a CSV reader too."""
    stamp = datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{ns // 1_000_000 % 1000:03d}Z"


def _workers(data: list[dict]) -> list[str]:
    return sorted({r["src_worker"] for r in data} | {r["dst_worker"] for r in data}, key=worker_key)


def _pick_links(
    data: list[dict], links: tuple[str, ...] | list[str], top: int | None
) -> tuple[list[dict], str]:
    """The rows of the asked links (or the `top` busiest), with a note on what was left out."""
    present = {(r["src_worker"], r["dst_worker"]) for r in data}
    note = ""
    if links:
        wanted = {parse_link(text) for text in links}
        missing = wanted - present
        if missing:
            have = ", ".join(pair_label(*p) for p in sorted(present, key=lambda p: tuple(map(worker_key, p))))
            raise UsageError(
                f"no traffic on {', '.join(pair_label(*p) for p in sorted(missing))}; links: {have}"
            )
        data = [r for r in data if (r["src_worker"], r["dst_worker"]) in wanted]
        note = f"{len(wanted)} of {len(present)} links"
    if top is not None:
        volume: dict[tuple, float] = {}
        for r in data:
            key = (r["src_worker"], r["dst_worker"])
            volume[key] = volume.get(key, 0.0) + r["gbps"]
        busiest = set(sorted(volume, key=lambda k: (-volume[k], k))[:top])
        if len(busiest) < len(volume):
            note = f"the {len(busiest)} busiest of {len(present)} links"
        data = [r for r in data if (r["src_worker"], r["dst_worker"]) in busiest]
    return data, note


def trim_idle(data: list[dict], share: float = IDLE_SHARE) -> list[dict]:
    """Each run's rows from two bins before the first bin carrying `share` of its busiest bin to two
    after the last: the set-up and tear-down seconds, when workers exchange only a handshake, would
    take most of the time axis."""
    peak: dict[str, float] = {}
    for r in data:
        peak[r["run"]] = max(peak.get(r["run"], 0.0), r["gbps"])
    span: dict[str, list[float]] = {}
    times: dict[str, set[float]] = {}
    for r in data:
        times.setdefault(r["run"], set()).add(r["t_s"])
        if peak[r["run"]] > 0 and r["gbps"] >= share * peak[r["run"]]:
            lo, hi = span.get(r["run"], (r["t_s"], r["t_s"]))
            span[r["run"]] = [min(lo, r["t_s"]), max(hi, r["t_s"])]
    for run, (lo, hi) in span.items():  # widen by two bins each side
        ordered = sorted(times[run])
        a, b = ordered.index(lo), ordered.index(hi)
        span[run] = [ordered[max(0, a - 2)], ordered[min(len(ordered) - 1, b + 2)]]
    return [r for r in data if r["run"] in span and span[r["run"]][0] <= r["t_s"] <= span[r["run"]][1]]


def batch_size_effect_chart(windows: pa.Table | list[dict]) -> alt.Chart | alt.FacetChart:
    """Fig. 9: one link's 10 ms throughput in a short window, one panel per run (batch size).

    `windows` is link_util rows (a table or dicts) of one link per run plus `label` (e.g. "batch 16")
    and `order` (panel order, e.g. the batch size); a `run` column, when present, goes in the tooltips.
    """
    title = "Batch size effect: busiest link in a 250 ms window"
    columns = ["label", "order", "src_worker", "dst_worker", "t_s", "gbps"]
    if isinstance(windows, list):
        names = set(windows[0]) if windows else set()
    else:
        names = set(as_arrow(windows).column_names)
    data = rows(windows, columns + (["run"] if "run" in names else []))
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    for r in data:
        r["link"] = pair_label(r.pop("src_worker"), r.pop("dst_worker"))
    chart = (
        alt.Chart()
        .mark_line(
            point=alt.OverlayMarkDef(size=18, color="midnightblue"), strokeWidth=1.5, color="midnightblue"
        )
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(zero=False)),
            y=alt.Y("gbps:Q", title="Throughput [Gbit/s]"),
            tooltip=[
                *([alt.Tooltip("run:N")] if "run" in data[0] else []),
                alt.Tooltip("label:N"),
                alt.Tooltip("link:N"),
                alt.Tooltip("t_s:Q", format=".3f"),
                alt.Tooltip("gbps:Q", format=".4f"),
            ],
        )
        .properties(width=WIDTH, height=110)
    )
    row = alt.Row("label:N", title=None, sort=alt.SortField("order"), header=HEADER)
    return chart.facet(data=inline(data), row=row, title=title).resolve_scale(x="independent")


FLOWS_SHOWN = 12  # Fig. 6 draws each run's busiest flows by bytes, each row named


def temporal_flows_chart(
    temporal_flows: pa.Table, top: int | None = FLOWS_SHOWN
) -> alt.Chart | alt.FacetChart:
    """Fig. 6: each flow (directed TCP 4-tuple) as a row of time bins coloured by its load, relative
    to the run's busiest flow-bin; rows named src:port→dst:port, the busiest on top. `top`: how many
    of each run's flows, by bytes, are drawn (None: all); the subtitle says how many were left out."""
    title = "Temporal flow load"
    data = rows(
        temporal_flows,
        [
            "run",
            "flow_id",
            "src_worker",
            "dst_worker",
            "src_ip",
            "dst_ip",
            "src_port",
            "dst_port",
            "t_s",
            "bin_ns",
            "bytes",
            "load",
        ],
    )
    if not data:
        return empty_chart(title, "no TCP flows in the selected runs")
    volume: dict[tuple[str, int], int] = {}
    for r in data:
        volume[(r["run"], r["flow_id"])] = volume.get((r["run"], r["flow_id"]), 0) + r["bytes"]
    ranked: dict[str, list[int]] = {}
    for run, flow_id in sorted(volume, key=lambda k: (-volume[k], k[1])):
        ranked.setdefault(run, []).append(flow_id)
    kept = {(run, f): order for run, flows in ranked.items() for order, f in enumerate(flows[:top])}
    labels = short_runs(r["run"] for r in data)
    cut = {labels[run]: len(ranked[run]) for run in labels if top and len(ranked[run]) > top}
    bin_ns = data[0]["bin_ns"]
    data = [r for r in data if (r["run"], r["flow_id"]) in kept]
    for r in data:
        r["t_end"] = r["t_s"] + r.pop("bin_ns") / 1e9
        src, dst = r["src_worker"] or r["src_ip"], r["dst_worker"] or r["dst_ip"]
        r["flow"] = f"{src}:{r['src_port']}→{dst}:{r['dst_port']}"
        r["addresses"] = f"{r['src_ip']}:{r['src_port']} → {r['dst_ip']}:{r['dst_port']}"
        r["order"] = kept[(r["run"], r["flow_id"])]
        r["flow_bytes"] = volume[(r["run"], r["flow_id"])]
    n_flows = max(len(flows[:top]) for flows in ranked.values())
    chart = (
        alt.Chart()
        .mark_rect(stroke="#ddd", strokeWidth=0.3)
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False)),
            x2=alt.X2("t_end:Q"),
            y=alt.Y(
                "flow:N",
                title="Flow (sender:port→receiver:port)",
                sort=list(dict.fromkeys(r["flow"] for r in sorted(data, key=lambda r: r["order"]))),
                axis=alt.Axis(labelFontSize=10, labelLimit=260),
            ),
            color=alt.Color(
                "load:Q",
                title=["Load (share of the", "run's busiest bin)"],
                scale=alt.Scale(scheme="blues", domain=[0, 1]),
            ),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("flow:N"),
                alt.Tooltip("addresses:N"),
                alt.Tooltip("t_s:Q", format=".2f", title="t [s]"),
                alt.Tooltip("bytes:Q", format=","),
                alt.Tooltip("load:Q", format=".3f"),
                alt.Tooltip("flow_bytes:Q", format=",", title="bytes of the flow"),
            ],
        )
        # a fixed height: a step height with the runs' independent y scales breaks Vega-Lite's layout
        .properties(width=WIDTH + 60, height=max(40, 16 * n_flows))
    )
    note = f"{_bin_text(bin_ns)} bins · rows by bytes, busiest on top"
    if len(labels) > 1 and cut:
        note += f" · each run's {top} busiest flows (of {', '.join(f'{k}: {n}' for k, n in cut.items())})"
    elif cut:
        note += f" · the {top} busiest of {next(iter(cut.values()))} flows"
    return _by_run(chart, data, title, independent_y=True, note=note)


def _bin_text(bin_ns: int) -> str:
    """'50 ms', '2 s', '100 µs': a bin width as the charts name it."""
    if bin_ns >= 1_000_000_000:
        return f"{bin_ns / 1e9:g} s"
    if bin_ns >= 1_000_000:
        return f"{bin_ns / 1e6:g} ms"
    return f"{bin_ns / 1e3:g} µs"


def burstiness_chart(burstiness: pa.Table) -> alt.Chart | alt.FacetChart:
    """Peak-to-mean ratio of each link against bin width: microbursts vanish in wide bins."""
    title = "Burstiness: peak-to-mean link load vs. bin width"
    data = rows(
        burstiness, ["run", "src_worker", "dst_worker", "bin_ns", "mean_gbps", "peak_gbps", "peak_to_mean"]
    )
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    for r in data:
        r["link"] = pair_label(r["src_worker"], r["dst_worker"])
        r["bin_ms"] = r.pop("bin_ns") / 1e6
    senders = sorted({r["src_worker"] for r in data}, key=worker_key)
    receivers = sorted({r["dst_worker"] for r in data}, key=worker_key)
    base = alt.Chart().encode(
        x=alt.X("bin_ms:Q", title="Bin width [ms]", scale=alt.Scale(type="log")),
        y=alt.Y("peak_to_mean:Q", title="Peak / mean load", scale=alt.Scale(type="log")),
        color=alt.Color("src_worker:N", title="Sender", sort=senders, scale=worker_colors(_workers(data))),
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("link:N"),
            alt.Tooltip("bin_ms:Q"),
            alt.Tooltip("peak_gbps:Q", format=".4f"),
            alt.Tooltip("mean_gbps:Q", format=".4f"),
            alt.Tooltip("peak_to_mean:Q", format=".1f"),
        ],
    )
    dash = alt.StrokeDash(  # lines only: a point layer of its own keeps the dash legend drawn as dashes
        "dst_worker:N",
        title="Receiver",
        sort=receivers,
        scale=alt.Scale(range=list(DASHES)),
        legend=alt.Legend(symbolType="stroke", symbolStrokeColor="#333", symbolStrokeWidth=2),
    )
    lines = base.mark_line().encode(strokeDash=dash, detail=alt.Detail("link:N"))
    chart = alt.layer(lines, base.mark_point(filled=True, size=28)).properties(
        width=WIDTH - 120, height=HEIGHT - 40
    )
    return _by_run(chart, data, title)


def _by_run(
    chart: alt.Chart | alt.LayerChart,
    data: list[dict],
    title: str,
    independent_y: bool = False,
    note: str | None = None,
) -> alt.Chart | alt.FacetChart:
    """One panel per run when there are several (short labels above them); one run stays a plain
    chart with its full name under the title (after `note`, when given)."""
    labels = short_runs(r["run"] for r in data)
    heading = alt.Title(title, subtitle=[note, runs_caption(labels)] if note else runs_caption(labels))
    if len(labels) == 1:
        return chart.properties(data=inline(data), title=heading)
    for r in data:
        r["label"] = labels[r["run"]]
    faceted = chart.facet(data=inline(data), row=alt.Row("label:N", title=None, header=HEADER), title=heading)
    return faceted.resolve_scale(y="independent") if independent_y else faceted
