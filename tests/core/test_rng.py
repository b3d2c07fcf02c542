"""Random numbers on musa: per-device generators with torch.cuda's seeding/state semantics."""
import pytest
import torch
import torch.nn.functional as F

SAMPLERS = {
    "randn": lambda g=None: torch.randn(1000, device="musa", generator=g),
    "rand": lambda g=None: torch.rand(1000, device="musa", generator=g),
    "randint": lambda g=None: torch.randint(0, 100, (1000,), device="musa", generator=g),
    "randperm": lambda g=None: torch.randperm(200, device="musa", generator=g),
    "normal_": lambda g=None: torch.empty(500, device="musa").normal_(2.0, 3.0, generator=g),
    "uniform_": lambda g=None: torch.empty(500, device="musa").uniform_(-2, 5, generator=g),
    "bernoulli": lambda g=None: torch.bernoulli(torch.full((500,), 0.3, device="musa"), generator=g),
    "multinomial": lambda g=None: torch.multinomial(torch.rand(4, 10, device="musa") + 0.1, 5, generator=g),
    "exponential_": lambda g=None: torch.empty(300, device="musa").exponential_(generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_manual_seed_reproducible(name):
    f = SAMPLERS[name]
    torch.musa.manual_seed(1234)
    a = f()
    torch.musa.manual_seed(1234)
    b = f()
    assert a.is_musa
    assert torch.equal(a.cpu(), b.cpu())
    c = f()
    assert not torch.equal(a.cpu(), c.cpu()), "consecutive draws must differ"
    torch.musa.manual_seed(4321)
    assert not torch.equal(a.cpu(), f().cpu()), "different seeds must differ"


def test_musa_stream_independent_of_cpu_generator():
    torch.musa.manual_seed(7)
    ref = torch.randn(100, device="musa").cpu()
    torch.musa.manual_seed(7)
    torch.randn(1000)  # drawing from the CPU generator ...
    torch.default_generator.manual_seed(99)  # ... or reseeding it
    assert torch.equal(torch.randn(100, device="musa").cpu(), ref)


def test_cpu_stream_independent_of_musa_draws():
    torch.default_generator.manual_seed(3)
    ref = torch.randn(100)
    torch.default_generator.manual_seed(3)
    torch.randn(1000, device="musa")
    assert torch.equal(torch.randn(100), ref)


def test_torch_manual_seed_seeds_musa_like_cuda():
    # torch.manual_seed also seeds every cuda device; the same holds for musa
    torch.manual_seed(11)
    a = torch.randn(50, device="musa").cpu()
    torch.musa.manual_seed_all(11)
    b = torch.randn(50, device="musa").cpu()
    assert torch.equal(a, b)
    assert torch.musa.initial_seed() == 11


def test_initial_seed_and_seed():
    torch.musa.manual_seed(2024)
    assert torch.musa.initial_seed() == 2024
    torch.musa.seed()
    s = torch.musa.initial_seed()
    a = torch.randn(10, device="musa").cpu()
    torch.musa.manual_seed(s)
    assert torch.equal(torch.randn(10, device="musa").cpu(), a)


def test_get_set_rng_state():
    torch.musa.manual_seed(5)
    torch.randn(10, device="musa")
    state = torch.musa.get_rng_state()
    # like torch.cuda.get_rng_state: a CPU uint8 tensor
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    a = torch.randn(100, device="musa").cpu()
    torch.musa.set_rng_state(state)
    b = torch.randn(100, device="musa").cpu()
    assert torch.equal(a, b)
    # the returned state is a copy: drawing more does not change it
    torch.randn(100, device="musa")
    torch.musa.set_rng_state(state)
    assert torch.equal(torch.randn(100, device="musa").cpu(), a)


def test_rng_state_all_and_per_device(two_devices):
    torch.musa.manual_seed_all(8)
    a0 = torch.randn(20, device="musa:0").cpu()
    a1 = torch.randn(20, device="musa:1").cpu()
    # each device has its own generator with the same seed, like cuda
    assert torch.equal(a0, a1)
    states = torch.musa.get_rng_state_all()
    assert len(states) == torch.musa.device_count()
    x0 = torch.randn(20, device="musa:0").cpu()
    x1 = torch.randn(20, device="musa:1").cpu()
    torch.musa.set_rng_state_all(states)
    assert torch.equal(torch.randn(20, device="musa:0").cpu(), x0)
    assert torch.equal(torch.randn(20, device="musa:1").cpu(), x1)
    # manual_seed seeds only the current device
    torch.musa.manual_seed_all(1)
    torch.musa.set_device(1)
    torch.musa.manual_seed(2)
    torch.musa.set_device(0)
    assert torch.musa.initial_seed() == 1
    s1 = torch.musa.get_rng_state(1)
    assert not torch.equal(s1, torch.musa.get_rng_state(0))
    torch.musa.set_rng_state(s1, "musa:1")


def test_explicit_generator():
    g = torch.Generator(device="musa")
    assert g.device.type == "musa"
    g.manual_seed(42)
    a = torch.randn(64, device="musa", generator=g).cpu()
    g.manual_seed(42)
    b = torch.randn(64, device="musa", generator=g).cpu()
    assert torch.equal(a, b)
    # the explicit generator does not advance the default one
    torch.musa.manual_seed(42)
    d = torch.randn(64, device="musa").cpu()
    torch.musa.manual_seed(42)
    torch.randn(64, device="musa", generator=g)
    assert torch.equal(torch.randn(64, device="musa").cpu(), d)


def test_generator_device_mismatch_raises_like_cuda():
    # cuda: "Expected a 'cpu' device type for generator but found 'cuda'" (and the reverse)
    g = torch.Generator(device="musa")
    with pytest.raises(RuntimeError, match="generator"):
        torch.randn(4, generator=g)
    with pytest.raises(RuntimeError, match="generator"):
        torch.randn(4, device="musa", generator=torch.Generator())


def test_default_generators_are_musa():
    g = torch.musa.random._generator(0)
    assert g.device == torch.device("musa", 0)
    # torch.musa.default_generators, as torch.cuda's: a tuple of each device's default generator
    gens = torch.musa.default_generators
    assert isinstance(gens, tuple) and len(gens) == torch.musa.device_count()
    assert [g.device for g in gens] == [torch.device("musa", i) for i in range(len(gens))]
    gens[0].manual_seed(7)
    a = torch.rand(4, device="musa:0").cpu()
    torch.musa.manual_seed(7)
    assert torch.equal(a, torch.rand(4, device="musa:0").cpu())


def test_distributions_statistics_like_cpu():
    torch.musa.manual_seed(0)
    n = 20000
    x = torch.randn(n, device="musa").cpu()
    assert abs(x.mean().item()) < 0.05 and abs(x.std().item() - 1) < 0.05
    u = torch.rand(n, device="musa").cpu()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean().item() - 0.5) < 0.02
    r = torch.randint(3, 9, (n,), device="musa").cpu()
    assert set(r.unique().tolist()) == set(range(3, 9))
    p = torch.randperm(500, device="musa").cpu()
    assert torch.equal(p.sort().values, torch.arange(500))
    b = torch.bernoulli(torch.full((n,), 0.3, device="musa")).cpu()
    assert abs(b.mean().item() - 0.3) < 0.02
    for dt in (torch.float16, torch.bfloat16, torch.float64):
        y = torch.randn(n, device="musa", dtype=dt)
        assert y.dtype == dt and abs(y.float().mean().item()) < 0.05


def test_dropout_reproducible_and_matches_functional_semantics():
    x = torch.randn(64, 64, device="musa")
    torch.musa.manual_seed(3)
    a = F.dropout(x, 0.5, training=True)
    torch.musa.manual_seed(3)
    b = F.dropout(x, 0.5, training=True)
    assert torch.equal(a.cpu(), b.cpu())
    c = F.dropout(x, 0.5, training=True)
    assert not torch.equal(a.cpu(), c.cpu())
    mask = a.cpu() != 0
    torch.testing.assert_close(a.cpu()[mask], x.cpu()[mask] * 2)
    assert 0.4 < mask.float().mean().item() < 0.6


def test_dropout_backward_uses_same_mask():
    x = torch.randn(32, 32, device="musa", requires_grad=True)
    torch.musa.manual_seed(9)
    y = F.dropout(x, 0.3, training=True)
    y.sum().backward()
    kept = (y != 0).cpu()
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.7)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_recomputes_dropout_with_the_forward_mask(use_reentrant):
    # torch.utils.checkpoint restores a device's RNG state for the recomputation only where
    # torch.<device>._initialized says so (torch.cuda's private flag): else the recomputed
    # dropout draws a new mask and the gradient is silently wrong.
    from torch.utils.checkpoint import checkpoint

    x = torch.ones(64, device="musa", requires_grad=True)
    torch.musa.manual_seed(1)
    y = checkpoint(lambda t: F.dropout(t, 0.5), x, use_reentrant=use_reentrant)
    y.sum().backward()
    assert torch.musa._initialized is True
    torch.testing.assert_close(x.grad.cpu(), (y != 0).cpu().float() * 2)


@pytest.mark.parametrize("fork_rng", ["torch.random", "torch_musa"])
def test_fork_rng_restores_musa_and_cpu_generators(fork_rng):
    import torch_musa

    fork = torch.random.fork_rng if fork_rng == "torch.random" else torch_musa.fork_rng
    kwargs = {"device_type": "musa"} if fork_rng == "torch.random" else {}
    torch.manual_seed(3)
    torch.musa.manual_seed(3)
    with fork(devices=[0], **kwargs):
        inside = (torch.rand(4, device="musa").cpu(), torch.rand(4))
        torch.musa.manual_seed(99)
    after = (torch.rand(4, device="musa").cpu(), torch.rand(4))
    assert torch.equal(inside[0], after[0]) and torch.equal(inside[1], after[1])
    with fork(devices=[0], enabled=False, **kwargs):
        torch.rand(4, device="musa")
    assert not torch.equal(torch.rand(4, device="musa").cpu(), after[0])  # not forked: the draw advanced it


def test_attention_without_dropout_leaves_the_random_stream_as_cpu():
    q = torch.randn(1, 2, 8, 16, generator=torch.Generator().manual_seed(0))

    def next_draw(device, p=None):
        gen_seed = torch.musa.manual_seed if device == "musa" else torch.manual_seed
        gen_seed(0)
        torch.rand(3, device=device)
        if p is not None:
            x = q.to(device)
            F.scaled_dot_product_attention(x, x, x, dropout_p=p)
        return torch.rand(3, device=device).cpu()

    # As on the cpu (and cuda): attention with dropout_p=0 draws no random numbers
    for device in ("cpu", "musa"):
        assert torch.equal(next_draw(device), next_draw(device, 0.0)), device
    # with dropout it draws from musa's generator: seeded, repeatable, and the stream moves on
    assert not torch.equal(next_draw("musa"), next_draw("musa", 0.5))
    assert torch.equal(next_draw("musa", 0.5), next_draw("musa", 0.5))
