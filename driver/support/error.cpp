// Names of the stable status codes (abi/status.def).
#include "support/error.h"

namespace aethercl {

const char* status_name(int code) noexcept {
  switch (code) {
#define AETHERCL_STATUS(value, name, enumerator, description) \
  case (value):                                                \
    return #name;
#include "status.def"
#undef AETHERCL_STATUS
  }
  return "AETHERCL_UNKNOWN_STATUS";
}

}  // namespace aethercl
