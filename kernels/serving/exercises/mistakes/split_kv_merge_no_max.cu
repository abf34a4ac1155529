// A plausible wrong answer to the split-KV merge exercise (docs/serving/exercises.md), which its
// checker must reject: weights e^m taken without subtracting the row's maximum first. Right in exact
// arithmetic, but e^m overflows fp32 once scores pass about 88, and inf / inf is NaN.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise split_kv_merge --file
//           kernels/serving/exercises/mistakes/split_kv_merge_no_max.cu
//
// course: compile-only
#include "../split_kv_merge_check.cuh"

// --8<-- [start:mistake]
__global__ void merge_partials(const float* __restrict__ part_m, const float* __restrict__ part_l,
                               const float* __restrict__ part_acc, float* __restrict__ out, int rows, int splits,
                               int dim) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* m = part_m + static_cast<size_t>(row) * splits;
  const float* l = part_l + static_cast<size_t>(row) * splits;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float sum = 0.0f, acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float w = expf(m[s]);  // overflows for m above about 88
      sum += l[s] * w;
      acc += part_acc[(static_cast<size_t>(row) * splits + s) * dim + d] * w;
    }
    out[static_cast<size_t>(row) * dim + d] = sum > 0.0f ? acc / sum : 0.0f;
  }
}
// --8<-- [end:mistake]
