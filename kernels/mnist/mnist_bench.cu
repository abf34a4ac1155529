// mnist_bench.cu: times the MNIST CNN's training step (mnist_model.cuh) in every version at one batch
// size: a step alone, a whole epoch, and version 4's matrix products one by one; at the reference's
// batch size (64) also the accuracy runs (8 epochs of the fastest version of each precision).
//
// Taught in docs/mnist/results.md (how the step is timed). One batch size per run, so that each run
// pairs with mnist_torch.py's run of the same --batch on one GPU. Without --bench it is a dry run of
// the same procedure (few repeats, no BENCH lines) whose checks say that each timed epoch trained.
// Build: nvcc -std=c++17 -O3 -arch=native -o build/mnist/mnist_bench kernels/mnist/mnist_bench.cu -lcublas
// Run:   ./build/mnist/mnist_bench --bench --batch 64   (step and epoch times at batch 64, accuracy runs)
//        ./build/mnist/mnist_bench --batch 61           (the dry run)
//
// course: gpu
// course: libs cublas
// course: run --batch 61
// course: bench --bench --batch 64
// course: bench --bench --batch 256
// course: bench --bench --batch 1024
// course: measured epoch_s step_ms test_accuracy
// course: sanitizer-skip all a run trains whole epochs, too long under the sanitizer; mnist_check.cu runs the same
//         step (mnist_model.cuh) of every version under all four tools
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "mnist_host.cuh"

using namespace mnist;

// --8<-- [start:timing]
// Median time of one step over `repeats` steps, each timed alone with CUDA events from an idle GPU
// (as the PyTorch benchmark does), after warm-up.
static float median_step_ms(const Net& n, Runner r, const Source& src, int B, float lr, cudaGraphExec_t exec,
                            int repeats) {
  auto one = [&] {
    if (exec) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
    else train_step(n, r.v, src, B, lr);
  };
  for (int i = 0; i < 10; ++i) one();
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> t(repeats);
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(a, n.st));
    one();
    CUDA_CHECK(cudaEventRecord(b, n.st));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&t[i], a, b));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(t.begin(), t.begin() + repeats / 2, t.end());
  return t[repeats / 2];
}

// One full epoch (reshuffle included) from the first step to the last, after a warm-up epoch.
static float epoch_ms(const Net& n, DeviceData& d, Runner r, const Source& src, int B, float lr,
                      cudaGraphExec_t exec, std::mt19937_64& rng) {
  std::vector<int> perm_host;
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  float ms = 0;
  for (int rep = 0; rep < 2; ++rep) {
    CUDA_CHECK(cudaStreamSynchronize(n.st));
    CUDA_CHECK(cudaEventRecord(a, n.st));
    new_epoch(n, d, rng, perm_host);
    for (int s = 0; s < src.steps_per_epoch; ++s) {
      if (exec) CUDA_CHECK(cudaGraphLaunch(exec, n.st));
      else train_step(n, r.v, src, B, lr);
    }
    CUDA_CHECK(cudaEventRecord(b, n.st));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return ms;
}

// --8<-- [start:layer_bench]
// Version 4's matrix products one by one, on the buffers the last step left (L2 flushed, median):
// rows "<layer>, batch B" whose flops and bytes (the least each must move: inputs read once, the
// output written once; weights in bf16) give the share of the tensor cores' peak on the page.
static void bench_tc_layers(const Net& n, int B, const char* impl) {
  const double b = B;
  double* s = n.stats;
  auto row = [&](const char* layer, double flops, double bytes, auto&& launch) {
    const float ms = course::time_kernel_ms(launch, 3, 50);
    char name[64];
    std::snprintf(name, sizeof(name), "%s, batch %d", layer, B);
    std::printf("  %-28s %8.4f ms  %7.2f TFLOP/s\n", name, ms, flops / ms / 1e9);
    course::print_bench(name, impl, ms, bytes, flops);
  };
  row("conv1 forward (CUDA cores)", 2 * b * 784 * 32 * 9, b * 784 * 4 + b * 32 * 784 * 4 + 288 * 4,
      [&] { tc::conv1_forward(n.x, n.param(W1), n.c1, B, n.stat_part, s, n.sms, n.st); });
  row("conv2 forward", 2 * b * 196 * 64 * 288, b * 32 * 196 * 2 + 18432 * 2 + b * 64 * 196 * 4,
      [&] { tc::conv_forward<14, 32, 64>(n.param_bf16(W2), n.p1_bf16, n.c2, B, n.stat_part, s + 64, n.sms, n.st); });
  row("conv2 input gradient", 2 * b * 196 * 64 * 288, b * 64 * 196 * 4 + 18432 * 2 + b * 32 * 196 * 4,
      [&] { tc::conv_backward_data<14, 32, 64>(n.param_bf16(W2), n.dc2, n.dp1, B, n.sms, n.st); });
  row("conv2 weight gradient", 2 * b * 196 * 64 * 288, b * 64 * 196 * 4 + b * 32 * 196 * 2 + 18432 * 4,
      [&] { tc::conv_backward_weight<14, 32, 64>(n.dc2, n.p1_bf16, n.grad(W2), n.wgrad_part, B, n.sms, n.st); });
  row("fc1 forward", 2 * b * 3136 * 128, b * 3136 * 2 + 401408 * 2 + b * 128 * 4,
      [&] { tc::linear_forward(n.p2_bf16, n.param_bf16(W3), n.h_pre, n.fc1_part, B, 3136, 128, n.sms, n.st); });
  row("fc1 input gradient", 2 * b * 3136 * 128, b * 128 * 4 + 401408 * 2 + b * 3136 * 4,
      [&] { tc::linear_backward_data(n.dh_pre, n.param_bf16(W3), n.dp2, B, 3136, 128, n.st); });
  row("fc1 weight gradient", 2 * b * 3136 * 128, b * 128 * 4 + b * 3136 * 2 + 401408 * 4, [&] {
    tc::linear_backward_weight(n.dh_pre, n.p2_bf16, n.grad(W3), n.fc1_wgrad_part, B, 3136, 128, n.sms, n.st);
  });
}
// --8<-- [end:layer_bench]

// Each timed epoch must have trained: every step's SGD advanced the step counter (which new_epoch
// set to 0), so a graph or loop that skipped steps fails; and the epoch's losses are finite and below
// half an untrained network's (ln 10), so a step that ran on garbage fails too.
static bool epoch_trained(const Net& n, Runner r, int B, int steps) {
  const int done = course::to_host(n.step, 1)[0];
  const std::vector<float> loss = course::to_host(n.loss_hist, steps);
  double sum = 0.0;
  bool finite = true;
  for (float l : loss) finite &= std::isfinite(l), sum += l;
  const double mean = sum / steps;
  char name[96], detail[96];
  std::snprintf(name, sizeof(name), "timed_epoch_trained_%s_b%d", r.name(), B);
  for (char* c = name; *c; ++c) *c = std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  std::snprintf(detail, sizeof(detail), "steps_done=%d of %d mean_loss=%.4f", done, steps, mean);
  return course::check_true(name, done == steps && finite && mean < 0.5 * std::log(10.0), steps, detail);
}

// Every runner at batch B: the median step, then a whole epoch; version 4's products one by one.
// bench: the full repeats and BENCH lines; otherwise a dry run with few repeats.
static bool time_batch(Net& n, DeviceData& d, int B, int only_version, bool bench) {
  bool ok = true;
  for (Runner r : kRunners) {
    if (!runs_here(r, only_version)) continue;
    upload_params(n, init_params(0));
    std::mt19937_64 rng(1);
    std::vector<int> perm_host;
    new_epoch(n, d, rng, perm_host);
    const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
    cudaGraphExec_t exec = r.graph ? capture_step(n, r.v, src, B, kLearningRate) : nullptr;
    const int repeats = !bench ? 5 : r.v == kNaive ? 100 : 200;
    const float step = median_step_ms(n, r, src, B, kLearningRate, exec, repeats);
    const float epoch = epoch_ms(n, d, r, src, B, kLearningRate, exec, rng);
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
    std::printf("batch %4d  %-20s step %8.4f ms  epoch %7.3f s\n", B, r.name(), step, epoch / 1e3);
    ok &= epoch_trained(n, r, B, src.steps_per_epoch);
    if (!bench) continue;
    print_run_bench("step", B, r.name(), step, 1);
    print_run_bench("epoch", B, r.name(), epoch, src.steps_per_epoch);
    if (r.v == kTc) bench_tc_layers(n, B, r.name());
  }
  return ok;
}

// --8<-- [start:main]
int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const std::string data_dir = mnist::data_dir(args.get_str("--data-dir", "").c_str());
  const bool bench = args.has("--bench");
  const int batch = static_cast<int>(args.get_int("--batch", kReferenceBatch, 1, 1024));
  const int epochs = static_cast<int>(args.get_int("--epochs", 8, 1, 1000));  // of the accuracy runs
  const int only_version = static_cast<int>(args.get_int("--version", 0, 0, 4));  // 0: every version
  args.finish();
  Split train_split, test_split;
  load_data(data_dir, train_split, test_split);
  if (only_version == 4)
    course::require_compute_capability(8, 0, "version 4 multiplies on bf16 tensor cores (mma.sync m16n8k16.bf16)");
  Net n(1024, 60000);
  DeviceData d = upload(train_split, test_split);
  bool ok = time_batch(n, d, batch, only_version, bench);
  // The accuracy runs train with the reference's hyper-parameters (batch 64, learning rate 0.05): they
  // belong to the run that times batch 64, and run after its timings.
  if (bench && batch == kReferenceBatch)
    for (const Runner r : kAccuracyRunners)
      if (runs_here(r, only_version)) accuracy_run(n, d, r, epochs, batch, kLearningRate, ok);
  return ok ? 0 : course::kExitFail;
}
// --8<-- [end:main]
