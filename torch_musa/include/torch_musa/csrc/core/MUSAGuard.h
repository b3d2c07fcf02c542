// Device and stream guards for the musa device (CUDAGuard's counterparts), over c10's
// generic guards, which reach torch_musa through its registered DeviceGuardImpl.
#pragma once

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>

#include <optional>

#include "torch_musa/csrc/core/MUSAStream.h"

namespace c10::musa {

inline c10::Device musa_device(c10::DeviceIndex index) { return c10::Device(c10::DeviceType::PrivateUse1, index); }

class MUSAGuard {
 public:
  explicit MUSAGuard(c10::DeviceIndex index) : guard_(musa_device(index)) {}
  explicit MUSAGuard(c10::Device device) : guard_(device) {}
  void set_device(c10::Device device) { guard_.reset_device(device); }
  void reset_device(c10::Device device) { guard_.reset_device(device); }
  void set_index(c10::DeviceIndex index) { guard_.set_index(index); }
  c10::Device original_device() const { return guard_.original_device(); }
  c10::Device current_device() const { return guard_.current_device(); }

 private:
  c10::DeviceGuard guard_;
};

class OptionalMUSAGuard {
 public:
  OptionalMUSAGuard() = default;
  explicit OptionalMUSAGuard(std::optional<c10::Device> device) : guard_(device) {}
  explicit OptionalMUSAGuard(std::optional<c10::DeviceIndex> index)
      : guard_(index ? std::optional<c10::Device>(musa_device(*index)) : std::nullopt) {}
  void set_device(c10::Device device) { guard_.reset_device(device); }
  void reset_device(c10::Device device) { guard_.reset_device(device); }
  void set_index(c10::DeviceIndex index) { guard_.reset_device(musa_device(index)); }
  std::optional<c10::Device> original_device() const { return guard_.original_device(); }
  std::optional<c10::Device> current_device() const { return guard_.current_device(); }

 private:
  c10::OptionalDeviceGuard guard_;
};

class MUSAStreamGuard {
 public:
  explicit MUSAStreamGuard(c10::Stream stream) : guard_(stream) {}
  explicit MUSAStreamGuard(const MUSAStream& stream) : guard_(stream.unwrap()) {}
  MUSAStream original_stream() const { return MUSAStream(guard_.original_stream()); }
  MUSAStream current_stream() const { return MUSAStream(guard_.current_stream()); }

 private:
  c10::StreamGuard guard_;
};

}  // namespace c10::musa

namespace at::musa {
using c10::musa::MUSAGuard;
using c10::musa::MUSAStreamGuard;
using c10::musa::OptionalMUSAGuard;
}  // namespace at::musa
