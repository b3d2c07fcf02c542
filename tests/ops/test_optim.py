"""Optimizers on musa (for-loop, foreach and fused implementations) equal a CPU reference run."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils._foreach_utils


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))


def _train(model, opt, device, steps=6, scheduler=None):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8, 6, generator=g).to(device)
        y = torch.randn(8, 3, generator=g).to(device)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return model


def _compare(opt_cls, impl, rtol=1e-5, atol=1e-6, scheduler=None, **kw):
    ref = _model()
    musa = copy.deepcopy(ref).musa()
    # reference: the plain for-loop implementation on CPU
    opt_ref = opt_cls(ref.parameters(), foreach=False, **kw)
    extra = {"foreach": True} if impl == "foreach" else {"fused": True} if impl == "fused" else {"foreach": False}
    opt_m = opt_cls(musa.parameters(), **kw, **extra)
    _train(ref, opt_ref, "cpu", scheduler=scheduler(opt_ref) if scheduler else None)
    _train(musa, opt_m, "musa", scheduler=scheduler(opt_m) if scheduler else None)
    for (n, pr), (_, pm) in zip(ref.named_parameters(), musa.named_parameters()):
        assert pm.is_musa
        torch.testing.assert_close(pm.detach().cpu(), pr.detach(), rtol=rtol, atol=atol, msg=n)
    # optimizer state lives on musa and matches too. State such as RMSprop's
    # momentum (grad / sqrt(avg), magnitude ~10) carries float32 rounding of
    # about 1e-5 absolute even on the CPU (measured against float64), so it is
    # held to assert_close's float32 default atol rather than the tighter one.
    state_atol = max(atol, 1e-5)
    for pr, pm in zip(ref.parameters(), musa.parameters()):
        for k, vr in opt_ref.state[pr].items():
            vm = opt_m.state[pm][k]
            if torch.is_tensor(vm):
                torch.testing.assert_close(vm.detach().cpu().to(vr.dtype), vr, rtol=rtol, atol=state_atol,
                                           msg=lambda m, k=k: f"{k}: {m}")
    return opt_m


OPTIMS = [
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2, amsgrad=True, weight_decay=1e-2)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.RMSprop, dict(lr=1e-2, momentum=0.5)),
    (torch.optim.Adagrad, dict(lr=0.1)),
    (torch.optim.Adamax, dict(lr=1e-2)),
    (torch.optim.NAdam, dict(lr=1e-2)),
    (torch.optim.RAdam, dict(lr=1e-2)),
    (torch.optim.Adadelta, dict(lr=1.0)),
    (torch.optim.ASGD, dict(lr=1e-2)),
    (torch.optim.Rprop, dict(lr=1e-2)),
]


def _id(p):
    cls, kw = p
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("impl", ["for", "foreach"])
@pytest.mark.parametrize("opt", OPTIMS, ids=[_id(o) for o in OPTIMS])
def test_optimizer_matches_cpu(opt, impl):
    cls, kw = opt
    _compare(cls, impl, **kw)


FUSED = [
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.Adagrad, dict(lr=0.1)),
]


@pytest.mark.parametrize("opt", FUSED, ids=[_id(o) for o in FUSED])
def test_fused_optimizer_matches_cpu(opt):
    cls, kw = opt
    # torch lists the PrivateUse1 backend among the fused-kernel devices, as it does cuda and cpu
    assert "musa" in torch.utils._foreach_utils._get_fused_kernels_supported_devices()
    _compare(cls, "fused", **kw)


def test_foreach_supported_device_list():
    from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices
    assert "musa" in _get_foreach_kernels_supported_devices()


def test_default_impl_is_foreach_like_cuda():
    # On cuda, optimizers default to foreach when all params are on a foreach-capable device.
    from torch.optim.optimizer import _default_to_fused_or_foreach
    params = [torch.zeros(2, device="musa")]
    fused, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
    assert foreach and not fused


def test_lr_scheduler_with_musa_optimizer():
    _compare(torch.optim.SGD, "foreach", lr=0.5, momentum=0.9,
             scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5))


def test_optimizer_state_dict_roundtrip_to_cpu_and_back():
    model = _model().musa()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    _train(model, opt, "musa", steps=2)
    # the state travels through the CPU, as when a checkpoint is loaded with map_location="cpu"
    sd = copy.deepcopy(opt.state_dict())
    for st in sd["state"].values():
        for k in list(st):
            st[k] = st[k].cpu()
    model2 = copy.deepcopy(model)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2, foreach=True)
    opt2.load_state_dict(sd)
    for s in opt2.state.values():
        assert s["exp_avg"].is_musa
    _train(model, opt, "musa", steps=2)
    _train(model2, opt2, "musa", steps=2)
    for p, q in zip(model.parameters(), model2.parameters()):
        torch.testing.assert_close(q.cpu(), p.cpu())


def test_zero_grad_set_to_none():
    model = _model().musa()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 6, device="musa")).sum().backward()
    assert all(p.grad is not None and p.grad.is_musa for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_clip_grad_norm_foreach_matches_cpu():
    ref = _model()
    m = copy.deepcopy(ref).musa()
    x = torch.randn(4, 6)
    ref(x).pow(2).sum().backward()
    m(x.musa()).pow(2).sum().backward()
    nr = nn.utils.clip_grad_norm_(ref.parameters(), 0.5, foreach=False)
    nm = nn.utils.clip_grad_norm_(m.parameters(), 0.5, foreach=True)
    assert nm.is_musa
    torch.testing.assert_close(nm.cpu(), nr, rtol=1e-5, atol=1e-6)
    for pr, pm in zip(ref.parameters(), m.parameters()):
        torch.testing.assert_close(pm.grad.cpu(), pr.grad, rtol=1e-5, atol=1e-6)
