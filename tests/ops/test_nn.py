"""torch.nn modules on musa: forward and backward equal the CPU's."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


def _compare_module(module, *inputs, rtol=1e-5, atol=1e-5, train=True):
    torch.manual_seed(0)
    cpu_mod = module
    musa_mod = copy.deepcopy(module).to("musa")
    cpu_mod.train(train)
    musa_mod.train(train)
    cpu_in = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    musa_in = [x.detach().to("musa").requires_grad_(x.is_floating_point()) for x in inputs]
    out_c = cpu_mod(*cpu_in)
    out_m = musa_mod(*musa_in)
    if isinstance(out_c, tuple):
        out_c, out_m = out_c[0], out_m[0]
    assert out_m.is_musa
    torch.testing.assert_close(out_m.detach().cpu(), out_c.detach(), rtol=rtol, atol=atol)
    g = torch.randn_like(out_c)
    out_c.backward(g)
    out_m.backward(g.to("musa"))
    for (n, pc), (_, pm) in zip(cpu_mod.named_parameters(), musa_mod.named_parameters()):
        assert pm.grad.is_musa, n
        torch.testing.assert_close(pm.grad.cpu(), pc.grad, rtol=rtol * 10, atol=atol * 10, msg=n)
    for xc, xm in zip(cpu_in, musa_in):
        if xc.grad is not None:
            torch.testing.assert_close(xm.grad.cpu(), xc.grad, rtol=rtol * 10, atol=atol * 10)
    for (n, bc), (_, bm) in zip(cpu_mod.named_buffers(), musa_mod.named_buffers()):
        assert bm.is_musa
        torch.testing.assert_close(bm.cpu(), bc, rtol=rtol, atol=atol, msg=n)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "linear": (lambda: nn.Linear(10, 7), lambda: (_x(4, 10),)),
    "conv1d": (lambda: nn.Conv1d(3, 5, 3, padding=1), lambda: (_x(2, 3, 9),)),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), lambda: (_x(2, 3, 8, 8),)),
    "conv2d_groups_dilation": (lambda: nn.Conv2d(4, 4, 3, groups=2, dilation=2), lambda: (_x(1, 4, 9, 9),)),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2), lambda: (_x(1, 3, 5, 5),)),
    "batchnorm2d": (lambda: nn.BatchNorm2d(3), lambda: (_x(4, 3, 5, 5),)),
    "layernorm": (lambda: nn.LayerNorm(8), lambda: (_x(3, 4, 8),)),
    "groupnorm": (lambda: nn.GroupNorm(2, 4), lambda: (_x(2, 4, 3, 3),)),
    "embedding": (lambda: nn.Embedding(20, 6), lambda: (torch.tensor([[1, 5, 7], [19, 0, 5]]),)),
    "maxpool_avgpool": (lambda: nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2)), lambda: (_x(2, 2, 8, 8),)),
    "adaptive_avgpool": (lambda: nn.AdaptiveAvgPool2d((3, 2)), lambda: (_x(2, 2, 7, 5),)),
    "activations": (lambda: nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 6), nn.SiLU(), nn.Tanh(),
                                          nn.LeakyReLU(0.1), nn.ELU(), nn.Softplus()), lambda: (_x(5, 6),)),
    "lstm": (lambda: nn.LSTM(5, 7, num_layers=2, batch_first=True), lambda: (_x(3, 4, 5),)),
    "gru": (lambda: nn.GRU(5, 6), lambda: (_x(4, 2, 5),)),
    "multihead_attention": (lambda: nn.MultiheadAttention(8, 2, batch_first=True),
                            lambda: (_x(2, 5, 8), _x(2, 5, 8, seed=1), _x(2, 5, 8, seed=2))),
    "transformer_encoder_layer": (lambda: nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                                                     batch_first=True), lambda: (_x(2, 6, 16),)),
    "upsample": (lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), lambda: (_x(1, 2, 4, 4),)),
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), lambda: (_x(1, 8, 3, 3),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_matches_cpu(name):
    make_mod, make_in = CASES[name]
    torch.manual_seed(0)
    _compare_module(make_mod(), *make_in())


def test_batchnorm_eval_uses_running_stats():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(4)
    bn.running_mean.uniform_()
    bn.running_var.uniform_(0.5, 2)
    _compare_module(bn, _x(6, 4), train=False)


@pytest.mark.parametrize("loss", ["mse", "l1", "smooth_l1", "cross_entropy", "nll", "bce_logits", "kl_div",
                                  "cross_entropy_label_smoothing"])
def test_losses_match_cpu(loss):
    x, y = _x(6, 5), _x(6, 5, seed=1)
    t = torch.tensor([0, 4, 2, 1, 3, 3])
    fns = {
        "mse": lambda a, b, c: F.mse_loss(a, b),
        "l1": lambda a, b, c: F.l1_loss(a, b),
        "smooth_l1": lambda a, b, c: F.smooth_l1_loss(a, b),
        "cross_entropy": lambda a, b, c: F.cross_entropy(a, c),
        "nll": lambda a, b, c: F.nll_loss(F.log_softmax(a, 1), c),
        "bce_logits": lambda a, b, c: F.binary_cross_entropy_with_logits(a, b.sigmoid()),
        "kl_div": lambda a, b, c: F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction="batchmean"),
        "cross_entropy_label_smoothing": lambda a, b, c: F.cross_entropy(a, c, label_smoothing=0.1),
    }
    f = fns[loss]
    xc = x.clone().requires_grad_()
    xm = x.to("musa").requires_grad_()
    lc, lm = f(xc, y, t), f(xm, y.to("musa"), t.to("musa"))
    assert lm.is_musa and lm.dim() == 0
    torch.testing.assert_close(lm.cpu(), lc, rtol=1e-5, atol=1e-6)
    lc.backward()
    lm.backward()
    torch.testing.assert_close(xm.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-6)


def test_dropout_eval_is_identity_and_train_scales():
    x = torch.ones(1000, device="musa")
    d = nn.Dropout(0.25).to("musa")
    d.eval()
    assert torch.equal(d(x).cpu(), torch.ones(1000))
    d.train()
    y = d(x).cpu()
    kept = y != 0
    torch.testing.assert_close(y[kept], torch.full((int(kept.sum()),), 1 / 0.75))
    assert 600 < int(kept.sum()) < 900  # ~750 kept, binomial(1000, .75) has sd ~14


def test_scaled_dot_product_attention_matches_cpu():
    q, k, v = _x(2, 2, 5, 8), _x(2, 2, 5, 8, seed=1), _x(2, 2, 5, 8, seed=2)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = F.scaled_dot_product_attention(q.musa(), k.musa(), v.musa(), is_causal=True)
    assert out.is_musa
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_small_cnn_training_matches_cpu():
    torch.manual_seed(0)

    def make():
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 4 * 4, 10))

    cpu_model = make()
    musa_model = copy.deepcopy(cpu_model).musa()
    opt_c = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    opt_m = torch.optim.SGD(musa_model.parameters(), lr=0.1, momentum=0.9)
    data = _x(16, 1, 8, 8)
    target = torch.randint(0, 10, (16,), generator=torch.Generator().manual_seed(3))
    for _ in range(5):
        for model, opt, dev in ((cpu_model, opt_c, "cpu"), (musa_model, opt_m, "musa")):
            opt.zero_grad()
            F.cross_entropy(model(data.to(dev)), target.to(dev)).backward()
            opt.step()
    for (n, pc), (_, pm) in zip(cpu_model.state_dict().items(), musa_model.state_dict().items()):
        torch.testing.assert_close(pm.cpu(), pc, rtol=1e-4, atol=1e-5, msg=n)


def test_module_buffers_and_state_dict_device():
    m = nn.BatchNorm1d(3).musa()
    sd = m.state_dict()
    assert all(v.is_musa for v in sd.values())
    assert sd["num_batches_tracked"].dtype == torch.int64
    m(torch.randn(4, 3, device="musa"))
    assert sd["num_batches_tracked"].item() == 1


def test_half_and_bfloat16_linear():
    for dt in (torch.float16, torch.bfloat16):
        lin = nn.Linear(8, 4).to(dt)
        x = _x(3, 8).to(dt)
        ref = lin(x)
        out = copy.deepcopy(lin).musa()(x.musa())
        assert out.dtype == dt
        torch.testing.assert_close(out.cpu(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("fn", [F.mse_loss, F.smooth_l1_loss, F.l1_loss, F.huber_loss])
def test_losses_warn_no_more_than_cpu(fn):
    import warnings
    x, y = _x(6, 5), _x(6, 5, seed=1)
    with warnings.catch_warnings(record=True) as wc:
        warnings.simplefilter("always")
        ref = fn(x, y)
    with warnings.catch_warnings(record=True) as wm:
        warnings.simplefilter("always")
        out = fn(x.musa(), y.musa())
    torch.testing.assert_close(out.cpu(), ref)
    assert [str(w.message) for w in wm] == [str(w.message) for w in wc]
