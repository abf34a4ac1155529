// softmax_xent_check.cuh: the checker for the exercise of docs/mnist/exercises.md. It launches YOUR
// softmax_xent kernel (one thread per image, 128 threads per block) on random logits for 10 classes,
// with batches that are not multiples of 128, the outputs filled with NaN first, and compares the
// loss of every image and the gradient of every logit with a float64 reference. Some rows are
// shifted by +1000 or -1000: exp() of such logits overflows or underflows in float, so only a kernel
// that subtracts the row's maximum first gets them right.
//
// course: header
#pragma once
#include "../../common/exercise.cuh"

constexpr int kClasses = 10, kXentThreads = 128;

// You write this kernel: for every row r < batch, with p = softmax(logits[r]) and y = labels[r],
//   loss[r] = -log p[y],   dlogits[r][c] = (p[c] - (c == y)) / batch   (the gradient of the mean loss).
__global__ void softmax_xent(const float* __restrict__ logits, const int* __restrict__ labels,
                             float* __restrict__ loss, float* __restrict__ dlogits, int batch);

static bool check_xent(int batch, uint64_t seed) {
  std::vector<float> logits(static_cast<size_t>(batch) * kClasses), loss(batch), dlogits(logits.size());
  std::vector<int> labels(batch);
  course::fill_uniform(logits, seed, -5.0f, 5.0f);
  std::mt19937_64 rng(seed + 1);
  for (int r = 0; r < batch; ++r) {
    labels[r] = static_cast<int>(rng() % kClasses);
    const float shift = r % 7 == 3 ? 1000.0f : r % 7 == 5 ? -1000.0f : 0.0f;  // exp() overflows / underflows
    for (int c = 0; c < kClasses; ++c) logits[static_cast<size_t>(r) * kClasses + c] += shift;
  }
  std::vector<double> want_loss(batch), want_grad(logits.size());
  for (int r = 0; r < batch; ++r) {
    const float* row = &logits[static_cast<size_t>(r) * kClasses];
    double m = row[0], sum = 0.0;
    for (int c = 1; c < kClasses; ++c) m = std::max(m, static_cast<double>(row[c]));
    for (int c = 0; c < kClasses; ++c) sum += std::exp(row[c] - m);
    want_loss[r] = std::log(sum) - (row[labels[r]] - m);
    for (int c = 0; c < kClasses; ++c)
      want_grad[static_cast<size_t>(r) * kClasses + c] = (std::exp(row[c] - m) / sum - (c == labels[r])) / batch;
  }
  float *d_logits = nullptr, *d_loss = nullptr, *d_grad = nullptr;
  int* d_labels = nullptr;
  CUDA_CHECK(cudaMalloc(&d_logits, logits.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_grad, logits.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_loss, batch * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_labels, batch * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(d_logits, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_labels, labels.data(), batch * sizeof(int), cudaMemcpyHostToDevice));
  course::poison(d_grad, logits.size() * sizeof(float));
  course::poison(d_loss, batch * sizeof(float));
  softmax_xent<<<course::ceil_div(batch, kXentThreads), kXentThreads>>>(d_logits, d_labels, d_loss, d_grad, batch);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(loss.data(), d_loss, batch * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(dlogits.data(), d_grad, logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_logits));
  CUDA_CHECK(cudaFree(d_grad));
  CUDA_CHECK(cudaFree(d_loss));
  CUDA_CHECK(cudaFree(d_labels));
  char name[64];
  std::snprintf(name, sizeof(name), "xent_loss_batch%d", batch);
  bool ok = course::exercise::compare(name, loss.data(), want_loss.data(), static_cast<size_t>(batch), 1e-5, 1e-5);
  std::snprintf(name, sizeof(name), "xent_dlogits_batch%d", batch);
  // Gradients are about 1 / batch: the absolute tolerance scales with them.
  ok = course::exercise::compare(name, dlogits.data(), want_grad.data(), dlogits.size(), 1e-5, 1e-6 / batch,
                                 kClasses) && ok;
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const course::exercise::Options options{args};
  args.finish();
  bool ok = check_xent(1000, options.seed);
  ok = check_xent(1, options.seed + 2) && ok;
  ok = check_xent(4099, options.seed + 4) && ok;
  return ok ? 0 : course::kExitFail;
}
