// Solution to the split-KV merge exercise (docs/serving/exercises.md).
// Check it: python -m course.exercise split_kv_merge --solution
//
// course: gpu
// course: run --seed 51
// course: run --seed 52
#include "../split_kv_merge_check.cuh"

// --8<-- [start:solution]
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
    if (m_max != -INFINITY) {  // otherwise e^(-inf - (-inf)) is NaN: every chunk is empty
      for (int s = 0; s < splits; ++s) {
        const float w = expf(m[s] - m_max);  // 0 for an empty chunk, at most 1: no overflow
        sum += l[s] * w;
        acc += part_acc[(static_cast<size_t>(row) * splits + s) * dim + d] * w;
      }
    }
    out[static_cast<size_t>(row) * dim + d] = m_max == -INFINITY ? 0.0f : acc / sum;
  }
}
// --8<-- [end:solution]
