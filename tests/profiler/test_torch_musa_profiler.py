"""torch_musa.profiler: torch's TorchTidy anti-patterns speaking of musa, against torch's own
CUDA patterns on the same profile; torch_musa.musa_graph.update_musa_graph_with_profile."""
import contextlib
import io

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_musa
from torch_musa import _version_gate

HAS_PATTERNS = _version_gate.profiler_anti_patterns_available()
if HAS_PATTERNS:
    from torch.profiler import _pattern_matcher as torch_patterns
    from torch_musa.profiler import ExtraMUSACopyPattern, FP32MatMulPattern, report_all_anti_patterns
needs_patterns = pytest.mark.skipif(not HAS_PATTERNS, reason="torch.profiler._pattern_matcher is gone (torch >= 2.15)")

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


@pytest.fixture(autouse=True)
def _no_default_device_mode():
    # the patterns read the Python call tree; a default-device mode left by another test adds its frames
    prev = torch.get_default_device()
    torch.set_default_device(None)
    yield
    torch.set_default_device(None if prev == torch.device("cpu") else prev)


def _profile(fn):
    with profile(activities=ACTIVITIES, with_stack=True, record_shapes=True) as prof:
        fn()
        torch.musa.synchronize()
    return prof


@needs_patterns
def test_extra_copy_pattern_matches_what_torchs_cuda_pattern_matches(device):
    prof = _profile(lambda: torch.zeros(64, 64).to(device))
    ours = ExtraMUSACopyPattern(prof).matched_events()
    assert ours and len(ours) == len(torch_patterns.ExtraCUDACopyPattern(prof).matched_events())
    assert "musa" in ExtraMUSACopyPattern(prof).description


@needs_patterns
def test_fp32_matmul_pattern_follows_musa_tf32_support(device):
    a = torch.randn(32, 32, device=device)
    prof = _profile(lambda: a @ a)
    pattern = FP32MatMulPattern(prof)
    assert pattern.skip is (not torch.musa.is_tf32_supported())
    if not pattern.skip:  # TF32 is off for float32 matmuls by default
        assert any(e.name == "aten::mm" for e in pattern.matched_events())


@needs_patterns
def test_fp16_matmul_dim_pattern_matches_as_on_the_cpu(device):
    # musa's device events carry their aten op's name ("aten::mm"); they are not torch ops
    pattern = torch_patterns.MatMulDimInFP16Pattern

    def matches(dev, match=pattern.match):
        counts = []
        for shape in ((201, 201), (3, 97, 97), (200, 200), (3, 200, 200)):  # unaligned, unaligned, aligned, aligned
            x = torch.randn(shape, device=dev, dtype=torch.float16)
            with profile(activities=ACTIVITIES if dev != "cpu" else [ProfilerActivity.CPU], with_stack=True,
                         record_shapes=True) as prof:
                x @ x
            p = pattern(prof)
            counts.append(sum(1 for e in p.eventTreeTraversal() if match(p, e)))
        return counts

    assert matches(device) == matches("cpu") == [1, 1, 0, 0]
    assert matches("cpu", pattern.match.__wrapped__) == [1, 1, 0, 0]  # torch's own, on a profile without musa


@needs_patterns
def test_report_names_the_musa_patterns(device):
    prof = _profile(lambda: torch.zeros(64, 64).to(device))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        report_all_anti_patterns(prof)
    text = buf.getvalue()
    assert "Extra MUSA Copy Pattern" in text and "Extra CUDA Copy Pattern" not in text


@pytest.mark.skipif(HAS_PATTERNS, reason="the patterns exist on this torch")
def test_without_torchs_patterns_asking_for_musas_is_a_clear_error():
    import torch_musa.profiler as musa_profiler

    for name in ("ExtraMUSACopyPattern", "BasicEvaluation"):
        with pytest.raises(ImportError, match="_pattern_matcher"):
            getattr(musa_profiler, name)


def test_graph_replays_are_profiled_after_update_musa_graph_with_profile(device):
    x = torch.randn(16, 16, device=device)
    g = torch.musa.MUSAGraph()
    s = torch.musa.Stream()
    s.wait_stream(torch.musa.current_stream())
    with torch.musa.stream(s):
        (x * 2).relu()
        with torch.musa.graph(g):
            y = (x * 2).relu()
    torch.musa.current_stream().wait_stream(s)
    torch_musa.musa_graph.update_musa_graph_with_profile()
    prof = _profile(g.replay)
    assert [e.name for e in prof.events() if e.name == "MUSAGraph replay"]
    assert torch.equal(y.cpu(), (x.cpu() * 2).relu())
