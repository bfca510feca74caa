// doctest main for the driver's unit tests (they run on the default OpenCL device, PoCL in CI).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
