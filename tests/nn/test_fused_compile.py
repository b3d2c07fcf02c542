"""The fused LLM ops trace: under torch.compile (fullgraph, forward and backward) they stay
single ops of the graph and give eager's results; torch.export keeps them (RoPE and SwishGLU
as musa_fused ops, rms_norm and cross_entropy as torch's ops that run fused on musa);
autocast leaves RoPE and SwishGLU in their input's dtype, as torch_musa's (they are on none of
its autocast lists). One compile for all four ops (CI's two cores make compiles the slow part)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_musa._version_gate import autocast_runs_rms_norm_in_float32


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class AllFour(nn.Module):
    def __init__(self, freq):
        super().__init__()
        self.norm, self.rope, self.glu = nn.RMSNorm(8), nn.RoPE(freq), nn.SwishGLU()
        self.proj = nn.Linear(8, 16)

    def forward(self, x, t):  # x (S, B, H, 8)
        h = self.rope(self.norm(x))
        logits = self.glu(self.proj(h)).flatten(0, 2)
        return F.cross_entropy(logits, t)


def _inputs(device):
    torch.manual_seed(0)
    m = AllFour(torch.randn(5, 8)).to(device)
    x = torch.randn(5, 2, 3, 8, device=device, requires_grad=True)
    return m, x, torch.randint(0, 8, (30,), device=device)


def test_compile_fullgraph_forward_and_backward(device):
    m, x, t = _inputs(device)
    loss = m(x, t)
    loss.backward()
    ref_grads = [x.grad.clone()] + [p.grad.clone() for p in m.parameters()]
    x.grad = None
    m.zero_grad()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        loss_c = torch.compile(m, fullgraph=True)(x, t)
        loss_c.backward()
    ran = {e.key for e in prof.key_averages()}
    for op in ("rope", "swiglu", "rmsnorm", "cross_entropy_2d"):  # each fused op ran, forward and backward
        assert {f"musa_fused::_fused_{op}_forward", f"musa_fused::_fused_{op}_backward"} <= ran, (op, ran)
    torch.testing.assert_close(loss_c, loss)
    for g, r in zip([x.grad] + [p.grad for p in m.parameters()], ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def test_export_keeps_the_fused_ops(device):
    """RoPE and SwishGLU export as musa_fused ops; rms_norm and cross_entropy stay torch's own
    ops in the exported program (its training IR keeps composites), which take the fused path
    when the program runs on musa."""
    m, x, t = _inputs(device)
    ep = torch.export.export(m, (x.detach(), t))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    for op in ("musa_fused._fused_rope_forward", "musa_fused._fused_swiglu_forward", "aten.rms_norm",
               "aten.cross_entropy_loss"):
        assert any(s.startswith(op) for s in targets), (op, targets)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = ep.module()(x.detach(), t)
    ran = {e.key for e in prof.key_averages()}
    assert {"musa_fused::_fused_rmsnorm_forward", "musa_fused::_fused_cross_entropy_2d_forward"} <= ran, ran
    torch.testing.assert_close(out, m(x.detach(), t))


def test_autocast_keeps_the_input_dtype(device):
    x, f = torch.randn(4, 1, 2, 8, device=device), torch.randn(4, 8, device=device)
    with torch.autocast("musa", dtype=torch.bfloat16):
        assert F.rope(x, f).dtype == torch.float32
        assert F.swish_glu(x.half()).dtype == torch.float16
        # rms_norm follows torch's autocast lists, as on cuda: float32 from torch 2.12, the input's dtype before
        expected = torch.float32 if autocast_runs_rms_norm_in_float32() else torch.bfloat16
        assert F.rms_norm(x.bfloat16(), (8,)).dtype == expected
        # the fused cross entropy reads bf16 logits and gives a float32 loss, as CUDA's composite does
        logits = torch.randn(6, 5, device=device, dtype=torch.bfloat16, requires_grad=True)
        t = torch.randint(0, 5, (6,), device=device)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            loss = F.cross_entropy(logits, t)
        assert any(e.key == "musa_fused::_fused_cross_entropy_2d_forward" for e in prof.key_averages())
    assert loss.dtype == torch.float32
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss.cpu(), F.cross_entropy(logits.detach().cpu().float(), t.cpu()))
