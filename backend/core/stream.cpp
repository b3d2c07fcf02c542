#include "core/stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "core/device.h"
#include "core/musa_check.h"

namespace torch_musa {
namespace {

constexpr int kStreamsPerPool = 32;
constexpr int kPriorityLevels = 3;  // priorities 0, -1, -2
constexpr int kMaxDevices = 64;

// Stream ids: 0 is the device's default stream; 1 + level*32 + i is entry i
// of the pool for priority level `level`.
struct DevicePools {
  std::once_flag once;
  std::array<std::array<musaStream_t, kStreamsPerPool>, kPriorityLevels> streams{};
  std::array<std::atomic<uint32_t>, kPriorityLevels> next{};
  musaStream_t default_stream = nullptr;
};

DevicePools& pools(c10::DeviceIndex device) {
  static std::array<DevicePools, kMaxDevices> all;
  check_device_index(device);
  DevicePools& p = all[device];
  std::call_once(p.once, [&] {
    DeviceScope scope(device);
    MUSA_CHECK(musaGetDefaultStream(device, &p.default_stream));
    int least = 0, greatest = 0;
    MUSA_CHECK(musaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int level = 0; level < kPriorityLevels; ++level) {
      for (int i = 0; i < kStreamsPerPool; ++i) {
        MUSA_CHECK(musaStreamCreateWithPriority(&p.streams[level][i], musaStreamNonBlocking,
                                                std::max(-level, greatest)));
      }
    }
  });
  return p;
}

thread_local std::array<c10::StreamId, kMaxDevices> t_current{};  // all default (0)

c10::Stream make(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

}  // namespace

c10::Stream default_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make(device, 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return make(device, t_current[device]);
}

c10::Stream exchange_stream(c10::Stream stream) {
  auto device = stream.device_index();
  check_device_index(device);
  auto prev = make(device, t_current[device]);
  t_current[device] = stream.id();
  return prev;
}

c10::Stream stream_from_pool(c10::DeviceIndex device, int priority) {
  if (device < 0) device = current_device();
  int level = std::min(std::max(-priority, 0), kPriorityLevels - 1);
  auto& p = pools(device);
  uint32_t i = p.next[level]++ % kStreamsPerPool;
  return make(device, 1 + level * kStreamsPerPool + static_cast<c10::StreamId>(i));
}

musaStream_t native_stream(const c10::Stream& stream) {
  auto& p = pools(stream.device_index());
  auto id = stream.id();
  if (id == 0) return p.default_stream;
  TORCH_CHECK(id > 0 && id <= kPriorityLevels * kStreamsPerPool, "invalid musa stream id ", id);
  auto idx = id - 1;
  return p.streams[idx / kStreamsPerPool][idx % kStreamsPerPool];
}

int stream_priority(const c10::Stream& stream) {
  if (stream.id() == 0) return 0;
  return -static_cast<int>((stream.id() - 1) / kStreamsPerPool);
}

}  // namespace torch_musa
