// Names of the token types, for messages about a token passed where another type belongs.
#include "runtime/token_registry.h"

namespace aethercl {

const char* token_type_of_tag(std::uint8_t tag) noexcept {
  switch (tag) {
    case token_tag::kBuffer: return "a buffer handle";
    case token_tag::kProgram: return "a program token";
    case token_tag::kKernel: return "a kernel token";
    default: return nullptr;
  }
}

}  // namespace aethercl
