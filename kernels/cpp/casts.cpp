// casts.cpp: C casts and the four C++ casts, and the integer conversions that break index arithmetic.
//
// Taught in docs/cpp/types.md.
// Build: mkdir -p build/cpp && g++ -std=c++17 -O2 -Wall -Wextra -Werror -pedantic -o build/cpp/casts
//        kernels/cpp/casts.cpp
// Run:   ./build/cpp/casts
//
// course: run
#include <cstdint>
#include <cstring>
#include <limits>

#include "check.h"

// --8<-- [start:named_casts]
// static_cast: a conversion the language knows (int <-> float, void* -> T*, enum <-> int).
// reinterpret_cast: "treat these bits/this address as another type"; you promise it is valid.
// const_cast: adds or removes const; writing through it to a truly const object is undefined.
// dynamic_cast: checked down-casts of polymorphic classes; GPU code does not use it.
// A C cast (T)x tries these in turn and silently picks one: the named casts say which you meant.
static float float_from_bits(std::uint32_t bits) {
  float f;
  static_assert(sizeof f == sizeof bits, "float is 32 bits");
  std::memcpy(&f, &bits, sizeof f);  // the defined way to reinterpret bytes (C++20: std::bit_cast)
  return f;
}
// --8<-- [end:named_casts]

int main(int argc, char** argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  cli_finish(&cli);  // no options: anything on the command line is an error
  int ok = 1;

  // --8<-- [start:conversions]
  // float -> int truncates toward zero; it does not round.
  const double d = -2.7;
  const int truncated = static_cast<int>(d);  // -2
  // void* -> T* needs a cast in C++ (C converts implicitly). malloc and cudaMalloc hand out void*.
  float storage[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  void* opaque = storage;
  float* typed = static_cast<float*>(opaque);
  // 0xFFFFFFFF is a NaN as a float: the poison value course.cuh writes into outputs.
  const float poison = float_from_bits(0xFFFFFFFFu);
  // --8<-- [end:conversions]
  ok = check_true("named_casts", truncated == -2 && typed[2] == 3.0f && poison != poison, 3,
                  "truncation, void* round trip, NaN from bits") && ok;

  // --8<-- [start:integer_traps]
  // Trap 1: the product is computed in int BEFORE it is widened, so it overflows first.
  // (Signed overflow is undefined: here we show it safely in unsigned arithmetic, which wraps.)
  const unsigned rows = 70000, cols = 70000;
  const std::size_t wrong = rows * cols;                             // 32-bit product, wrapped
  const std::size_t right = static_cast<std::size_t>(rows) * cols;  // 64-bit product
  // Trap 2: comparing signed with unsigned converts the signed value to unsigned: -1 becomes huge.
  const int minus_one = -1;
  const bool surprising = static_cast<unsigned>(minus_one) > 1u;  // true: 4294967295 > 1
  // (-Wall -Wextra reports the implicit form of this as -Wsign-compare; hence the explicit cast.)
  // --8<-- [end:integer_traps]
  ok = check_true("integer_traps",
                  right == 4900000000ull && wrong == 4900000000ull % (1ull << 32) && surprising &&
                      std::numeric_limits<int>::max() == 2147483647,
                  4, "widen before multiplying; never mix signed and unsigned") && ok;
  return ok ? 0 : 1;
}
