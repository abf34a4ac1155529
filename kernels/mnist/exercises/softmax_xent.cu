// Exercise (docs/mnist/exercises.md): the last step of the MNIST network's forward pass and the first
// of its backward pass, fused: softmax, cross-entropy loss and the gradient of the logits.
// Check it (builds this file, runs the checker, says what is wrong):
//   python -m course.exercise softmax_xent
//
// course: compile-only
#include "softmax_xent_check.cuh"

// --8<-- [start:stub]
// One thread per image: row r of logits holds its kClasses (10) scores.
__global__ void softmax_xent(const float* __restrict__ logits, const int* __restrict__ labels,
                             float* __restrict__ loss, float* __restrict__ dlogits, int batch) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= batch) return;
  // TODO (about 8 lines):
  //  1. m = the row's maximum; sum = sum over c of expf(x[c] - m)  (why subtract m? try without);
  //  2. loss[r] = logf(sum) - (x[labels[r]] - m);
  //  3. dlogits[r][c] = (expf(x[c] - m) / sum - (c == labels[r] ? 1 : 0)) / batch for every class c.
  (void)logits, (void)labels, (void)loss, (void)dlogits;
}
// --8<-- [end:stub]
