// Wrapping and checking program binaries handed to and taken from callers.
#include "runtime/program/binary_envelope.h"

#include "support/error.h"
#include "support/hash.h"

#include <cstdint>
#include <cstring>

namespace aethercl {
namespace {

constexpr char kMagic[8] = {'A', 'E', 'C', 'L', 'P', 'R', 'G', '1'};

void append_u64(std::vector<unsigned char>& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>((value >> (8 * i)) & 0xff));
}

std::uint64_t read_u64(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

}  // namespace

std::string device_identity(const DeviceInfo& info) {
  return Hasher()
      .add(info.name)
      .add(info.vendor)
      .add(info.device_version)
      .add(info.driver_version)
      .add(info.platform_name)
      .add(info.platform_version)
      .hex();
}

std::vector<unsigned char> wrap_binary(const DeviceInfo& info,
                                       const std::vector<unsigned char>& payload) {
  std::vector<unsigned char> out(kMagic, kMagic + sizeof(kMagic));
  std::string identity = device_identity(info);
  out.insert(out.end(), identity.begin(), identity.end());
  append_u64(out, payload.size());
  append_u64(out, Hasher().add(payload.data(), payload.size()).low());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

bool is_enveloped(const void* data, std::size_t size) {
  return size >= sizeof(kMagic) && std::memcmp(data, kMagic, sizeof(kMagic)) == 0;
}

std::vector<unsigned char> unwrap_binary(const DeviceInfo& info, const void* data,
                                         std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (size < kEnvelopeHeaderBytes) {
    fail(Status::kInvalidArgument, "the binary is truncated ({} bytes, the header alone is {})",
         size, kEnvelopeHeaderBytes);
  }
  std::string identity(reinterpret_cast<const char*>(bytes) + sizeof(kMagic), 32);
  if (identity != device_identity(info)) {
    fail(Status::kInvalidArgument,
         "the binary was built for another device or driver, not {} ({}, driver {})", info.name,
         info.device_version, info.driver_version);
  }
  std::uint64_t payload_size = read_u64(bytes + sizeof(kMagic) + 32);
  std::uint64_t payload_hash = read_u64(bytes + sizeof(kMagic) + 40);
  if (payload_size != size - kEnvelopeHeaderBytes) {
    fail(Status::kInvalidArgument, "the binary is truncated or padded ({} payload bytes, the "
         "header says {})", size - kEnvelopeHeaderBytes, payload_size);
  }
  const unsigned char* payload = bytes + kEnvelopeHeaderBytes;
  if (Hasher().add(payload, payload_size).low() != payload_hash) {
    fail(Status::kInvalidArgument, "the binary is corrupt (its checksum does not match)");
  }
  return std::vector<unsigned char>(payload, payload + payload_size);
}

}  // namespace aethercl
