// A plausible wrong answer to the split-KV merge exercise (docs/serving/exercises.md), which its
// checker must reject: the merge is right wherever some chunk has keys, but a row whose chunks are
// all empty computes e^(-inf - (-inf)) = NaN instead of giving zeros. tests/test_exercises.py
// requires the checker to fail it.
// Check it: python -m course.exercise split_kv_merge --file
//           kernels/serving/exercises/mistakes/split_kv_merge_empty_nan.cu
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
  float m_max = -INFINITY;
  for (int s = 0; s < splits; ++s) m_max = fmaxf(m_max, m[s]);
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float sum = 0.0f, acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float w = expf(m[s] - m_max);  // NaN when m_max is -inf
      sum += l[s] * w;
      acc += part_acc[(static_cast<size_t>(row) * splits + s) * dim + d] * w;
    }
    out[static_cast<size_t>(row) * dim + d] = acc / sum;
  }
}
// --8<-- [end:mistake]
