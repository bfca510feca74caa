// Names of the token types, for messages about a token of the wrong type.
#include "runtime/token_table.h"

namespace aethercl {

const char* describe_token_tag(std::uint8_t tag) noexcept {
  switch (tag) {
    case token_tag::kBuffer: return "a buffer handle";
    case token_tag::kStream: return "a stream";
    case token_tag::kEvent: return "an event";
    case token_tag::kComm: return "a communicator";
    case token_tag::kProgram: return "a program";
    case token_tag::kKernel: return "a kernel";
    case token_tag::kGraph: return "a graph";
    default: return nullptr;
  }
}

}  // namespace aethercl
