"""Device basics: torch.device("musa"), tensor/module/storage helpers, device API shaped like torch.cuda."""
import pytest
import torch
import torch.nn as nn


def test_backend_name_and_module():
    assert torch._C._get_privateuse1_backend_name() == "musa"
    import torch_musa
    assert torch.musa is torch_musa
    assert torch.musa.is_available()
    assert torch.musa.device_count() >= 1


def test_torch_device_parsing():
    d = torch.device("musa:1")
    assert (d.type, d.index) == ("musa", 1)
    assert torch.device("musa").index is None
    assert torch.device("musa", 0) == torch.device("musa:0")


def test_factory_on_musa_matches_cpu(same):
    for fn, args in [(torch.zeros, (3, 4)), (torch.ones, (2, 5)), (torch.arange, (10,)), (torch.eye, (4,))]:
        m = fn(*args, device="musa")
        assert m.is_musa and m.device == torch.device("musa", 0)
        same(m, fn(*args))
    same(torch.full((2, 3), 7.5, device="musa"), torch.full((2, 3), 7.5))
    same(torch.linspace(0, 1, 11, device="musa"), torch.linspace(0, 1, 11))
    same(torch.empty(3, 4, device="musa").fill_(2.0), torch.full((3, 4), 2.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64])
def test_roundtrip_dtypes(dtype):
    cpu = (torch.randn(4, 5) * 10).to(dtype)
    m = cpu.to("musa")
    assert m.dtype == dtype and m.is_musa
    assert torch.equal(m.cpu(), cpu)


def test_tensor_musa_method_and_is_musa():
    t = torch.randn(3)
    m = t.musa()
    assert m.is_musa and not t.is_musa
    assert m.get_device() == 0
    assert t.get_device() == -1
    assert torch.equal(m.cpu(), t)
    # .musa() on a musa tensor of the same device returns it unchanged, like .cuda()
    assert m.musa() is m


def test_module_musa_and_to(same):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    ref = model(x)
    model.musa()
    assert all(p.is_musa for p in model.parameters())
    same(model(x.musa()), ref)
    model.to("cpu")
    model.to(torch.device("musa"))
    same(model(x.to("musa")), ref)


def test_storage_musa():
    t = torch.arange(6, dtype=torch.float32)
    s = t.untyped_storage().musa()
    assert s.device.type == "musa"
    assert s.nbytes() == t.untyped_storage().nbytes()
    back = torch.empty(0, device="musa", dtype=torch.float32).set_(s)
    assert back.is_musa and torch.equal(back.cpu(), t)
    assert bytes(s.cpu()) == bytes(t.untyped_storage())


def test_item_print_and_tolist():
    cpu = torch.tensor([[1.5, -2.0], [3.25, 4.0]])
    m = cpu.musa()
    assert m.sum().item() == cpu.sum().item()
    assert m.tolist() == cpu.tolist()
    r = repr(m)
    assert "device='musa:0'" in r
    assert repr(cpu) in r.replace(", device='musa:0'", "")


def test_current_device_set_device_and_synchronize():
    assert torch.musa.current_device() == 0
    torch.musa.set_device(0)
    assert torch.musa.current_device() == 0
    torch.musa.synchronize()
    torch.musa.synchronize(0)
    torch.musa.synchronize("musa:0")


def test_device_properties_shape_like_cuda():
    p = torch.musa.get_device_properties(0)
    assert isinstance(p.name, str) and p.name
    assert p.total_memory > 0
    assert p.multi_processor_count > 0
    assert torch.musa.get_device_name(0) == p.name
    assert torch.musa.get_device_name() == p.name
    assert torch.musa.get_device_capability(0) == (p.major, p.minor)
    assert torch.musa.get_device_properties("musa:0") == p
    assert torch.musa.get_device_properties(torch.device("musa", 0)) == p


#: What kernel authors read from torch.cuda.get_device_properties to size tiles and launches.
CUDA_PROPERTY_NAMES = ("name", "major", "minor", "multi_processor_count", "total_memory", "is_integrated",
                       "is_multi_gpu_board", "max_threads_per_multi_processor", "warp_size", "max_threads_per_block",
                       "regs_per_multiprocessor", "shared_memory_per_block", "shared_memory_per_multiprocessor",
                       "shared_memory_per_block_optin", "L2_cache_size", "uuid", "clock_rate", "memory_clock_rate",
                       "memory_bus_width", "pci_bus_id", "pci_device_id", "pci_domain_id")


def test_device_properties_have_cuda_s_attributes():
    p = torch.musa.get_device_properties(0)
    missing = [a for a in CUDA_PROPERTY_NAMES if not hasattr(p, a)]
    assert not missing
    assert p.shared_memory_per_block_optin >= p.shared_memory_per_block > 0
    assert p.max_threads_per_multi_processor >= p.max_threads_per_block
    if torch.musa.get_driver_name() == "cuda":  # the GPU's own answers
        cuda = torch.cuda.get_device_properties(torch.musa._C._driver_ordinal(0))
        for a in CUDA_PROPERTY_NAMES:
            if a == "uuid":
                assert p.uuid == str(cuda.uuid).removeprefix("GPU-")
            elif hasattr(cuda, a):
                assert getattr(p, a) == getattr(cuda, a), a
    else:
        assert p.is_integrated == 1 and p.pci_bus_id == 0  # host memory; the device's emulated location
        assert torch.musa.get_device_properties(1).pci_bus_id == 1


def test_is_bf16_supported_and_amp_dtypes():
    assert torch.musa.is_bf16_supported() in (True, False)
    dtypes = torch.musa.get_amp_supported_dtype()
    assert torch.float16 in dtypes and torch.bfloat16 in dtypes


def test_default_device_context(same):
    with torch.device("musa"):
        t = torch.ones(3)
    assert t.is_musa
    same(t * 2, torch.ones(3) * 2)


def test_set_default_device(same):
    prev = torch.get_default_device()
    try:
        torch.set_default_device("musa")
        t = torch.arange(4.0)
        assert t.is_musa
    finally:  # (None, not "cpu": a "cpu" default would leave torch's device mode on for later tests)
        torch.set_default_device(None if prev == torch.device("cpu") else prev)
    same(t, torch.arange(4.0))
    assert not torch.arange(2).is_musa


def test_device_of():
    m = torch.ones(1, device="musa:0")
    with torch.musa.device_of(m):
        assert torch.musa.current_device() == 0
    with torch.musa.device_of(torch.ones(1)):  # cpu tensor: no-op, like torch.cuda.device_of
        assert torch.musa.current_device() == 0


def test_basic_ops_match_cpu(same):
    torch.manual_seed(1)
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    ma, mb = a.musa(), b.musa()
    same(ma @ mb, a @ b, rtol=1e-5, atol=1e-5)
    same(torch.relu(ma), torch.relu(a))
    same(ma.sum(dim=1), a.sum(dim=1), rtol=1e-5, atol=1e-5)
    same(ma.max(dim=0).values, a.max(dim=0).values)
    same(ma.argmax(dim=1), a.argmax(dim=1))
    same(torch.sort(ma, dim=1).values, torch.sort(a, dim=1).values)
    same(torch.where(ma > 0, ma, mb[0, 0]), torch.where(a > 0, a, b[0, 0]))
    same(torch.cat([ma, ma], 0), torch.cat([a, a], 0))
    same(ma[ma > 0], a[a > 0])
    same(torch.nonzero(ma > 1), torch.nonzero(a > 1))
    assert torch.equal(torch.unique(ma.round()).cpu(), torch.unique(a.round()))


def test_outputs_counted_by_allocator():
    torch.musa.synchronize()
    before = torch.musa.memory_allocated()
    x = torch.randn(1024, 256, device="musa")  # 1 MiB
    y = x * 2
    assert torch.musa.memory_allocated() - before >= 2 * x.numel() * 4
    del x, y
    assert torch.musa.memory_allocated() == before
