// musa streams as c10::Streams: a fixed pool per device and priority (like
// CUDA's), the default stream as id 0, streams created outside torch_musa
// (ExternalStream) after the pools, and a per-thread current stream.
#pragma once

#include <c10/core/Stream.h>
#include <musa/runtime.h>

namespace torch_musa {

c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);
// Makes `stream` current on its device for this thread; returns the previous one.
c10::Stream exchange_stream(c10::Stream stream);
// A stream from the pool; priority 0 is normal, negative is higher.
c10::Stream stream_from_pool(c10::DeviceIndex device, int priority);
// The runtime handle behind a c10::Stream of the musa device.
musaStream_t native_stream(const c10::Stream& stream);
// native_stream(current_stream(device)) in one step (the allocator asks on every allocation).
musaStream_t current_native_stream(c10::DeviceIndex device);
// The handle users see for `stream` (Stream.musa_stream, extensions' getCurrentMUSAStream):
// the driver's own (cudaStream_t) where there is one, else the runtime's musaStream_t; the
// host driver's default stream is 0 (null), as CUDA's default stream is: the runtime takes a
// null stream as the current device's default stream.
void* user_stream_handle(const c10::Stream& stream);
// The c10::Stream for a stream handle created outside torch_musa (torch.cuda.ExternalStream's
// counterpart): `raw` is what Stream.musa_stream gives (a runtime musaStream_t, or on the cuda
// driver the cudaStream_t under it, which then gets a borrowing musa stream). A handle of a
// torch_musa stream gives that stream; the same handle always gives the same stream. The caller
// keeps the stream alive while it is used, as with CUDA.
c10::Stream external_stream(c10::DeviceIndex device, void* raw);
int stream_priority(const c10::Stream& stream);

}  // namespace torch_musa
