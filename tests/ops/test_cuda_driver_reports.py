"""The cuda-driver gaps reported by torch_musa users (issue 19, part 7), each against the CPU:
fp32 convolution and matmul precision flags, antialiased upsampling, channels-last group norm,
max(dim, out=), _foreach_addcdiv_ with a cpu scalar tensor, torchvision ops under autocast.
They run on both drivers; the GPU suite runs them with TORCH_MUSA_DRIVER=cuda."""
import pytest
import torch
import torch.nn.functional as F


def test_fp32_convolution_keeps_fp32_accuracy_by_default(device):
    assert torch.backends.mudnn.allow_tf32 is False
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 64, 32, 32, generator=g), torch.randn(64, 64, 3, 3, generator=g)
    ref = F.conv2d(x.double(), w.double(), padding=1)
    got = F.conv2d(x.to(device), w.to(device), padding=1).cpu().double()
    assert ((got - ref).norm() / ref.norm()).item() < 1e-5  # TF32 would be ~1e-3


def test_matmul_tf32_flag_is_set_float32_matmul_precision(device):
    before = torch.get_float32_matmul_precision()
    try:
        torch.backends.musa.matmul.allow_tf32 = True
        assert torch.get_float32_matmul_precision() == "high"
        torch.set_float32_matmul_precision("highest")
        assert torch.backends.musa.matmul.allow_tf32 is False
        with pytest.raises(TypeError, match="must be a bool"):
            torch.backends.musa.matmul.allow_tf32 = 1
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(256, 256, generator=g), torch.randn(256, 256, generator=g)
        ref = a.double() @ b.double()
        got = (a.to(device) @ b.to(device)).cpu().double()
        assert ((got - ref).norm() / ref.norm()).item() < 1e-5
    finally:
        torch.set_float32_matmul_precision(before)


def test_attention_backend_switches_are_torch_cuda_s(device):
    # torch.backends.musa.enable_math_sdp(False) etc. set the global choice SDPA reads on musa
    # (an attention call with math the only backend left fails once math is off too)
    b = torch.backends.musa
    before = (b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(), b.math_sdp_enabled(), b.cudnn_sdp_enabled())
    q = torch.randn(1, 2, 5, 8)
    mask = torch.rand(5, 5) > 0.3
    ref = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    try:
        for off in (b.enable_flash_sdp, b.enable_mem_efficient_sdp, b.enable_cudnn_sdp):
            off(False)
        assert not torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()
        got = F.scaled_dot_product_attention(q.to(device), q.to(device), q.to(device), attn_mask=mask.to(device))
        torch.testing.assert_close(got.cpu(), ref)
        b.enable_math_sdp(False)
        assert not b.math_sdp_enabled()
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q.to(device), q.to(device), q.to(device), attn_mask=mask.to(device))
    finally:
        for on, was in zip((b.enable_flash_sdp, b.enable_mem_efficient_sdp, b.enable_math_sdp, b.enable_cudnn_sdp),
                           before):
            on(was)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_matmul_reduced_precision_flags_answer_as_torch_cuda(dtype):
    # A bool, as torch.backends.cuda.matmul's; a tuple sets (allow, allow_split_k). A getter that
    # answered torch._C's (allow, split_k) pair read True after setting False.
    musa, cuda = torch.backends.musa.matmul, torch.backends.cuda.matmul
    name = f"allow_{dtype}_reduced_precision_reduction"
    before = (getattr(cuda, name), getattr(cuda, name + "_split_k"))
    try:
        for value in (False, True, (False, False), (False, True)):
            setattr(musa, name, value)
            want = value if isinstance(value, tuple) else (value, True)
            assert (getattr(musa, name), getattr(musa, name + "_split_k")) == want
            assert (getattr(musa, name), getattr(musa, name + "_split_k")) == (getattr(cuda, name),
                                                                                 getattr(cuda, name + "_split_k"))
        with pytest.raises(AttributeError, match="torch.backends.musa.matmul has no attribute 'no_such_flag'"):
            musa.no_such_flag = True
    finally:
        setattr(cuda, name, before)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(7, 9), (40, 50), (1, 3), (33, 17)])
def test_antialiased_upsampling_matches_cpu(device, mode, size):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 17, 23, generator=g, requires_grad=True)
    xm = x.detach().to(device).requires_grad_()
    ref = F.interpolate(x, size=size, mode=mode, antialias=True)
    got = F.interpolate(xm, size=size, mode=mode, antialias=True)
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-5)
    ref.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(xm.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("in_size, size", [((224, 224), (7, 7)), ((64, 48), (5, 3)), ((17, 23), (64, 80)),
                                           ((9, 300), (9, 13)), ((300, 9), (12, 9))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_antialiased_bilinear_over_more_scales_matches_cpu(device, in_size, size, dtype, memory_format):
    # strong down- and upscales (the kernel's shared-memory layout depends on the scale), both layouts
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, *in_size, generator=g).to(dtype).contiguous(memory_format=memory_format)
    ref = F.interpolate(x.float(), size=size, mode="bilinear", antialias=True)
    got = F.interpolate(x.to(device), size=size, mode="bilinear", antialias=True)
    assert got.dtype == dtype
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(got.cpu().float(), ref, **tol)


def test_group_norm_on_channels_last_matches_cpu(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 5, 5, generator=g).to(memory_format=torch.channels_last).requires_grad_()
    xm = x.detach().to(device).requires_grad_()
    w, b = torch.randn(8, generator=g), torch.randn(8, generator=g)
    ref = F.group_norm(x, 4, w, b)
    got = F.group_norm(xm, 4, w.to(device), b.to(device))
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-5)
    ref.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(xm.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)


def test_max_dim_out_matches_cpu(device):
    x = torch.randn(4, 5)
    for v, i in ((torch.empty(0, device=device), torch.empty(0, dtype=torch.long, device=device)),
                 (torch.empty(4, device=device), torch.empty(4, dtype=torch.long, device=device))):
        r = torch.max(x.to(device), 1, out=(v, i))
        ref = torch.max(x, 1)
        assert r.values.data_ptr() == v.data_ptr()
        assert torch.equal(v.cpu(), ref.values) and torch.equal(i.cpu(), ref.indices)


def test_foreach_addcdiv_with_a_cpu_scalar_tensor(device):
    g = torch.Generator().manual_seed(0)
    ps = [torch.randn(3, generator=g) for _ in range(2)]
    ts = [torch.rand(3, generator=g) + 0.5 for _ in range(2)]
    scalars = torch.tensor([0.1, -0.2])
    mine = [p.to(device) for p in ps]
    torch._foreach_addcdiv_(mine, [t.to(device) for t in ts], [t.to(device) for t in ts], scalars)
    torch._foreach_addcdiv_(ps, ts, ts, scalars)
    for a, b in zip(mine, ps):
        torch.testing.assert_close(a.cpu(), b)


def test_torchvision_ops_under_autocast(device):
    try:
        import torchvision
    except Exception as e:  # noqa: BLE001  (not installed, or not for this torch)
        pytest.skip(f"torchvision does not import here: {e}")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=g)
    boxes = torch.tensor([[0, 1.0, 1.0, 9.0, 12.0], [0, 4.0, 2.0, 15.0, 15.0]])
    ref = torchvision.ops.roi_align(x, boxes, 4, spatial_scale=1.0, sampling_ratio=2)
    with torch.autocast(device.type, dtype=torch.float16):
        got = torchvision.ops.roi_align(x.to(device).half(), boxes.to(device), 4, spatial_scale=1.0, sampling_ratio=2)
        keep = torchvision.ops.nms(boxes[:, 1:].to(device).half(), torch.tensor([0.9, 0.8], device=device).half(), 0.5)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float().cpu(), ref, rtol=1e-2, atol=1e-2)
    assert keep.cpu().tolist() == torchvision.ops.nms(boxes[:, 1:], torch.tensor([0.9, 0.8]), 0.5).tolist()


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_upsampling_of_an_empty_batch_as_cpu(device, mode, align_corners):
    # torch_musa's upsample test case (batch 0): an empty result and an empty gradient, as the CPU gives
    # (CUDA's kernel launches an empty grid there, which CUDA refuses)
    x = torch.randn(0, 16, 1, 1, requires_grad=True)
    xm = x.detach().to(device).requires_grad_()
    kw = dict(scale_factor=2, mode=mode, align_corners=align_corners, antialias=True)
    ref, got = F.interpolate(x, **kw), F.interpolate(xm, **kw)
    assert got.shape == ref.shape == (0, 16, 2, 2) and got.device.type == "musa"
    ref.sum().backward()
    got.sum().backward()
    assert xm.grad.shape == x.grad.shape and xm.grad.device.type == "musa"
