// inputs.cuh: reproducible inputs. fill_uniform draws from a seed (fixed by default, so that a
// failure can be replayed); quiet_rows makes some rows 2^20 times smaller, so that some outputs are small
// and a check must hold them to their own size. Taught in docs/conventions.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace course {

// --8<-- [start:inputs]
// Reproducible inputs: a fixed seed by default so a failure can be replayed; the harness passes
// --seed to draw fresh inputs.
inline void fill_uniform(std::vector<float>& v, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (auto& x : v) x = dist(rng);
}

// Every third row of a rows-by-row_len matrix, from the second, made 2^20 times smaller (an exact
// scaling; `scale` another power of two, for fp16 data whose range ends sooner): the outputs those rows
// feed are small, as a quiet token's or a dark pixel's are, and a check must hold them to their own size.
// A matrix of one row keeps its scale.
inline void quiet_rows(std::vector<float>& v, size_t rows, size_t row_len, float scale = 0x1p-20f) {
  for (size_t r = 1; r < rows; r += 3)
    for (size_t j = 0; j < row_len; ++j) v[r * row_len + j] *= scale;
}
// --8<-- [end:inputs]

}  // namespace course
