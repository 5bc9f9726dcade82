// Text from files shown in messages.
#pragma once

#include <string>
#include <string_view>

namespace systolic {

// `s` as it can be shown in a one-line message: valid UTF-8 is kept; control characters, backslashes and bytes
// that are not UTF-8 become \xNN; at most `max` bytes of `s` are shown, then "...".
std::string printable(std::string_view s, std::size_t max = 200);

}  // namespace systolic
