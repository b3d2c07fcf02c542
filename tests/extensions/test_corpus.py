"""The extension corpus (elementwise, shared-memory block reduction, warp-shuffle
softmax, atomic histogram, warp votes, every atomic, segmented warp scans, a non-default stream ordered by an event, MUSA
Graph capture), built through setup.py (MUSAExtension + BuildExtension) and through
load_inline, run on musa tensors and compared with torch."""
import torch


def test_elementwise_axpy(ext):
    torch.manual_seed(0)
    for n in (1, 1000, 300_001):
        x, y = torch.randn(n, device="musa"), torch.randn(n, device="musa")
        torch.testing.assert_close(ext.axpy(x, y, 2.5), 2.5 * x + y)


def test_block_reduction_shared_memory(ext):
    torch.manual_seed(1)
    x = torch.randn(37, 1000, device="musa")
    for threads in (32, 256, 1024):
        torch.testing.assert_close(ext.row_sum(x, threads, 0), x.sum(1), rtol=1e-5, atol=1e-4)


def test_warp_shuffle_softmax(ext):
    torch.manual_seed(2)
    for rows, cols in ((1, 1), (5, 31), (64, 1000), (129, 4096)):
        x = torch.randn(rows, cols, device="musa") * 4
        torch.testing.assert_close(ext.softmax(x), torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_atomic_histogram(ext):
    torch.manual_seed(3)
    x = torch.randn(200_000, device="musa")
    counts = ext.histogram(x, 64, -3.0, 3.0)
    ref = torch.histc(x.cpu(), bins=64, min=-3.0, max=3.0).to(torch.int32)
    assert counts.dtype == torch.int32
    torch.testing.assert_close(counts.cpu(), ref, rtol=0, atol=1)  # float binning at bin edges
    assert int(counts.sum()) == int(((x >= -3) & (x <= 3)).sum())


def test_warp_votes(ext):
    torch.manual_seed(4)
    x = torch.randn(1000, device="musa")
    x[:64] = 1.0  # two warps of all-positive lanes
    x[64:96] = -1.0  # one warp with none
    out = ext.vote(x).cpu()
    lanes = torch.nn.functional.pad(x.cpu(), (0, out.shape[0] * 32 - x.numel()), value=-1.0).view(-1, 32) > 0
    assert torch.equal(out[:, 0], lanes.sum(1).to(torch.int32))
    assert torch.equal(out[:, 1], lanes.any(1).to(torch.int32))
    assert torch.equal(out[:, 2], lanes.all(1).to(torch.int32))
    assert out[0, 2] == 1 and out[2, 1] == 0


def test_every_atomic(ext):
    torch.manual_seed(6)
    v = torch.randint(-1000, 1000, (5000,), dtype=torch.int32)
    init = torch.tensor([2**31 - 1, -(2**31), 5000, 0, 0, -1, 0, 0], dtype=torch.int32)
    out, fmax, total = ext.atomics(v.to("musa"), init.to("musa"), torch.tensor([-1e30]).to("musa"))
    out = out.cpu()
    bits = torch.tensor([1 << (i % 31) for i in range(5000)], dtype=torch.int64)
    assert out[0] == v.min() and out[1] == v.max() and out[2] == 0
    assert int(out[3]) in set(v.tolist())  # some thread's value was exchanged in last
    assert out[4] == v.sum()  # the compare-and-swap loop lost no update
    or_bits = 0
    for b in set(bits.tolist()):
        or_bits |= b
    assert int(out[5]) & or_bits == 0 and int(out[6]) == or_bits
    xor = 0
    for x in v.tolist():
        xor ^= x
    assert int(out[7]) == xor
    assert float(fmax) == float(v.max()) * 0.5
    assert int(total) == int(v.to(torch.int64).sum()) + 1000 * 5000


def test_segmented_warp_scans(ext):
    torch.manual_seed(7)
    x = torch.randn(1024, device="musa")
    for width in (32, 16, 4):
        scan, seg_total, suffix, positives = ext.scan(x, width)
        segs = x.view(-1, width)
        torch.testing.assert_close(scan, segs.cumsum(1).view(-1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(seg_total, segs.sum(1, keepdim=True).expand(-1, width).reshape(-1),
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(suffix, segs.flip(1).cumsum(1).flip(1).view(-1), rtol=1e-5, atol=1e-5)
        assert torch.equal(positives.cpu(), (x.view(-1, 256) > 0).sum(1).to(torch.int32).cpu())


def test_launch_on_non_default_stream_ordered_by_event(ext):
    torch.manual_seed(5)
    side = torch.musa.Stream()
    x = torch.randn(1 << 20, device="musa")
    y = torch.randn(1 << 20, device="musa")
    done = torch.musa.Event()
    side.wait_stream(torch.musa.current_stream())  # x and y were made on the default stream
    with torch.musa.stream(side):
        assert ext.current_stream_handle() == side.musa_stream
        out = ext.axpy(x, y, -1.0)
        out2 = ext.softmax(out.view(1024, 1024))
        done.record(side)
    assert ext.current_stream_handle() == torch.musa.current_stream().musa_stream
    torch.musa.current_stream().wait_event(done)
    total = out2.sum(1)  # on the default stream, after the event
    torch.testing.assert_close(total, torch.ones(1024, device="musa"), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, y - x)


def test_launches_are_captured_by_musa_graphs(ext):
    x = torch.randn(4096, device="musa")
    y = torch.randn(4096, device="musa")
    ext.axpy(x, y, 3.0)  # warm up outside the capture
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        out = ext.axpy(x, y, 3.0)
    x.copy_(torch.arange(4096.0, device="musa"))
    y.fill_(1.0)
    g.replay()
    torch.musa.synchronize()
    torch.testing.assert_close(out, 3.0 * x + y)
