// Solution to the exercise of docs/mnist/exercises.md.
// Check it: python -m course.exercise softmax_xent --solution
//
// course: gpu
// course: run --seed 111
#include "../softmax_xent_check.cuh"

// --8<-- [start:solution]
__global__ void softmax_xent(const float* __restrict__ logits, const int* __restrict__ labels,
                             float* __restrict__ loss, float* __restrict__ dlogits, int batch) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= batch) return;
  const float* x = logits + static_cast<long long>(r) * kClasses;
  float m = x[0];
  for (int c = 1; c < kClasses; ++c) m = fmaxf(m, x[c]);
  float sum = 0.0f;  // at least 1: the maximum contributes expf(0)
  for (int c = 0; c < kClasses; ++c) sum += expf(x[c] - m);
  const int y = labels[r];
  loss[r] = logf(sum) - (x[y] - m);
  for (int c = 0; c < kClasses; ++c)
    dlogits[static_cast<long long>(r) * kClasses + c] = (expf(x[c] - m) / sum - (c == y ? 1.0f : 0.0f)) / batch;
}
// --8<-- [end:solution]
