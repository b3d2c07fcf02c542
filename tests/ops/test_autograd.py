"""Autograd on musa: gradients equal the CPU's."""
import pytest
import torch
import torch.nn.functional as F


def _pair(*shape, seed=0, requires_grad=True):
    g = torch.Generator().manual_seed(seed)
    c = torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(requires_grad)
    m = c.detach().to("musa").requires_grad_(requires_grad)
    return c, m


def _check_grads(fn, *shapes, rtol=1e-7, atol=1e-7):
    pairs = [_pair(*s, seed=i) for i, s in enumerate(shapes)]
    cpu_in = [p[0] for p in pairs]
    musa_in = [p[1] for p in pairs]
    out_c, out_m = fn(*cpu_in), fn(*musa_in)
    assert out_m.is_musa
    torch.testing.assert_close(out_m.cpu(), out_c, rtol=rtol, atol=atol)
    out_c.sum().backward()
    out_m.sum().backward()
    for c, m in zip(cpu_in, musa_in):
        assert m.grad is not None and m.grad.is_musa
        torch.testing.assert_close(m.grad.cpu(), c.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,fn,shapes", [
    ("matmul", lambda a, b: a @ b, [(4, 5), (5, 3)]),
    ("elementwise", lambda a, b: (a * b).sin() + a.exp() / (1 + b ** 2), [(6, 7), (6, 7)]),
    ("broadcast", lambda a, b: a + b, [(4, 1, 3), (5, 1)]),
    ("reductions", lambda a: a.mean(0) * a.amax(1).sum() + a.norm(), [(5, 6)]),
    ("softmax", lambda a: F.log_softmax(a, dim=-1) * torch.arange(6, device=a.device), [(3, 6)]),
    ("indexing", lambda a: a[1:, ::2][torch.tensor([0, 2], device=a.device)], [(5, 6)]),
    ("gather", lambda a: a.gather(1, torch.tensor([[0, 2], [1, 1]], device=a.device)), [(2, 4)]),
    ("views", lambda a: a.t().reshape(-1).view(3, 8).transpose(0, 1).unsqueeze(0)[0], [(4, 6)]),
    ("cat_stack", lambda a, b: torch.stack([torch.cat([a, b]), torch.cat([b, a])]), [(2, 3), (2, 3)]),
    ("where_clamp", lambda a: torch.where(a > 0, a.clamp(max=0.5), a * 3), [(8,)]),
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3)]),
    ("max_pool", lambda x: F.max_pool2d(x, 2), [(1, 2, 6, 6)]),
    ("cumsum_sort", lambda a: a.cumsum(1) * a.sort(1).values, [(3, 5)]),
])
def test_grad_matches_cpu(name, fn, shapes):
    _check_grads(fn, *shapes)


def test_inplace_and_grad_accumulation():
    c, m = _pair(5)
    for x in (c, m):
        y = x * 2
        y.add_(1).mul_(x)
        y.sum().backward()
        (x ** 2).sum().backward()  # grads accumulate like on CPU
    torch.testing.assert_close(m.grad.cpu(), c.grad)


def test_autograd_grad_and_double_backward():
    c, m = _pair(4)
    res = []
    for x in (c, m):
        y = (x ** 3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
        res.append((g.detach().cpu(), gg.cpu()))
    torch.testing.assert_close(res[1][0], res[0][0])
    torch.testing.assert_close(res[1][1], res[0][1])


def test_gradcheck_on_musa():
    x = torch.randn(3, 4, dtype=torch.float64, device="musa", requires_grad=True)
    w = torch.randn(4, 2, dtype=torch.float64, device="musa", requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: torch.tanh(a @ b), (x, w))
    assert torch.autograd.gradgradcheck(lambda a: (a * a.sigmoid()), (x,))


def test_no_grad_and_detach():
    x = torch.randn(3, device="musa", requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad
    assert not x.detach().requires_grad
    assert x.detach().data_ptr() == x.data_ptr()


def test_grad_flows_across_device_copy():
    c = torch.randn(5, dtype=torch.float64, requires_grad=True)
    (c.to("musa") * 3).sin().sum().backward()
    ref = torch.cos(c.detach() * 3) * 3
    assert c.grad.device.type == "cpu"
    torch.testing.assert_close(c.grad, ref)


def test_custom_function():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    c, m = _pair(6)
    Square.apply(c).sum().backward()
    Square.apply(m).sum().backward()
    torch.testing.assert_close(m.grad.cpu(), c.grad)


def test_backward_runs_on_musa_stream_and_device(two_devices):
    x = torch.randn(4, device="musa:1", requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.device == torch.device("musa", 1)
    torch.testing.assert_close(x.grad.cpu(), 2 * x.detach().cpu())
    assert torch.musa.current_device() == 0
