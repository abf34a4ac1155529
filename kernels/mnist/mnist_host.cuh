// mnist_host.cuh: the host side that the MNIST programs share (mnist_train.cu, mnist_bench.cu,
// mnist_check.cu): the data set on the device, test-set evaluation, which implementation runs a step
// (Runner), the training loop, and the accuracy runs that train with the reference's settings.
//
// Taught in docs/mnist/index.md (the training loop). The network itself is mnist_model.cuh.
//
// course: header
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/verify.cuh"
#include "mnist_idx.h"
#include "mnist_model.cuh"

namespace mnist {

constexpr float kLearningRate = 0.05f;  // the reference's learning rate (kernels/mnist/mnist_torch.py)
constexpr int kReferenceBatch = 64;     // and its batch size

struct DeviceData {
  uint8_t *train_images, *train_labels, *test_images, *test_labels;
  int *perm, *test_perm, *eval_step;
  int train_count, test_count;
  std::vector<uint8_t> test_labels_host;
};

inline DeviceData upload(const Split& train, const Split& test) {
  DeviceData d;
  d.train_count = train.count;
  d.test_count = test.count;
  d.test_labels_host = test.labels;
  d.train_images = course::device_alloc<uint8_t>(train.images.size());
  d.train_labels = course::device_alloc<uint8_t>(train.labels.size());
  d.test_images = course::device_alloc<uint8_t>(test.images.size());
  d.test_labels = course::device_alloc<uint8_t>(test.labels.size());
  CUDA_CHECK(cudaMemcpy(d.train_images, train.images.data(), train.images.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.train_labels, train.labels.data(), train.labels.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.test_images, test.images.data(), test.images.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.test_labels, test.labels.data(), test.labels.size(), cudaMemcpyHostToDevice));
  d.perm = course::device_alloc<int>(train.count);
  d.test_perm = course::device_alloc<int>(test.count);
  std::vector<int> id(test.count);
  std::iota(id.begin(), id.end(), 0);
  CUDA_CHECK(cudaMemcpy(d.test_perm, id.data(), id.size() * sizeof(int), cudaMemcpyHostToDevice));
  d.eval_step = course::device_alloc<int>(1);
  return d;
}

// A new shuffle of the training set for the next epoch, and the step counter back to 0.
inline void new_epoch(const Net& n, DeviceData& d, std::mt19937_64& rng, std::vector<int>& perm_host) {
  perm_host.resize(d.train_count);
  std::iota(perm_host.begin(), perm_host.end(), 0);
  std::shuffle(perm_host.begin(), perm_host.end(), rng);
  CUDA_CHECK(cudaMemcpyAsync(d.perm, perm_host.data(), perm_host.size() * sizeof(int), cudaMemcpyHostToDevice, n.st));
  CUDA_CHECK(cudaMemsetAsync(n.step, 0, sizeof(int), n.st));
}

constexpr int kEvalChunk = 1000;  // as the PyTorch reference: batch-norm statistics of 1000 test images

// Test accuracy (%), evaluated with the fused forward pass; fills pred with every prediction.
inline double evaluate(const Net& n, DeviceData& d, Version v, std::vector<int>& pred) {
  static float* scratch_loss = course::device_alloc<float>(16);
  const Source src{d.test_images, d.test_labels, d.test_perm, d.eval_step, d.test_count / kEvalChunk};
  std::vector<float> logits(kEvalChunk * 10);
  pred.assign(d.test_count, -1);
  int correct = 0;
  for (int chunk = 0; chunk < d.test_count / kEvalChunk; ++chunk) {
    CUDA_CHECK(cudaMemcpyAsync(d.eval_step, &chunk, sizeof(int), cudaMemcpyHostToDevice, n.st));
    forward(n, v, src, kEvalChunk, scratch_loss, 16);
    CUDA_CHECK(cudaMemcpyAsync(logits.data(), n.logits, logits.size() * sizeof(float), cudaMemcpyDeviceToHost, n.st));
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    for (int i = 0; i < kEvalChunk; ++i) {
      const float* z = &logits[i * 10];
      const int k = static_cast<int>(std::max_element(z, z + 10) - z);
      pred[chunk * kEvalChunk + i] = k;
      correct += k == d.test_labels_host[chunk * kEvalChunk + i];
    }
  }
  return 100.0 * correct / d.test_count;
}

inline void upload_params(const Net& n, const std::vector<float>& p) {
  CUDA_CHECK(cudaMemcpy(n.params, p.data(), p.size() * sizeof(float), cudaMemcpyHostToDevice));
  refresh_bf16(n);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
}

// TF32 and bf16 tensor cores exist from compute capability 8.0 on (conv_igemm.cuh and layers_tc.cuh
// compile stubs for older GPUs). On an older GPU the TF32 variant and version 4 are skipped, with one
// message, and versions 1 to 3 run as usual.
inline bool tf32_supported() {
  static int cc = 0;
  if (!cc) {
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    cc = major * 10 + minor;
    if (cc < 80)
      std::printf("NOTE TF32 and version 4 (bf16) skipped: their tensor-core instructions need compute "
                  "capability 8.0, this GPU is %d.%d; versions 1 to 3 (FP32) run as usual\n", major, minor);
  }
  return cc >= 80;
}

// Which implementation runs the step: a version, launched kernel by kernel, or the fused version's graph.
struct Runner {
  Version v;
  bool graph;
  const char* name() const {
    if (v == kTc) return "CUDA v4 tensor cores (bf16, fp32 accumulate)";
    if (v == kTf32) return "CUDA TF32 + graph";
    if (graph) return "CUDA fused + graph";
    return v == kNaive ? "CUDA naive" : v == kLibraries ? "CUDA libraries" : "CUDA fused";
  }
};

inline const Runner kRunners[] = {{kNaive, false}, {kLibraries, false}, {kFused, false},
                                  {kFused, true},  {kTf32, true},       {kTc, true}};
constexpr int kNumRunners = 6;  // the last two need compute capability 8.0

// --version N (1 to 4; 0: all): the version number of a runner (TF32 is a variant of version 3).
inline int version_number(Version v) { return v == kTc ? 4 : v == kTf32 ? 3 : static_cast<int>(v) + 1; }

// The training and test sets, read and checked on the host; a missing or damaged file is a clear
// message and exit code 1, before any GPU work.
inline void load_data(const std::string& dir, Split& train_split, Split& test_split) {
  try {
    train_split = load_split(dir, "train", 60000);
    test_split = load_split(dir, "t10k", 10000);
  } catch (const IdxError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::exit(course::kExitFail);
  }
}

// --8<-- [start:train]
struct TrainResult {
  std::vector<double> accuracy;       // after each epoch
  std::vector<double> epoch_seconds;  // each epoch's training time (its evaluation not included)
  std::vector<float> losses;  // every step's loss
  std::vector<int> pred;
  double seconds;
};

// Each epoch's line shows the mean loss of the epoch's last kMeanSteps steps, the figure the PyTorch
// reference prints (one batch's loss is noisy), then the last step's loss.
constexpr int kMeanSteps = 50;

// schedule (version 4 only): the learning rate warms up over kWarmupSteps and decays to 0 at the
// run's last step (tc::LrSchedule, peak lr); otherwise it is lr throughout.
constexpr int kWarmupSteps = 100;

inline TrainResult train(Net& n, DeviceData& d, Runner r, int epochs, int B, float lr, uint64_t seed,
                         bool schedule = false) {
  upload_params(n, init_params(seed));
  std::mt19937_64 rng(seed);
  std::vector<int> perm_host;
  const int steps = d.train_count / B;  // the last partial batch is dropped, as in the reference
  if (schedule && r.v != kTc) {
    std::fprintf(stderr, "error: the learning-rate schedule is version 4's (tc::LrSchedule)\n");
    std::exit(course::kExitFail);
  }
  n.lr_warmup_steps = schedule ? kWarmupSteps : 0;  // read when the step is captured, below
  n.lr_total_steps = schedule ? epochs * steps : 0;
  CUDA_CHECK(cudaMemset(n.run_step, 0, sizeof(int)));
  const Source src{d.train_images, d.train_labels, d.perm, n.step, steps};
  cudaGraphExec_t exec = nullptr;
  TrainResult res;
  double train_ms = 0;
  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  for (int e = 0; e < epochs; ++e) {
    new_epoch(n, d, rng, perm_host);
    if (r.graph && !exec) exec = capture_step(n, r.v, src, B, lr);
    CUDA_CHECK(cudaEventRecord(t0, n.st));
    for (int s = 0; s < steps; ++s) {
      if (exec) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
      else train_step(n, r.v, src, B, lr);
    }
    CUDA_CHECK(cudaEventRecord(t1, n.st));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    train_ms += ms;
    res.epoch_seconds.push_back(ms / 1e3);
    const std::vector<float> l = course::to_host(n.loss_hist, steps);  // loss_cap >= steps
    res.losses.insert(res.losses.end(), l.begin(), l.end());
    res.accuracy.push_back(evaluate(n, d, r.v, res.pred));
    const int window = std::min(kMeanSteps, steps);
    const double mean = std::accumulate(l.end() - window, l.end(), 0.0) / window;
    std::printf("epoch %d: loss %.4f  test accuracy %.2f%%  (%.3f s)  last step's loss %.4f\n", e + 1, mean,
                res.accuracy.back(), ms / 1e3, l.back());
  }
  CUDA_CHECK(cudaEventDestroy(t0));
  CUDA_CHECK(cudaEventDestroy(t1));
  if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
  n.lr_warmup_steps = n.lr_total_steps = 0;
  res.seconds = train_ms / 1e3;
  return res;
}
// --8<-- [end:train]

inline double step_flops(int b) {
  const double conv1 = 2.0 * b * 784 * 32 * 9, conv2 = 2.0 * b * 196 * 64 * 288;
  const double fc1 = 2.0 * b * 3136 * 128, fc2 = 2.0 * b * 128 * 10;
  return 2 * conv1 + 3 * conv2 + 3 * fc1 + 3 * fc2;
}
inline double step_bytes(int b) { return b * 784.0 + b * 4.0 + 2.0 * 4 * kTotalParams; }

// A BENCH row of `steps` training steps ("step", "epoch" or "train N epochs", batch B).
inline void print_run_bench(const char* kind, int B, const char* impl, double ms, int steps, double acc = -1) {
  // Plot fields: "step_ms" only on step rows and "epoch_s" only on epoch rows, so that a plot of one
  // of them draws only that kind of row.
  char extra[96] = "";
  if (acc >= 0) std::snprintf(extra, sizeof(extra), ", \"test_accuracy\": %.2f", acc);
  if (std::strcmp(kind, "step") == 0) std::snprintf(extra, sizeof(extra), ", \"step_ms\": %.6g", ms);
  if (std::strcmp(kind, "epoch") == 0) std::snprintf(extra, sizeof(extra), ", \"epoch_s\": %.6g", ms / 1e3);
  std::printf(
      "BENCH {\"case\": \"%s, batch %d\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": false, \"batch\": %d, \"kind\": \"%s\", \"steps\": %d%s}\n",
      kind, B, impl, ms, steps * step_bytes(B), steps * step_flops(B), B, kind, steps, extra);
  std::fflush(stdout);
}

// The accuracy runs: the fastest version of each precision (FP32, TF32, bf16), skipped where the GPU
// lacks the tensor cores (TF32, bf16) or --version names another.
inline const Runner kAccuracyRunners[] = {{kFused, true}, {kTf32, true}, {kTc, true}};

inline bool runs_here(Runner r, int only_version) {
  if ((r.v == kTf32 || r.v == kTc) && !tf32_supported()) return false;
  return !only_version || version_number(r.v) == only_version;
}

// One accuracy run: trains, checks that the test accuracy reaches 99%, prints the run's BENCH row.
// "Reaches 99%": the first epoch whose test accuracy is at least 99.0%. With a constant learning rate
// the accuracy goes up and down from epoch to epoch, so the best and the last are printed too.
inline TrainResult accuracy_run(Net& n, DeviceData& d, Runner r, int epochs, int batch, float lr, bool& ok) {
  TrainResult t = train(n, d, r, epochs, batch, lr, 0);
  int reached = 0;
  for (size_t e = 0; e < t.accuracy.size() && !reached; ++e)
    if (t.accuracy[e] >= 99.0) reached = static_cast<int>(e) + 1;
  char detail[160], check_name[64], kind[64];
  std::snprintf(detail, sizeof(detail), "reached_at_epoch=%d best=%.2f%% last=%.2f%% epochs=%d batch=%d lr=%g",
                reached, *std::max_element(t.accuracy.begin(), t.accuracy.end()), t.accuracy.back(), epochs, batch,
                lr);
  std::snprintf(check_name, sizeof(check_name), "%s_test_accuracy_reaches_99", kVersionName[r.v]);
  ok &= course::check_true(check_name, reached > 0, 10000, detail);
  std::snprintf(kind, sizeof(kind), "train %d epochs", epochs);
  print_run_bench(kind, batch, r.name(), t.seconds * 1e3, epochs * (d.train_count / batch), t.accuracy.back());
  return t;
}

}  // namespace mnist
