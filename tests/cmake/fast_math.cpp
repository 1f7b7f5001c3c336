// Compiled (syntax only) by tests/user_flags.cmake with -ffast-math and its parts, which
// posenc/detail/fast_math_guard.hpp refuses, and with the flags it accepts.
#include <posenc/posenc.hpp>

int main() { return 0; }
