// OpenCL C type names to kinds and sizes.
#include "runtime/program/kernel_arg_types.h"

#include <array>
#include <cctype>
#include <string_view>
#include <utility>

namespace aethercl {
namespace {

constexpr std::array<std::pair<std::string_view, std::size_t>, 16> kScalars{{
    {"char", 1}, {"uchar", 1}, {"unsigned char", 1}, {"bool", 1},
    {"short", 2}, {"ushort", 2}, {"unsigned short", 2}, {"half", 2},
    {"int", 4}, {"uint", 4}, {"unsigned int", 4}, {"float", 4},
    {"long", 8}, {"ulong", 8}, {"unsigned long", 8}, {"double", 8},
}};

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

// Drops qualifiers some runtimes keep in CL_KERNEL_ARG_TYPE_NAME ("const float").
std::string without_qualifiers(std::string text) {
  for (std::string_view word : {"const ", "volatile ", "restrict "}) {
    for (std::size_t at; (at = text.find(word)) != std::string::npos;) text.erase(at, word.size());
  }
  return trimmed(text);
}

}  // namespace

const char* arg_kind_name(ArgKind kind) noexcept {
  switch (kind) {
    case ArgKind::kBuffer: return "buffer";
    case ArgKind::kScalar: return "scalar";
    case ArgKind::kLocal: return "local";
    case ArgKind::kUnknown: return "unknown";
  }
  return "unknown";
}

ArgKind arg_kind_of(cl_kernel_arg_address_qualifier qualifier, const std::string& type_name) {
  bool pointer = type_name.find('*') != std::string::npos;
  switch (qualifier) {
    case CL_KERNEL_ARG_ADDRESS_GLOBAL:
    case CL_KERNEL_ARG_ADDRESS_CONSTANT:
      // image and pipe parameters are __global objects without a '*'
      return pointer ? ArgKind::kBuffer : ArgKind::kUnknown;
    case CL_KERNEL_ARG_ADDRESS_LOCAL: return pointer ? ArgKind::kLocal : ArgKind::kUnknown;
    case CL_KERNEL_ARG_ADDRESS_PRIVATE: {
      std::string type = without_qualifiers(type_name);
      if (pointer || type.rfind("sampler_t", 0) == 0 || type.rfind("queue_t", 0) == 0 ||
          type.rfind("image", 0) == 0) {
        return ArgKind::kUnknown;
      }
      return ArgKind::kScalar;
    }
    default: return ArgKind::kUnknown;
  }
}

std::optional<std::size_t> scalar_type_size(std::string type_name, std::uint32_t address_bits) {
  std::string type = without_qualifiers(std::move(type_name));
  if (type == "size_t" || type == "ptrdiff_t" || type == "intptr_t" || type == "uintptr_t") {
    return address_bits / 8;
  }
  // A vector: a scalar name followed by 2, 3, 4, 8 or 16 (3-vectors take the room of 4).
  std::size_t digits = type.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(type[digits - 1]))) --digits;
  std::size_t lanes = 1;
  if (digits < type.size()) {
    std::string count = type.substr(digits);
    if (count == "2") lanes = 2;
    else if (count == "3" || count == "4") lanes = 4;
    else if (count == "8") lanes = 8;
    else if (count == "16") lanes = 16;
    else return std::nullopt;
    type.resize(digits);
  }
  for (const auto& [name, bytes] : kScalars) {
    if (type == name) return bytes * lanes;
  }
  return std::nullopt;
}

}  // namespace aethercl
