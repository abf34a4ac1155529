// softmax_xent_check.cuh: the checker for the exercise of docs/mnist/exercises.md. It launches YOUR
// softmax_xent kernel (one thread per image, 128 threads per block) on random logits for 10 classes,
// with batches that are not multiples of 128, both outputs between guard bytes and filled with NaN
// first, and compares the loss of every image and the gradient of every logit with a float64
// reference. Some rows are shifted up or down by a few hundred to a few thousand (drawn from the
// seed): exp() of such logits overflows or underflows in float, so only a kernel that subtracts the
// row's maximum first gets them right; the rows shifted down are all negative.
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
  namespace ex = course::exercise;
  const float big = ex::draw_uniform(seed, 200.0f, 3000.0f);  // exp(big) overflows float, exp(-big) underflows
  std::vector<float> logits(static_cast<size_t>(batch) * kClasses), loss(batch), dlogits(logits.size());
  std::vector<int> labels(batch);
  course::fill_uniform(logits, seed, -5.0f, 5.0f);
  std::mt19937_64 rng(seed + 1);
  for (int r = 0; r < batch; ++r) {
    labels[r] = static_cast<int>(rng() % kClasses);
    const float shift = r % 7 == 3 ? big : r % 7 == 5 ? -big : 0.0f;  // exp() overflows / underflows
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
  float* d_logits = course::to_device(logits);
  int* d_labels = course::to_device(labels);
  const ex::Guarded<float> d_loss(batch), d_grad(logits.size());
  softmax_xent<<<course::ceil_div(batch, kXentThreads), kXentThreads>>>(d_logits, d_labels, d_loss.get(),
                                                                        d_grad.get(), batch);
  CUDA_CHECK_LAUNCH();
  loss = d_loss.read();
  dlogits = d_grad.read();
  CUDA_CHECK(cudaFree(d_logits));
  CUDA_CHECK(cudaFree(d_labels));
  char name[64];
  std::snprintf(name, sizeof(name), "xent_loss_batch%d", batch);
  bool ok = ex::compare(name, loss.data(), want_loss.data(), static_cast<size_t>(batch), 1e-5, 1e-5);
  ok = d_loss.guards_intact(name) && ok;
  std::snprintf(name, sizeof(name), "xent_dlogits_batch%d", batch);
  // Gradients are about 1 / batch: the absolute tolerance scales with them.
  ok = ex::compare(name, dlogits.data(), want_grad.data(), dlogits.size(), 1e-5, 1e-6 / batch, kClasses) && ok;
  return d_grad.guards_intact(name) && ok;
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
