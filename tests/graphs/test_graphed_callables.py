"""torch.musa.make_graphed_callables: graphed training matches eager training step for step."""
import copy

import pytest
import torch
from torch import nn


def _mlp(seed=0, d_in=16, d_hidden=32, d_out=4):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_hidden), nn.Tanh(),
                         nn.Linear(d_hidden, d_out))


def _batches(n, device, d_in=16, d_out=4, batch=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, d_in, generator=g).to(device), torch.randn(batch, d_out, generator=g).to(device))
            for _ in range(n)]


def _train(model, params, data, step_fn):
    opt = torch.optim.SGD(params, lr=0.1)
    losses = []
    for x, t in data:
        opt.zero_grad(set_to_none=True)
        loss = step_fn(model, x, t)
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses)


def _mse(model, x, t):
    return torch.nn.functional.mse_loss(model(x), t)


def test_graphed_module_training_matches_eager(device):
    eager = _mlp().to(device)
    graphed = copy.deepcopy(eager)
    data = _batches(5, device)
    sample = torch.randn(8, 16, device=device)
    out = torch.musa.make_graphed_callables(graphed, (sample,))
    assert out is graphed  # modules come back themselves, with forward replaced

    eager_losses = _train(eager, eager.parameters(), data, _mse)
    graphed_losses = _train(graphed, graphed.parameters(), data, _mse)
    torch.testing.assert_close(graphed_losses, eager_losses)
    for pg, pe in zip(graphed.parameters(), eager.parameters()):
        assert pg.device.type == "musa"
        torch.testing.assert_close(pg, pe)


def test_graphed_function_training_matches_eager(device):
    torch.manual_seed(0)
    w1 = torch.randn(16, 32, device=device, requires_grad=True)
    w2 = torch.randn(32, 4, device=device, requires_grad=True)
    w1_e, w2_e = (w.detach().clone().requires_grad_() for w in (w1, w2))

    def fn(x, a, b):
        return torch.tanh(x @ a).relu() @ b

    sample = (torch.randn(8, 16, device=device), w1, w2)
    graphed_fn = torch.musa.make_graphed_callables(fn, sample)
    data = _batches(5, device)

    graphed_losses = _train(None, [w1, w2], data,
                            lambda _, x, t: torch.nn.functional.mse_loss(graphed_fn(x, w1, w2), t))
    eager_losses = _train(None, [w1_e, w2_e], data,
                          lambda _, x, t: torch.nn.functional.mse_loss(fn(x, w1_e, w2_e), t))
    torch.testing.assert_close(graphed_losses, eager_losses)
    torch.testing.assert_close(w1, w1_e)
    torch.testing.assert_close(w2, w2_e)


def test_tuple_of_modules_matches_eager(device):
    first_e, second_e = _mlp(seed=2, d_out=8).to(device), _mlp(seed=3, d_in=8).to(device)
    first, second = copy.deepcopy(first_e), copy.deepcopy(second_e)
    x_sample = torch.randn(8, 16, device=device)
    h_sample = torch.randn(8, 8, device=device, requires_grad=True)  # second gets first's output
    g1, g2 = torch.musa.make_graphed_callables((first, second), ((x_sample,), (h_sample,)))
    assert g1 is first and g2 is second
    data = _batches(5, device)

    def chain(m, x, t):
        return torch.nn.functional.mse_loss(m[1](m[0](x)), t)

    graphed_losses = _train((first, second), list(first.parameters()) + list(second.parameters()), data, chain)
    eager_losses = _train((first_e, second_e), list(first_e.parameters()) + list(second_e.parameters()), data, chain)
    torch.testing.assert_close(graphed_losses, eager_losses)
    for pg, pe in zip(list(first.parameters()) + list(second.parameters()),
                      list(first_e.parameters()) + list(second_e.parameters())):
        torch.testing.assert_close(pg, pe)


def test_allow_unused_input(device):
    w = torch.randn(4, 4, device=device, requires_grad=True)
    unused = torch.randn(4, device=device, requires_grad=True)

    def fn(x, w, unused):
        return (x @ w).sum(dim=1)

    sample = (torch.randn(3, 4, device=device), w, unused)
    with pytest.raises(RuntimeError):
        torch.musa.make_graphed_callables(fn, sample, num_warmup_iters=1)
    torch.musa.synchronize()
    graphed = torch.musa.make_graphed_callables(fn, sample, num_warmup_iters=1, allow_unused_input=True)
    x = torch.randn(3, 4, device=device)
    graphed(x, w, unused).sum().backward()
    assert unused.grad is None
    torch.testing.assert_close(w.grad, x.sum(0, keepdim=True).t().expand(4, 4))


def test_eval_mode_and_no_grad_use_the_original_forward(device):
    model = nn.Sequential(nn.Linear(16, 8), nn.Dropout(0.5)).to(device)
    reference = copy.deepcopy(model)
    torch.musa.make_graphed_callables(model, (torch.randn(4, 16, device=device),))
    x = torch.randn(6, 16, device=device)  # another batch size: only the original forward accepts it
    model.eval()
    reference.eval()
    torch.testing.assert_close(model(x), reference(x))
    model.train()
    with torch.no_grad():
        assert model(x).shape == (6, 8)
    y = model(torch.randn(4, 16, device=device))  # training + grad: the graph
    assert y.shape == (4, 8) and y.requires_grad


def test_module_with_hooks_is_refused(device):
    m = nn.Linear(4, 4).to(device)
    m.register_forward_hook(lambda *a: None)
    with pytest.raises(AssertionError, match="hooks"):
        torch.musa.make_graphed_callables(m, (torch.randn(2, 4, device=device),))
    m2 = nn.Linear(4, 4).to(device)
    m2.register_forward_pre_hook(lambda *a: None)
    with pytest.raises(AssertionError, match="hooks"):
        torch.musa.make_graphed_callables(m2, (torch.randn(2, 4, device=device),))


def test_sample_args_must_be_tensors(device):
    m = nn.Linear(4, 4).to(device)
    with pytest.raises(AssertionError, match="only Tensors"):
        torch.musa.make_graphed_callables(m, (torch.randn(2, 4, device=device), 3))
    with pytest.raises(AssertionError, match="only Tensors"):
        torch.musa.make_graphed_callables(lambda x, s: x * s, (torch.randn(2, device=device), "scale"))


def test_buffers_must_not_require_grad(device):
    m = nn.Linear(4, 4).to(device)
    m.register_buffer("b", torch.zeros(4, device=device, requires_grad=True))
    with pytest.raises(AssertionError, match="buffers"):
        torch.musa.make_graphed_callables(m, (torch.randn(2, 4, device=device),))


def test_call_must_match_sample_requires_grad(device):
    w = torch.randn(4, 4, device=device, requires_grad=True)
    graphed = torch.musa.make_graphed_callables(lambda x, w: x @ w, (torch.randn(2, 4, device=device), w),
                                                num_warmup_iters=1)
    with pytest.raises(RuntimeError, match="requires_grad"):
        graphed(torch.randn(2, 4, device=device), w.detach())
