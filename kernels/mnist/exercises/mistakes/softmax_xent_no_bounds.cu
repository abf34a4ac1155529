// A plausible wrong answer to the softmax_xent exercise (docs/mnist/exercises.md), which its checker
// must reject: no check that the thread's row exists: the threads of the last block past the batch
// write losses and gradients past the ends of the outputs.
// tests/test_exercises.py requires the checker to fail it.
// Check it: python -m course.exercise softmax_xent --file kernels/mnist/exercises/mistakes/softmax_xent_no_bounds.cu
//
// course: compile-only
#include "../softmax_xent_check.cuh"

// --8<-- [start:mistake]
__global__ void softmax_xent(const float* __restrict__ logits, const int* __restrict__ labels,
                             float* __restrict__ loss, float* __restrict__ dlogits, int batch) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;  // no `if (r >= batch) return;`
  const float* x = logits + static_cast<long long>(r) * kClasses;
  const int y = r < batch ? labels[r] : 0;
  float m = x[0];
  for (int c = 1; c < kClasses; ++c) m = fmaxf(m, x[c]);
  float sum = 0.0f;
  for (int c = 0; c < kClasses; ++c) sum += expf(x[c] - m);
  loss[r] = logf(sum) - (x[y] - m);
  for (int c = 0; c < kClasses; ++c)
    dlogits[static_cast<long long>(r) * kClasses + c] = (expf(x[c] - m) / sum - (c == y ? 1.0f : 0.0f)) / batch;
}
// --8<-- [end:mistake]
