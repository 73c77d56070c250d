"""The run-name format has one owner: what format_run_name builds, parse_run_name reads back."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracecore.errors import UsageError
from tracecore.ingest.runname import FIELDS, format_loss, format_run_name, parse_run_name
from tracecore.runners.torch_ddp import DDPConfig

field_text = st.text(string.ascii_letters + string.digits + "_.", min_size=1, max_size=12)
loss = st.one_of(
    st.just(0.0),
    st.integers(0, 100).map(float),
    st.decimals(0, 100, places=3).map(float),
    st.floats(0, 100, allow_nan=False, allow_infinity=False),
)


@given(field_text, field_text, field_text, st.integers(0, 1 << 20), field_text, loss, field_text)
def test_format_then_parse_gives_the_fields_back(
    framework: str, model: str, optimizer: str, batch: int, backend: str, loss_pct: float, topology: str
) -> None:
    values = (framework, model, optimizer, batch, backend, loss_pct, topology)
    try:
        name = format_run_name(*values)
    except UsageError:  # only a loss that no plain decimal writes exactly (e.g. 1e-300) is refused
        assert "e" in repr(loss_pct)
        return
    meta = parse_run_name(name)
    assert meta.name_parsed
    assert tuple(getattr(meta, f) for f in FIELDS) == values


def test_the_launchers_names_are_the_published_form() -> None:
    assert DDPConfig(width=8, batch_size=16).run_name == "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"
    assert DDPConfig(loss_pct=0.5).run_name == "torch_ddp-resnet8-sgd-32-gloo-loss_0.5-ring"
    assert [format_loss(x) for x in (0, 1, 0.1, 12.5)] == ["normal", "loss_1", "loss_0.1", "loss_12.5"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("torch-ddp", "m", "sgd", 1, "gloo", 0.0, "ring"), "framework 'torch-ddp'"),
        (("t", "", "sgd", 1, "gloo", 0.0, "ring"), "model ''"),
        (("t", "m", "s gd", 1, "gloo", 0.0, "ring"), "optimizer 's gd'"),
        (("t", "m", "sgd", -1, "gloo", 0.0, "ring"), "batch size -1"),
        (("t", "m", "sgd", 1, "gloo", -2.0, "ring"), "loss -2.0"),
        (("t", "m", "sgd", 1, "gloo", 0.0, "a/b"), "topology 'a/b'"),
    ],
)
def test_names_that_would_not_parse_back_are_refused(values: tuple, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        format_run_name(*values)
