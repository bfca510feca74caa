// fmt's implementation, compiled once for the driver: every other file sees fmt's declarations only
// (no FMT_HEADER_ONLY), which cuts their compile time about fivefold under the sanitizers.
#ifdef FMT_HEADER_ONLY
#error "driver_core builds fmt as a compiled library: FMT_HEADER_ONLY must not be defined"
#endif

#include <fmt/format-inl.h>

// Templates format.h declares but whose definitions live in format-inl.h: instantiated here for the
// character type the driver formats (char only) and the floating-point types it prints.
FMT_BEGIN_NAMESPACE
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template void buffer<char>::append(const char*, const char*);
template void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                         locale_ref);
}  // namespace detail
FMT_END_NAMESPACE
