// Device: where a tensor lives and a kernel runs ("cpu", "cuda:0").
//
// The CPU is always available. CUDA devices are parsed, printed and compared
// like the CPU, but this build has no CUDA runtime yet: cudaAvailable() says
// why, and Device::best() falls back to the CPU (DESIGN.md §7).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda };

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  /// The best usable device: CUDA when one is usable, else the CPU.
  static Device best();
  /// Parses "cpu", "cuda", "cuda:N"; throws kiln::Error otherwise.
  static Device parse(std::string_view text);

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool isCpu() const { return type_ == DeviceType::cpu; }
  bool isCuda() const { return type_ == DeviceType::cuda; }
  /// "cpu" or "cuda:N".
  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) = default;

 private:
  DeviceType type_ = DeviceType::cpu;
  int index_ = 0;
};

/// Whether CUDA devices can run kernels in this process; when not, `why`
/// (if non-null) receives the reason.
bool cudaAvailable(std::string* why = nullptr);

}  // namespace kiln
