"""nn.DataParallel on musa devices, as on cuda: torch.nn.parallel.comm's functions, replicate,
parallel_apply, scatter/gather and training, compared with one-device and CPU references.

torch's comm functions call CUDA-only torch._C functions; torch_musa/gates/data_parallel.py routes musa
arguments to musa implementations and everything else to torch, which the last tests check."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
from torch.nn.parallel import comm, parallel_apply, replicate
from torch.nn.parallel.scatter_gather import gather, scatter_kwargs

from torch_musa.gates import registry


def _needs_two():
    if torch.musa.device_count() < 2:
        pytest.skip(f"needs 2 musa devices, {torch.musa.device_count()} present (driver "
                    f"{torch.musa.get_driver_name()})")


class Net(nn.Module):
    """Returns a dict holding a tensor and a tuple, so gather must rebuild both."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 16)
        self.fc2 = nn.Linear(16, 3)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x, *, shift=0.0):
        h = torch.relu(self.fc1(x)) * self.scale + shift
        y = self.fc2(h)
        return {"y": y, "aux": (h.sum(1, keepdim=True), y.mean(1))}


def _loss(out):
    return (out["y"] ** 2).mean() + out["aux"][0].mean() * 0.1 + out["aux"][1].abs().mean()


def _train(model, batches, device=None, steps_input=lambda x, d: x.to(d)):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x in batches:
        opt.zero_grad()
        out = model(steps_input(x, device), shift=0.25)
        loss = _loss(out)
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]


def test_comm_functions_match_cpu_references():
    _needs_two()
    d0, d1 = torch.device("musa", 0), torch.device("musa", 1)
    x = torch.randn(7, 4)
    # scatter: equal chunks, explicit chunk sizes, out=, from the CPU on musa copy streams
    parts = comm.scatter(x.to(d0), [0, 1])
    assert [p.device for p in parts] == [d0, d1]
    for p, r in zip(parts, x.chunk(2)):
        torch.testing.assert_close(p.cpu(), r)
    parts = comm.scatter(x.to(d1), [0, 1], chunk_sizes=[2, 5], dim=0)
    torch.testing.assert_close(parts[1].cpu(), x[2:])
    outs = [torch.empty(7, 1, device=d0), torch.empty(7, 3, device=d1)]
    assert comm.scatter(x.to(d0), dim=1, out=outs)[1] is outs[1]
    torch.testing.assert_close(torch.cat([o.cpu() for o in outs], 1), x)
    streams = [torch.musa.Stream(0), torch.musa.Stream(1)]
    parts = comm.scatter(x, [0, 1], streams=streams)
    for p, s in zip(parts, streams):
        torch.musa.current_stream(p.get_device()).wait_stream(s)
    torch.testing.assert_close(torch.cat([p.cpu() for p in parts]), x)
    # gather: to a musa device (default: the current one), to the CPU, into out=
    a, b = x[:3].to(d1), x[3:].to(d0)
    with torch.musa.device(1):
        g = comm.gather([a, b])
    assert g.device == d1
    torch.testing.assert_close(g.cpu(), x)
    torch.testing.assert_close(comm.gather([a, b], destination="cpu"), x)
    out = torch.empty(4, 14, device=d0)
    comm.gather([x.t().to(d0), x.t().to(d1)], dim=1, out=out)
    torch.testing.assert_close(out.cpu(), torch.cat([x.t(), x.t()], 1))
    # broadcast / broadcast_coalesced: values, devices, the source kept on its own device
    src = x.to(d0)
    copies = comm.broadcast(src, [0, 1])
    assert copies[0] is src and copies[1].device == d1
    torch.testing.assert_close(copies[1].cpu(), x)
    dst = [torch.empty(7, 4, device=d1)]
    comm.broadcast(src, out=dst)
    torch.testing.assert_close(dst[0].cpu(), x)
    tensors = [x, torch.arange(5), torch.randn(3, dtype=torch.float64), torch.randn(2, 2, dtype=torch.complex64)]
    got = comm.broadcast_coalesced([t.to(d0) for t in tensors], [0, 1], buffer_size=32)
    assert [t.device for t in got[1]] == [d1] * 4
    for t, r in zip(got[1], tensors):
        torch.testing.assert_close(t.cpu(), torch.view_as_real(r) if r.is_complex() else r)
    # reduce_add / reduce_add_coalesced: sums on the destination
    y = torch.randn(7, 4)
    s = comm.reduce_add([x.to(d0), y.to(d1)], destination=1)
    assert s.device == d1
    torch.testing.assert_close(s.cpu(), x + y)
    sums = comm.reduce_add_coalesced([[x.to(d0), y.to(d0)], [y.to(d1), x.to(d1)]], destination=0)
    for t in sums:
        assert t.device == d0
        torch.testing.assert_close(t.cpu(), x + y)
    # torch.cuda.comm re-exports the same functions
    import torch.cuda.comm as cuda_comm
    torch.testing.assert_close(cuda_comm.gather([a, b], destination=0).cpu(), x)


def test_replicate_parallel_apply_scatter_gather():
    _needs_two()
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(6, 5)
    ref = net(x, shift=1.0)
    musa_net = copy.deepcopy(net).to("musa:0")
    inputs, kwargs = scatter_kwargs((x.to("musa:0"),), {"shift": 1.0}, [0, 1])
    replicas = replicate(musa_net, [0, 1])
    assert replicas[1].fc1.weight.device == torch.device("musa", 1)
    assert replicas[0].fc1.weight.data_ptr() == musa_net.fc1.weight.data_ptr()
    outputs = parallel_apply(replicas, inputs, kwargs, [0, 1])
    assert outputs[1]["y"].device == torch.device("musa", 1)
    out = gather(outputs, 0)
    assert isinstance(out, dict) and isinstance(out["aux"], tuple)
    torch.testing.assert_close(out["y"].cpu(), ref["y"])
    torch.testing.assert_close(out["aux"][0].cpu(), ref["aux"][0])
    torch.testing.assert_close(out["aux"][1].cpu(), ref["aux"][1])


def test_training_matches_one_device_and_cpu():
    """DataParallel over 2 devices trains like the same model on one musa device and on the CPU;
    some steps feed CPU inputs (scattered on DataParallel's background copy streams) and one runs on a
    side stream of device 0."""
    _needs_two()
    torch.manual_seed(0)
    base = Net()
    batches = [torch.randn(8, 5) for _ in range(3)]
    cpu_losses, cpu_params = _train(copy.deepcopy(base), batches, "cpu")
    one_losses, one_params = _train(copy.deepcopy(base).to("musa:0"), batches, "musa:0")
    dp = nn.DataParallel(copy.deepcopy(base).to("musa:0"), device_ids=[0, 1])
    assert dp.src_device_obj == torch.device("musa", 0)
    side = torch.musa.Stream(0)

    def feed(x, _):
        feed.step += 1
        if feed.step == 1:  # CPU input
            return x
        if feed.step == 2:  # input produced on a side stream, then ordered
            with torch.musa.stream(side):
                y = x.to("musa:0")
            torch.musa.current_stream(0).wait_stream(side)
            return y
        return x.to("musa:0")

    feed.step = 0
    dp_losses, dp_params = _train(dp, batches, None, feed)
    streams = [s for s in (torch.nn.parallel._functions._streams or []) if s is not None]
    assert streams and all(s.device.type == "musa" for s in streams)
    for got in (dp_losses, *dp_params):
        assert got.device.type == "cpu"
    torch.testing.assert_close(dp_losses, one_losses)
    torch.testing.assert_close(dp_losses, cpu_losses)
    for p, q, r in zip(dp_params, one_params, cpu_params):
        torch.testing.assert_close(p, q)
        torch.testing.assert_close(p, r)


def test_all_devices_output_device_and_functional():
    _needs_two()
    torch.manual_seed(0)
    net = nn.Linear(4, 2)
    x = torch.randn(5, 4)
    dp = nn.DataParallel(copy.deepcopy(net).musa(), output_device=1)
    assert dp.device_ids == list(range(torch.musa.device_count()))
    out = dp(x.musa())
    assert out.device == torch.device("musa", 1)
    torch.testing.assert_close(out.cpu(), net(x))
    out.sum().backward()
    net(x).sum().backward()
    assert dp.module.weight.grad.device == torch.device("musa", 0)
    torch.testing.assert_close(dp.module.weight.grad.cpu(), net.weight.grad)
    out = nn.parallel.data_parallel(dp.module, x.musa(), device_ids=[0, 1], output_device=1)
    torch.testing.assert_close(out.cpu(), net(x))


def test_musa_device_type_when_cuda_is_available(monkeypatch):
    """Where CUDA is available (the cuda driver's machine) torch's _get_available_device_type says
    "cuda"; a DataParallel built around a musa module still takes musa devices, others keep torch's."""
    torch_answer = registry.original("torch._utils._get_available_device_type")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert torch._utils._get_available_device_type() == torch_answer() == "cuda"
    net = nn.Linear(3, 2)
    dp = nn.DataParallel(copy.deepcopy(net).musa())
    assert dp.src_device_obj == torch.device("musa", 0)
    assert dp.device_ids == list(range(torch.musa.device_count()))
    assert torch._utils._get_available_device_type() == "cuda"
    x = torch.randn(4, 3)
    torch.testing.assert_close(dp(x.musa()).cpu(), net(x))
    torch.testing.assert_close(nn.parallel.data_parallel(dp.module, x.musa()).cpu(), net(x))


def _outcome(fn, *args, **kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn(*args, **kwargs)
    except Exception as e:  # the same error type and message as torch's own function
        return type(e), str(e)


def _same_outcome(a, b):
    assert a[0] == b[0], (a, b)
    if a[0] != "ok":
        assert a[1] == b[1]
        return
    ra, rb = a[1], b[1]
    if isinstance(ra, torch.Tensor):
        ra, rb = [ra], [rb]
    for u, v in zip(ra, rb):
        if isinstance(u, (list, tuple)):
            _same_outcome(("ok", u), ("ok", v))
        else:
            assert u.device == v.device
            torch.testing.assert_close(u, v)


def test_wrappers_leave_cpu_and_cuda_calls_to_torch():
    """CPU calls (and cuda calls, with a GPU) get exactly torch's own result or error."""
    orig = {name: registry.original(f"torch.nn.parallel.comm.{name}")
            for name in ("broadcast", "broadcast_coalesced", "reduce_add", "scatter", "gather")}
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    calls = [
        ("gather", ([x, y],), {"destination": "cpu"}),
        ("reduce_add", ([x, y],), {"destination": 0}),
        ("broadcast_coalesced", ([x, y], ["cpu"]), {}),
        ("scatter", (x, ["cpu"]), {}),
        ("broadcast", (x,), {"devices": ["cpu"]}),
    ]
    if torch.cuda.is_available():
        c = x.cuda()
        calls += [
            ("gather", ([c, y.cuda()],), {"destination": 0}),
            ("reduce_add", ([c, y.cuda()],), {"destination": 0}),
            ("broadcast_coalesced", ([c], [0]), {}),
            ("scatter", (c, [0]), {}),
            ("scatter", (x, [0]), {}),
            ("broadcast", (c,), {"devices": [0]}),
        ]
    for name, args, kwargs in calls:
        _same_outcome(_outcome(getattr(comm, name), *args, **kwargs), _outcome(orig[name], *args, **kwargs))
    torch_answer = registry.original("torch._utils._get_available_device_type")
    assert torch._utils._get_available_device_type() == torch_answer()
    # a CPU module: DataParallel's own construction, attribute for attribute
    torch_init = registry.original("torch.nn.parallel.data_parallel.DataParallel.__init__")
    a = nn.DataParallel(nn.Linear(2, 2))
    b = nn.DataParallel.__new__(nn.DataParallel)
    torch_init(b, nn.Linear(2, 2))
    assert a.device_ids == b.device_ids
    assert getattr(a, "src_device_obj", None) == getattr(b, "src_device_obj", None)
    torch_fn = registry.original("torch.nn.parallel.data_parallel.data_parallel")
    net = nn.Linear(3, 2)
    _same_outcome(_outcome(nn.parallel.data_parallel, net, x), _outcome(torch_fn, net, x))


def test_torch_musa_comm_is_torch_cuda_comm_for_musa_tensors():
    _needs_two()
    x = torch.arange(12.0).reshape(4, 3)
    parts = torch.musa.comm.scatter(x.to("musa:0"), [0, 1])
    assert [p.device for p in parts] == [torch.device("musa", 0), torch.device("musa", 1)]
    torch.testing.assert_close(torch.musa.comm.gather(parts, destination="cpu"), x)
    copies = torch.musa.comm.broadcast(x.to("musa:0"), [0, 1])
    torch.testing.assert_close(torch.musa.comm.reduce_add(copies, destination=1).cpu(), 2 * x)
    assert set(torch.musa.comm.__all__) <= set(dir(comm))  # torch.cuda.comm's names
