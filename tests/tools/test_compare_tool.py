"""compare_tool: CompareWithCPU catches a deliberately wrong musa kernel with its
module path, NanInfTracker finds the first op producing a NaN, clean models
report nothing, plus dumps/replay, step windows, ranks, logs and the summary."""
import math
import os
import pickle

import pytest
import torch
import torch.nn as nn

from tests.tools.conftest import load_tool

ct = load_tool("compare_tool")

# ---------------------------------------------------------------- test-only op
# musa_tools_test::scaled(x, s) = x * s.  The CPU kernel is right; the musa
# (PrivateUse1) kernel adds 0.01 to every element: a deliberately wrong kernel.
# musa_tools_test::cpu_no_half(x) = x + 1 whose CPU kernel rejects half, to
# exercise the float32 rerun.
_LIB = torch.library.Library("musa_tools_test", "DEF")
_LIB.define("scaled(Tensor x, float s) -> Tensor")
_LIB.define("cpu_no_half(Tensor x) -> Tensor")
_LIB.impl("scaled", lambda x, s: x * s, "CPU")
_LIB.impl("scaled", lambda x, s: x * s + 0.01, "PrivateUse1")


def _cpu_no_half(x):
    if x.dtype == torch.float16:
        raise RuntimeError('"cpu_no_half" not implemented for \'Half\'')
    return x + 1


_LIB.impl("cpu_no_half", _cpu_no_half, "CPU")
_LIB.impl("cpu_no_half", lambda x: x + 1, "PrivateUse1")


class Scale(nn.Module):
    def forward(self, x):
        return torch.ops.musa_tools_test.scaled(x, 2.0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)
        self.scale = Scale()

    def forward(self, x):
        return self.scale(self.act(self.linear(x)))


class Net(nn.Module):
    def __init__(self, wrong=False, nan_at_mid=False):
        super().__init__()
        self.block = Block() if wrong else nn.Sequential(nn.Linear(8, 8), nn.ReLU(inplace=True))
        self.mid = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)
        self.nan_at_mid = nan_at_mid

    def forward(self, x):
        h = self.mid(self.block(x))
        if self.nan_at_mid:
            h = torch.sqrt(h - 1000.0)  # negative -> NaN, first produced by aten.sqrt
        return self.head(h.tanh())


def train_steps(model, device, steps=2, grad=True):
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(4, 8, device=device)
        if grad:
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        else:
            with torch.no_grad():
                model(x)


@pytest.fixture(autouse=True)
def _fresh_tracker():
    yield
    for h in list(ct._TRACKER.handles):
        h.remove()
    ct._TRACKER.handles.clear()


# ---------------------------------------------------------------- CPU-only parts


def test_nan_tracker_flags_first_producing_op_on_cpu(capsys):
    model = Net(nan_at_mid=True)
    ct.open_module_tracker(model)
    with ct.NanInfTracker() as tracker:
        train_steps(model, "cpu", steps=1)
    assert tracker.first_nan_inf_op == "Net/torch.ops.aten.sqrt(forward)"
    produced = [r for r in tracker.records if r["produced"]]
    assert produced[0]["op"] == "Net/torch.ops.aten.sqrt(forward)"
    # everything before sqrt was clean: the first record is sqrt itself
    assert tracker.records[0]["op"] == "Net/torch.ops.aten.sqrt(forward)"
    # the NaN propagates: later ops are flagged for their inputs
    assert any(r["op"] == "Net/Linear/torch.ops.aten.addmm(forward)" and r["inputs"] for r in tracker.records)
    out = capsys.readouterr().out
    assert "[WARNING] Net/torch.ops.aten.sqrt(forward): NaN/Inf in outputs [0] (first produced here)" in out
    assert "first op producing NaN/Inf: Net/torch.ops.aten.sqrt(forward)" in out


def test_nan_tracker_clean_model_reports_nothing(capsys):
    model = Net()
    with ct.NanInfTracker(verbose=False) as tracker:
        train_steps(model, "cpu")
    assert tracker.records == []
    assert tracker.first_nan_inf_op is None
    assert tracker.stats["torch.ops.aten.addmm"].calls >= 6
    assert all(st.failures == 0 for st in tracker.stats.values())
    assert capsys.readouterr().out == ""


def test_nan_tracker_checks_inputs_before_inplace_ops():
    x = torch.tensor([1.0, float("inf")])
    with ct.NanInfTracker(verbose=False) as tracker:
        x.clamp_(max=5.0)  # the op removes the Inf: only its input had one
    (rec,) = tracker.records
    assert rec["op"] == "torch.ops.aten.clamp_(forward)"
    assert rec["inputs"] == [0] and rec["outputs"] == []
    assert tracker.first_nan_inf_op is None


def test_module_tracker_names_forward_and_backward_ops():
    model = Net()
    handle = ct.open_module_tracker(model)
    with ct.NanInfTracker(verbose=False, white_list=[]) as tracker:
        x = torch.full((2, 8), float("nan"))
        model(x).sum().backward()
    ops = [r["op"] for r in tracker.records]
    assert "Net/Sequential/Linear/torch.ops.aten.addmm(forward)" in ops
    assert "Net/Sequential/ReLU/torch.ops.aten.relu_(forward)" in ops
    assert "Net/torch.ops.aten.tanh(forward)" in ops
    assert "Net/Linear/torch.ops.aten.mm(backward)" in ops
    assert "Net/torch.ops.aten.tanh_backward(backward)" in ops
    handle.remove()
    with ct.NanInfTracker(verbose=False) as tracker:
        model(x)
    assert tracker.records[0]["op"] == "torch.ops.aten.addmm(forward)"  # hooks gone


def test_step_window_and_ranks():
    x = torch.tensor([float("nan")])
    with ct.NanInfTracker(verbose=False, start_step=1, end_step=2) as tracker:
        for _ in range(3):
            x + 1
            tracker.step()
    assert [r["step"] for r in tracker.records] == [1]
    with ct.NanInfTracker(verbose=False, enable_ranks=[1]) as tracker:  # this process is rank 0
        x + 1
    assert tracker.records == []
    with ct.NanInfTracker(verbose=False, enabled=False) as tracker:
        x + 1
    assert tracker.records == []


def test_target_and_white_lists():
    x = torch.tensor([float("nan")])
    with ct.NanInfTracker(verbose=False, target_list=["aten.mul"]) as tracker:
        x + 1
        x * 2
    assert [r["op"] for r in tracker.records] == ["torch.ops.aten.mul(forward)"]
    with ct.NanInfTracker(verbose=False, white_list=["torch.ops.aten.mul.Tensor"]) as tracker:
        x + 1
        x * 2
    assert [r["op"] for r in tracker.records] == ["torch.ops.aten.add(forward)"]


def test_log_file_per_rank(tmp_path):
    with ct.NanInfTracker(verbose=False, should_log_to_file=True, output_dir=str(tmp_path)):
        torch.tensor([1.0]) / 0
    text = (tmp_path / "nan_inf_tracker_rank0.log").read_text()
    assert text.startswith("[WARNING] torch.ops.aten.div(forward): NaN/Inf in outputs [0] (first produced here)")
    assert "NanInfTracker summary" in text


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        ({"atol": -1}, ValueError, "atol and rtol must be >= 0"),
        ({"start_step": 3, "end_step": 1}, ValueError, "end_step"),
        ({"target_list": "aten.add"}, TypeError, "list of op names"),
    ],
)
def test_bad_arguments(kwargs, err, match):
    with pytest.raises(err, match=match):
        ct.CompareWithCPU(**kwargs)


def test_module_tracker_rejects_non_module():
    with pytest.raises(TypeError, match="expects an nn.Module"):
        ct.open_module_tracker(lambda x: x)


def test_cpu_only_ops_are_not_compared():
    with ct.CompareWithCPU(verbose=False) as cmp:
        torch.ops.musa_tools_test.scaled(torch.ones(3), 2.0)
    assert cmp.records == [] and not cmp.stats


# ---------------------------------------------------------------- on musa


def test_wrong_musa_kernel_is_caught_with_module_path(musa, capsys):
    torch.manual_seed(0)
    model = Net(wrong=True).to("musa")
    ct.open_module_tracker(model)
    with ct.CompareWithCPU() as cmp:
        train_steps(model, "musa", steps=1, grad=False)
    mismatches = [r for r in cmp.records if r["kind"] == "mismatch"]
    assert [r["op"] for r in mismatches] == ["Net/Block/Scale/torch.ops.musa_tools_test.scaled(forward)"]
    assert mismatches[0]["max_abs"] == pytest.approx(0.01, rel=1e-3)
    out = capsys.readouterr().out
    line = "[ERROR] Net/Block/Scale/torch.ops.musa_tools_test.scaled(forward): musa result differs from cpu"
    assert line in out
    assert "shape=(4, 8), dtype=torch.float32, stride=(8, 1), device=musa:0" in out
    assert "32/32 elements differ; first: [0, 0]: musa=" in out
    st = cmp.stats["torch.ops.musa_tools_test.scaled"]
    assert (st.calls, st.failures) == (1, 1)
    assert cmp.stats["torch.ops.aten.addmm"].failures == 0
    summary = cmp.summary()
    assert "torch.ops.musa_tools_test.scaled" in summary and "0.01" in summary


def test_clean_model_on_musa_reports_zero_errors(musa, capsys):
    torch.manual_seed(0)
    model = Net().to("musa")
    ct.open_module_tracker(model)
    with ct.CompareWithCPU() as cmp:
        train_steps(model, "musa", steps=2)  # forward, backward, in-place ReLU, SGD updates
    assert [r for r in cmp.records if r["kind"] == "mismatch"] == []
    assert cmp.stats["torch.ops.aten.addmm"].calls == 6
    assert cmp.stats["torch.ops.aten.relu_"].calls == 2
    assert sum(st.failures for st in cmp.stats.values()) == 0
    out = capsys.readouterr().out
    assert "[ERROR]" not in out
    assert "CompareWithCPU summary" in out


def test_inplace_ops_compare_against_inputs_before_the_op(musa):
    x = torch.arange(4.0, device="musa")
    buf = torch.zeros(4, device="musa")
    with ct.CompareWithCPU(verbose=False) as cmp:
        x.add_(1)
        torch.mul(x, 2, out=buf)
        torch._foreach_add_([x, buf], 1.0)
    assert [r for r in cmp.records if r["kind"] == "mismatch"] == []
    assert cmp.stats["torch.ops.aten.add_"].calls == 1
    assert cmp.stats["torch.ops.aten.mul"].calls == 1
    assert cmp.stats["torch.ops.aten._foreach_add_"].calls == 1


def test_wrong_inplace_result_is_caught(musa):
    _LIB.define("bump_(Tensor(a!) x) -> Tensor(a!)")
    _LIB.impl("bump_", lambda x: x.add_(1), "CPU")
    _LIB.impl("bump_", lambda x: x.add_(2), "PrivateUse1")
    x = torch.zeros(3, device="musa")
    with ct.CompareWithCPU(verbose=False) as cmp:
        torch.ops.musa_tools_test.bump_(x)
    (rec,) = cmp.records
    assert rec["kind"] == "mismatch" and rec["max_abs"] == 1.0


def test_half_op_missing_on_cpu_is_rerun_in_float32(musa, capsys):
    x = torch.randn(5, device="musa", dtype=torch.float16)
    with ct.CompareWithCPU() as cmp:
        y = torch.ops.musa_tools_test.cpu_no_half(x)
        torch.ops.musa_tools_test.scaled(x, 3.0)  # float16 on CPU works: compared directly
    assert y.dtype == torch.float16
    assert cmp.stats["torch.ops.musa_tools_test.cpu_no_half"].calls == 1
    assert cmp.stats["torch.ops.musa_tools_test.cpu_no_half"].failures == 0
    assert cmp.stats["torch.ops.musa_tools_test.scaled"].failures == 1


def test_untested_op_is_warned(musa, capsys):
    _LIB.define("musa_only(Tensor x) -> Tensor")
    _LIB.impl("musa_only", lambda x: x * 1, "PrivateUse1")
    with ct.CompareWithCPU() as cmp:
        torch.ops.musa_tools_test.musa_only(torch.ones(2, device="musa"))
    assert cmp.records[0]["kind"] == "untested"
    assert "[WARNING] torch.ops.musa_tools_test.musa_only(forward): untested" in capsys.readouterr().out


def test_dump_error_data_and_replay(musa, tmp_path):
    x = torch.randn(3, 4, device="musa")
    with pytest.raises(ct.ComparisonStopped, match="inputs dumped"):
        with ct.CompareWithCPU(verbose=False, dump_error_data=True, output_dir=str(tmp_path)):
            x + 1  # fine
            torch.ops.musa_tools_test.scaled(x, 2.0)
    inputs = tmp_path / "musa_tools_test.scaled_inputs.pkl"
    outputs = tmp_path / "musa_tools_test.scaled_outputs.pkl"
    with open(inputs, "rb") as f:
        data = pickle.load(f)
    torch.testing.assert_close(data["args"][0], x.cpu())
    assert data["args"][1] == 2.0 and data["device"] == "musa:0"
    with open(outputs, "rb") as f:
        torch.testing.assert_close(pickle.load(f)["outputs"], x.cpu() * 2 + 0.01)
    assert ct.compare_for_single_op(str(inputs), torch.ops.musa_tools_test.scaled) is False
    assert ct.compare_for_single_op(str(inputs), torch.ops.aten.mul) is True
    with pytest.raises(FileNotFoundError):
        ct.compare_for_single_op(str(tmp_path / "nope.pkl"), torch.ops.aten.mul)


def test_nan_tracker_on_musa(musa):
    model = Net(nan_at_mid=True).to("musa")
    ct.open_module_tracker(model)
    with ct.NanInfTracker(verbose=False) as tracker:
        train_steps(model, "musa", steps=1)
    assert tracker.first_nan_inf_op == "Net/torch.ops.aten.sqrt(forward)"
    assert tracker.records[0]["op"] == "Net/torch.ops.aten.sqrt(forward)"
    assert any(r["op"].endswith("(backward)") for r in tracker.records)


def test_summary_reports_worst_errors(musa):
    x = torch.ones(4, device="musa")
    with ct.CompareWithCPU(verbose=False) as cmp:
        torch.ops.musa_tools_test.scaled(x, 1.0)
        torch.ops.musa_tools_test.scaled(x * 100, 1.0)  # off by 0.01 too, but within rtol
        x.exp()
    st = cmp.stats["torch.ops.musa_tools_test.scaled"]
    assert (st.calls, st.failures) == (2, 1)
    assert st.max_abs == pytest.approx(0.01, rel=1e-3)
    assert st.max_rel == pytest.approx(0.01, rel=1e-3)  # 0.01 / 1.0 is the worst relative error
    lines = cmp.summary().splitlines()
    assert lines[1].split() == ["op", "calls", "failures", "max_abs_err", "max_rel_err", "worst", "at"]
    row = next(line for line in lines if line.startswith("torch.ops.musa_tools_test.scaled"))
    assert row.split()[1:3] == ["2", "1"]
    exp_row = next(line for line in lines if line.startswith("torch.ops.aten.exp "))
    assert exp_row.split()[1:3] == ["1", "0"]
    assert not math.isinf(cmp.stats["torch.ops.aten.exp"].max_abs)
