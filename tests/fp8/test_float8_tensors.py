"""float8 tensors on musa: casts bit-exact against the CPU for every pair, creation, copies, views,
joins, indexing, serialization, printing; ops without a float8 kernel say to upcast."""
import io

import pytest
import torch

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def special_values(dtype):
    """Normal, subnormal, out-of-range (saturation/overflow), signed zeros, inf and NaN."""
    base = torch.tensor([0.0, -0.0, 1.0, -1.5, 0.3, 447.0, 448.0, 449.0, 464.0, 500.0, -1e4, 57344.0, 61440.0,
                         1e5, 2.0 ** -9, 2.0 ** -10, 2.0 ** -16, 2.0 ** -17, 3e-5, float("inf"), float("-inf"),
                         float("nan")], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    rand = torch.randn(997, generator=g, dtype=torch.float64) * torch.logspace(-6, 5, 997, dtype=torch.float64)
    return torch.cat([base, rand]).to(dtype)


def bits(t):
    return t.cpu().view(torch.uint8) if t.element_size() == 1 else t.cpu()


@pytest.mark.parametrize("f8", FLOAT8)
@pytest.mark.parametrize("hp", FLOATS)
def test_casts_match_the_cpu_bit_for_bit(device, hp, f8):
    x = special_values(hp)
    down = x.to(device).to(f8)
    assert down.dtype == f8 and down.device.type == "musa"
    assert torch.equal(bits(down), bits(x.to(f8)))
    up = x.to(f8).to(device).to(hp)
    ref = x.to(f8).to(hp)
    assert torch.equal(up.cpu().nan_to_num(), ref.nan_to_num()) and torch.equal(up.cpu().isnan(), ref.isnan())


@pytest.mark.parametrize("a", FLOAT8[:2])
@pytest.mark.parametrize("b", FLOAT8[:2])
def test_float8_to_float8(device, a, b):
    x = special_values(torch.float32).to(a)
    assert torch.equal(bits(x.to(device).to(b)), bits(x.to(b)))


@pytest.mark.parametrize("f8", FLOAT8[:2])
def test_creation_copies_views_joins_indexing(device, f8):
    cpu = torch.randn(6, 8).to(f8)
    m = cpu.to(device)
    assert torch.equal(bits(torch.zeros(3, dtype=f8, device=device)), bits(torch.zeros(3, dtype=f8)))
    assert torch.equal(bits(torch.full((3,), 2.5, dtype=f8, device=device)), bits(torch.full((3,), 2.5, dtype=f8)))
    assert torch.equal(bits(torch.ones(2, 2, dtype=f8, device=device)), bits(torch.ones(2, 2, dtype=f8)))
    assert torch.empty(4, dtype=f8, device=device).dtype == f8
    for name, fn in {
        "clone": lambda t: t.clone(), "copy_": lambda t: torch.empty_like(t).copy_(t),
        "t": lambda t: t.t().contiguous(), "permute": lambda t: t.permute(1, 0).contiguous(),
        "slice": lambda t: t[1:5, ::3].contiguous(), "narrow": lambda t: t.narrow(1, 2, 4).contiguous(),
        "reshape": lambda t: t.reshape(4, 12), "view_u8": lambda t: t.view(torch.uint8),
        "cat": lambda t: torch.cat([t, t[:2]]), "stack": lambda t: torch.stack([t, t], 1),
        "index": lambda t: t[torch.tensor([4, 0, 2], device=t.device)],
        "index_select": lambda t: t.index_select(1, torch.tensor([7, 1], device=t.device)),
        "flip": lambda t: t.flip(0), "split": lambda t: t.split(4, dim=1)[1].contiguous(),
        "where": lambda t: torch.where(t.float() > 0, t, torch.zeros_like(t)),
        "eq": lambda t: t == t,
    }.items():
        got, ref = fn(m), fn(cpu)
        assert got.device.type == "musa", name
        assert torch.equal(bits(got), bits(ref)), name
    s = m.clone()
    s[1] = 3.0
    s[2:4, 1] = cpu[0, :2].to(device)
    r = cpu.clone()
    r[1] = 3.0
    r[2:4, 1] = cpu[0, :2]
    assert torch.equal(bits(s), bits(r))


@pytest.mark.parametrize("f8", FLOAT8)
def test_save_load_and_print(device, f8):
    x = torch.rand(5, 3).mul(8).to(f8).to(device)
    buf = io.BytesIO()
    torch.save({"w": x}, buf)
    buf.seek(0)
    y = torch.load(buf)["w"]
    assert y.device == x.device and y.dtype == f8 and torch.equal(bits(y), bits(x))
    text = repr(x)
    assert "device='musa:0'" in text
    assert " ".join(text.replace("device='musa:0',", "").split()) == " ".join(repr(x.cpu()).split())


@pytest.mark.parametrize("op", [lambda t: t.sum(), lambda t: t.amax(), lambda t: t.cumsum(0)])
def test_ops_without_a_float8_kernel_name_the_dtype_and_say_to_upcast(device, op):
    x = torch.randn(8, device=device).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError) as e:
        op(x)
    msg = str(e.value)
    assert "Float8_e4m3fn" in msg and "upcast" in msg and "x.to(torch.bfloat16)" in msg
    # the process stays usable, and the upcast works as said
    assert torch.equal(op(x.to(torch.bfloat16)).float().cpu(), op(x.cpu().to(torch.bfloat16)).float())


def test_device_reports_fp8(device):
    assert torch.musa.is_fp8_supported()
    if torch.musa.get_driver_name() == "host":
        assert torch.musa.get_device_capability() == (3, 1)
        assert torch.musa.get_device_properties(0).major == 3
    assert torch.musa.get_device_capability() >= (3, 1)
