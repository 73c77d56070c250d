"""`tracecore model ...` through the real Typer app: outputs, figures and one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app

DATA = Path(__file__).parent / "data" / "logs"
REPO = Path(__file__).resolve().parent.parent
DDP_LOG = REPO / "tracecore" / "sample" / "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring" / "train_history.log"

runner = CliRunner()


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _fails(args: list[str], code: int) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_scaling_reference_study_prints_its_tables() -> None:
    out = _ok(["model", "scaling", "--reference-study"])
    assert "Table 3: the study's 'bandwidth utilization (GB/s)'" in out
    for printed in ("0.567164", "1.134328", " 111.5 ", "0.363852", "0.054068"):
        assert printed in out


def test_scaling_csv_output_and_figure(tmp_path: Path) -> None:
    figure = tmp_path / "scaling.svg"
    out = _ok(["model", "scaling", "--reference-study", "-f", "csv", "--figure", str(figure)])
    rows = list(csv.DictReader(io.StringIO(out)))
    four_512 = next(r for r in rows if r["gpus"] == "4" and r["batch_size"] == "512")
    assert float(four_512["communication_s"]) == 7.75
    assert float(four_512["allreduce_gparams_s"]) == pytest.approx(0.211945, abs=5e-7)
    assert figure.read_text().startswith("<svg")


def test_scaling_from_a_times_csv_with_wire_bytes(tmp_path: Path) -> None:
    times = tmp_path / "times.csv"
    times.write_text("gpus,batch_size,epoch_time_s,iters,wire_bytes\n1,8,10,4,0\n4,8,4,4,600000\n")
    out = json.loads(_ok(["model", "scaling", str(times), "--n-params", "19954", "-f", "json"]))
    long = out["All configurations (long form)"]
    assert long[1]["wire_gbit_s"] == pytest.approx(600_000 * 8 / 1.5 / 1e9)
    assert long[0]["bandwidth_gbit_s"] is None


def test_scaling_from_wandb_history(tmp_path: Path) -> None:
    text = (DATA / "wandb_history_seed002.csv").read_text()
    # The plain export has no run name; a grouped export does. Build one from the printed rows.
    header, *rows = text.strip().splitlines()
    cols = header.split(",")
    for gpus in (1, 2):
        run = f"SGD_dp_batch_size_512_{gpus}gpus"
        path = tmp_path / f"{gpus}.csv"
        path.write_text(",".join(f"{run} - {c}" for c in cols) + "\n" + "\n".join(rows) + "\n")
    out = json.loads(
        _ok(
            [
                "model",
                "scaling",
                "--wandb",
                str(tmp_path / "1.csv"),
                "--wandb",
                str(tmp_path / "2.csv"),
                "--epoch",
                "0",
                "--n-params",
                "11173962",
                "--dataset-size",
                "50000",
                "-f",
                "json",
            ]
        )
    )
    long = out["All configurations (long form)"]
    assert [(r["gpus"], r["batch_size"], r["epoch_time_s"]) for r in long] == [(1, 512, 1.0), (2, 512, 1.0)]


def test_scaling_input_errors_are_one_line() -> None:
    assert "exactly one input" in _fails(["model", "scaling"], 2)
    assert "cannot read as CSV" in _fails(
        ["model", "scaling", str(DATA / "horovod_timeline.json"), "--n-params", "1"], 2
    )
    assert "--n-params is required" in _fails(
        ["model", "scaling", str(DATA / "loss_ddp_resnet8w8_b16.csv")], 2
    )


def test_optimus_time_default_is_the_reference_notebook() -> None:
    out = json.loads(_ok(["model", "optimus", "time", "-f", "json"]))
    (table,) = out.values()
    first = table[0]
    assert (first["ps"], first["workers"]) == (2, 1)
    assert first["time_s"] == pytest.approx(391 * 85 * 135.84)
    assert first["steps_over_denominator"] == pytest.approx(391 * 85 / 135.84)
    assert [r["workers"] for r in table] == [1, 10, 50, 99, 1, 10, 50, 99]


def test_optimus_time_curve_figure(tmp_path: Path) -> None:
    figure = tmp_path / "time.png"
    out = _ok(["model", "optimus", "time", "--max-workers", "99", "-f", "csv", "--figure", str(figure)])
    assert len(out.strip().splitlines()) == 1 + 2 * 99
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "five non-negative" in _fails(["model", "optimus", "time", "--theta", "1,2,3"], 2)


def test_optimus_fit_on_a_real_ddp_log(tmp_path: Path) -> None:
    figure = tmp_path / "fit.html"
    out = json.loads(_ok(["model", "optimus", "fit", str(DDP_LOG), "-f", "json", "--figure", str(figure)]))
    (row,) = out["Optimus loss fit against epochs"]
    assert row["n_points"] == 30
    assert row["convergence_point"] == 10  # as tests/test_models_optimus.py finds on the same log
    assert row["unit"] == "epoch"
    assert "vega" in figure.read_text()


def test_optimus_fit_refuses_logs_without_loss(tmp_path: Path) -> None:
    empty = tmp_path / "optimus_20_K80.csv"
    empty.write_text("step,loss\n0,nan-ish\n")
    assert "no loss_curve line could be parsed; line 2" in _fails(["model", "optimus", "fit", str(empty)], 3)
    assert "holds no loss curve" in _fails(["model", "optimus", "fit", str(DATA / "kungfu_resize.txt")], 3)
    assert "not a loss CSV" in _fails(["model", "optimus", "fit", str(DATA / "optimus_fits_seed003.csv")], 3)


def test_optimus_ridge_and_speed(tmp_path: Path) -> None:
    out = json.loads(
        _ok(
            [
                "model",
                "optimus",
                "ridge",
                str(DATA / "optimus_fits_seed003.csv"),
                "--predict",
                "50:K80",
                "-f",
                "json",
            ]
        )
    )
    (row,) = out["Ridge prediction of b0, b1, b2"]
    assert row["b0"] == pytest.approx(5.43137200e-04, abs=1e-6)
    points = tmp_path / "speed.csv"
    pairs = [(1, 1), (2, 1), (4, 2), (8, 2), (2, 2), (4, 4)]
    speeds = [(w, p, 1 / (1.02 * 128 / w + 2.78 + 4.92 * w / p + 0.02 * p)) for w, p in pairs]
    points.write_text("workers,ps,speed\n" + "\n".join(f"{w},{p},{f}" for w, p, f in speeds) + "\n")
    out = json.loads(_ok(["model", "optimus", "speed", str(points), "--batch", "128", "-f", "json"]))
    theta = [r["value"] for r in out["sync speed model"]]
    assert theta == pytest.approx([1.02, 2.78, 4.92, 0.0, 0.02], abs=1e-6)
    assert "global batch size" in _fails(["model", "optimus", "speed", str(points)], 5)


def test_traffic_from_a_csv(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(
        "run,model,framework,backend,batch_size,topology,mb_per_step\n"
        "a,mobilenetv2,horovod,mpi,64,ring,10\nb,mobilenetv2,horovod,mpi,64,ring,11\n"
        "c,mobilenetv2,horovod,mpi,64,ring,12\nd,mobilenetv2,tf_sync,grpc,64,ring,20\n"
        "e,mobilenetv2,tf_sync,grpc,64,ring,22\nf,mobilenetv2,tf_sync,grpc,64,ring,24\n"
        "g,mobilenetv2,tf_sync,grpc,64,ring,26\n"
    )
    out = _ok(["model", "traffic", "--input", str(path)])
    assert "framework_backend_tf_sync_grpc" in out
    assert " 12 " in out  # the difference of the group means
    assert "model_size_mb" in out  # listed as dropped


def test_traffic_errors_are_one_line(tmp_path: Path) -> None:
    assert "no dataset at" in _fails(["model", "traffic", "--data", str(tmp_path / "nothing")], 4)
    path = tmp_path / "runs.csv"
    path.write_text("run,model,framework,backend,batch_size,topology,mb_per_step\na,m,h,mpi,64,ring,1\n")
    assert "model size unknown for m" in _fails(["model", "traffic", "--input", str(path)], 5)
    assert "NAME=MB" in _fails(["model", "traffic", "--input", str(path), "--model-size", "m:3"], 2)
    assert "1 run(s) for 1 coefficients" in _fails(
        ["model", "traffic", "--input", str(path), "--model-size", "m=3"], 5
    )


def test_optimus_ridge_from_curve_files(tmp_path: Path) -> None:
    k = range(0, 2000, 10)
    paths = []
    for depth, gpu, (b0, b1, b2) in [(20, "K80", (8e-4, 0.57, 0.2)), (26, "K80", (9e-4, 0.49, 0.23))]:
        path = tmp_path / f"optimus_{depth}_{gpu}.csv"
        path.write_text("step,loss\n" + "".join(f"{s},{1 / (b0 * s + b1) + b2!r}\n" for s in k))
        paths.append(str(path))
    out = json.loads(_ok(["model", "optimus", "ridge", *paths, "--predict", "32:K80", "-f", "json"]))
    fitted = out["fitted loss curves"]
    assert [r["b1"] for r in fitted] == pytest.approx([0.57, 0.49], rel=1e-6)
    assert out["Ridge prediction of b0, b1, b2"][0]["depth"] == 32
    mixed = [*paths, str(DATA / "optimus_fits_seed003.csv")]
    assert "not both" in _fails(["model", "optimus", "ridge", *mixed, "--predict", "32:K80"], 2)


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        (
            "gpus,batch_size,epoch_time_s\ntwo,32,1\n",
            ["scaling", "{path}", "--n-params", "5", "--dataset-size", "10"],
            "column 'gpus' must hold whole numbers; found 'two'",
        ),
        (
            "workers,ps,speed\n1,1,a\n",
            ["optimus", "speed", "{path}", "--batch", "3"],
            "column 'speed' must hold",
        ),
        (
            "depth,gpu,b0,b1,b2\nx,K80,1,2,3\n",
            ["optimus", "ridge", "{path}", "--predict", "20:K80"],
            "'depth'",
        ),
        (
            "run,model,framework,backend,batch_size,topology,mb_per_step\na,m,h,mpi,64,ring,abc\n",
            ["traffic", "--model-size", "m=1", "--input", "{path}"],
            "column 'mb_per_step' must hold numbers; found 'abc'",
        ),
    ],
)
def test_bad_cells_are_one_line_errors(tmp_path: Path, text: str, args: list[str], message: str) -> None:
    path = tmp_path / "input.csv"
    path.write_text(text)
    assert message in _fails(["model", *(str(path) if a == "{path}" else a for a in args)], 5)


def test_zero_workers_and_bad_figure_suffix_are_refused(tmp_path: Path) -> None:
    assert "must be ≥ 1" in _fails(["model", "optimus", "time", "--ps", "0"], 5)
    result = runner.invoke(
        app, ["model", "scaling", "--reference-study", "--figure", str(tmp_path / "x.gif")]
    )
    assert result.exit_code == 2
    assert "Invalid value for '--figure'" in result.output
    assert "Table 1" not in result.output  # refused before any work
