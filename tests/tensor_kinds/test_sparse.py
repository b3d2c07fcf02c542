"""Sparse musa tensors (COO and the compressed layouts) against the same program on the cpu."""
import io

import pytest
import torch
import torch.nn as nn

from tests.conftest import assert_same


def _dense(seed=0, shape=(5, 6)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    return x.masked_fill(x < 0.4, 0)


def _parts_on_musa(t):
    parts = [t._indices(), t._values()] if t.layout == torch.sparse_coo else [t.values()]
    return all(p.device.type == "musa" for p in parts)


def test_coo_round_trip_and_parts():
    x = _dense()
    s = x.to_sparse().to("musa")
    assert s.is_sparse and s.device.type == "musa" and _parts_on_musa(s)
    assert s._nnz() == x.to_sparse()._nnz() and s.sparse_dim() == 2
    c = s.coalesce()
    assert c.is_coalesced() and c.indices().device.type == "musa"
    assert_same(c.to_dense(), x)
    assert s.cpu().layout == torch.sparse_coo and s.cpu().device.type == "cpu"
    assert_same(x.to("musa").to_sparse().to_dense(), x)  # to_sparse on musa
    # Construction from musa indices and values (as torch.sparse_coo_tensor on cuda).
    i, v = torch.tensor([[0, 1, 1], [2, 0, 2]]), torch.tensor([3.0, 4.0, 5.0])
    m = torch.sparse_coo_tensor(i.musa(), v.musa(), (2, 3))
    assert_same(m.to_dense(), torch.sparse_coo_tensor(i, v, (2, 3)).to_dense())


def test_coo_ops_match_cpu():
    x, y, d = _dense(0), _dense(1), torch.randn(6, 3)
    sx, sy = x.to_sparse(), y.to_sparse()
    mx, my = sx.musa(), sy.musa()
    assert_same((mx + my).to_dense(), (sx + sy).to_dense())
    assert_same((mx * my).to_dense(), (sx * sy).to_dense())
    assert_same((mx * 2.5).to_dense(), (sx * 2.5).to_dense())
    assert_same(torch.sparse.sum(mx), torch.sparse.sum(sx))
    assert_same(torch.sparse.sum(mx, 1).to_dense(), torch.sparse.sum(sx, 1).to_dense())
    assert_same(torch.sparse.mm(mx, d.musa()), torch.sparse.mm(sx, d))
    assert_same(mx @ d.musa(), sx @ d)
    b = torch.randn(5, 3)
    assert_same(torch.sparse.addmm(b.musa(), mx, d.musa(), beta=0.5), torch.sparse.addmm(b, sx, d, beta=0.5))
    inplace = mx.clone()
    inplace.add_(my)  # in place: the musa tensor takes the kernel's new parts
    assert inplace.device.type == "musa" and _parts_on_musa(inplace)
    assert_same(inplace.to_dense(), x + y)


def test_sparse_gradient():
    x, d = _dense(), torch.randn(6, 2)
    a = x.to_sparse().requires_grad_()
    torch.sparse.mm(a, d).pow(2).sum().backward()
    m = x.to_sparse().musa().requires_grad_()
    torch.sparse.mm(m, d.musa()).pow(2).sum().backward()
    assert m.grad.layout == torch.sparse_coo
    assert_same(m.grad.to_dense(), a.grad.to_dense())


@pytest.mark.parametrize("layout", ["csr", "csc", "bsr", "bsc"])
def test_compressed_layouts(layout):
    x = _dense(shape=(4, 6))
    conv = {"csr": lambda t: t.to_sparse_csr(), "csc": lambda t: t.to_sparse_csc(),
            "bsr": lambda t: t.to_sparse_bsr((2, 2)), "bsc": lambda t: t.to_sparse_bsc((2, 2))}[layout]
    ref = conv(x)
    m = ref.to("musa")
    assert m.layout == ref.layout and m.values().device.type == "musa"
    assert_same(m.to_dense(), x)
    if layout in ("csr", "bsr"):
        assert_same(m.crow_indices(), ref.crow_indices())
        assert_same(m.col_indices(), ref.col_indices())
    assert conv(x.musa()).layout == ref.layout  # conversion on musa
    if layout == "csr":
        d, b = torch.randn(6, 3), torch.randn(4, 3)
        assert_same(m @ d.musa(), ref @ d)
        assert_same(torch.addmm(b.musa(), m, d.musa()), torch.addmm(b, ref, d))
        mask = torch.eye(4).to_sparse_csr()
        p, q = torch.randn(4, 5), torch.randn(5, 4)
        out = torch.sparse.sampled_addmm(mask.musa(), p.musa(), q.musa())
        assert out.layout == torch.sparse_csr
        assert_same(out.to_dense(), torch.sparse.sampled_addmm(mask, p, q).to_dense())


@pytest.mark.parametrize("optimizer", ["sgd", "sparse_adam"])
def test_sparse_embedding_training_matches_cpu(optimizer):
    make = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1), "sparse_adam": lambda p: torch.optim.SparseAdam(p, lr=0.1)}
    torch.manual_seed(0)
    ref = nn.ModuleList([nn.Embedding(12, 4, sparse=True), nn.EmbeddingBag(12, 4, mode="sum", sparse=True)])
    mod = nn.ModuleList([nn.Embedding(12, 4, sparse=True), nn.EmbeddingBag(12, 4, mode="sum", sparse=True)]).musa()
    mod.load_state_dict(ref.state_dict())
    opts = make[optimizer](ref.parameters()), make[optimizer](mod.parameters())
    idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3])
    for _ in range(3):
        for m, opt, dev in ((ref, opts[0], "cpu"), (mod, opts[1], "musa")):
            opt.zero_grad()
            loss = m[0](idx.to(dev)).pow(2).sum() + m[1](idx.to(dev), offsets.to(dev)).pow(2).sum()
            loss.backward()
            opt.step()
    assert mod[0].weight.grad.layout == torch.sparse_coo
    for a, b in zip(mod.parameters(), ref.parameters()):
        assert_same(a.detach(), b.detach())


def test_save_load_and_memory_accounting():
    before = torch.musa.memory_allocated()
    x = _dense(shape=(64, 64))
    s = x.to_sparse().musa()
    assert torch.musa.memory_allocated() > before  # indices and values are musa memory
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    r = torch.load(buf)
    assert r.layout == torch.sparse_coo and r.device.type == "musa"
    assert_same(r.to_dense(), x)
    buf.seek(0)
    assert torch.load(buf, map_location="cpu").device.type == "cpu"
