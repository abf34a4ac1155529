// Exercise (docs/serving/exercises.md): the second kernel of split-KV decode attention, which merges
// the chunks' partial results (m, l, acc) of each row with the log-sum-exp rule.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise split_kv_merge
//
// course: compile-only
#include "split_kv_merge_check.cuh"

// --8<-- [start:stub]
__global__ void merge_partials(const float* __restrict__ part_m, const float* __restrict__ part_l,
                               const float* __restrict__ part_acc, float* __restrict__ out, int rows, int splits,
                               int dim) {
  const int row = blockIdx.x;  // one block per row
  if (row >= rows) return;
  // TODO (about 12 lines):
  //  0. row `row`'s partials: part_m and part_l at [row * splits + s], part_acc at [(row * splits + s) * dim + d];
  //  1. M = the largest m over the row's chunks (start from -INFINITY);
  //  2. each thread takes d = threadIdx.x, threadIdx.x + blockDim.x, ... below dim, and sums over the
  //     chunks l e^(m - M) and acc[d] e^(m - M) (expf);
  //  3. out[row * dim + d] = the second sum over the first; 0 if every chunk of the row is empty
  //     (M = -inf: what is e^(m - M) then?).
  (void)part_m;
  (void)part_l;
  (void)part_acc;
  (void)out;
  (void)splits;
  (void)dim;
}
// --8<-- [end:stub]
