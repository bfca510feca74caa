// Thread-local name of the running entry point.
#include "support/entry_point.h"

namespace aethercl {
namespace {

thread_local const char* tls_entry_point = "";

}  // namespace

void set_current_entry_point(const char* name) noexcept { tls_entry_point = name; }
const char* current_entry_point() noexcept { return tls_entry_point; }

}  // namespace aethercl
