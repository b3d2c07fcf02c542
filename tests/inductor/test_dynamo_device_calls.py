"""torch.musa's device, stream, event and RNG calls under Dynamo, as torch.cuda's: traced without a
graph break where torch.cuda's are, run eagerly (a graph break) where torch.cuda's are."""
import torch
from torch._dynamo.testing import CompileCounter


def test_device_stream_and_event_calls_trace_in_one_graph(device):
    def fn(x):
        side = torch.musa.Stream()
        done = torch.musa.Event()
        with torch.musa.stream(side):
            y = x * 2 + torch.musa.current_device() + torch.musa.device_count()
            y = y + torch.musa.get_device_properties(device).multi_processor_count
            done.record()
        torch.musa.current_stream().wait_event(done)
        torch.musa.synchronize()
        return y + int(torch.musa.is_available())

    x = torch.randn(16, device=device)
    cnt = CompileCounter()
    torch._dynamo.reset()
    out = torch.compile(fn, backend=cnt, fullgraph=True)(x)
    assert cnt.frame_count == 1
    torch.testing.assert_close(out.cpu(), fn(x).cpu())
    # current_device() was folded under a guard: on another device the function recompiles.
    if torch.musa.device_count() > 1:
        with torch.musa.device(1):
            torch.compile(fn, backend=cnt, fullgraph=True)(x)
        assert cnt.frame_count == 2
    torch._dynamo.reset()


def test_rng_state_and_default_stream_calls_run_eagerly(device):
    def fn(x):
        y = x * 2
        torch.musa.manual_seed(7)
        torch.musa.default_stream()
        return y + torch.rand(4, device=device)

    x = torch.ones(4, device=device)
    cnt = CompileCounter()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=cnt)(x)  # graph breaks, as at torch.cuda.manual_seed
    torch.testing.assert_close(compiled.cpu(), fn(x).cpu())  # the seed was set before the draw
    assert cnt.frame_count == 2  # the graphs before and after the eager calls
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=cnt)(x)  # graph breaks, as at torch.cuda.manual_seed
    torch.testing.assert_close(compiled.cpu(), fn(x).cpu())  # the seed was set before the draw
    assert cnt.frame_count >= 1
    torch._dynamo.reset()
