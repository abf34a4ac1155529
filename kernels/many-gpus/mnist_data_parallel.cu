// mnist_data_parallel.cu: the final project's training step (version 4 of kernels/mnist/mnist_model.cuh)
// data-parallel on the GPUs of one machine: every GPU holds a replica of the network with the same
// weights, runs the step on its shard of the global batch, and the gradients are averaged with NCCL
// (ncclAvg) in three buckets, each launched as soon as the backward has finished it, so that the
// later buckets' communication runs beside the backward of the earlier layers. Then every GPU applies
// the same SGD step.
//
// Taught in docs/many-gpus/data-parallel.md. Needs at least 2 GPUs; on fewer it reports itself waived.
// One process drives every GPU, one host thread per GPU, one NCCL communicator per GPU (ncclCommInitAll).
// Build: nvcc -std=c++17 -O3 -arch=native -o build/many-gpus/mnist_data_parallel
//          kernels/many-gpus/mnist_data_parallel.cu -lcublas -lnccl   (one command)
// Run:   ./build/many-gpus/mnist_data_parallel          (checks, then 3 epochs on every GPU against one GPU)
//        ./build/many-gpus/mnist_data_parallel --bench  (step time on 1, 2, 4, ... GPUs, weak and strong)
//        ./build/many-gpus/mnist_data_parallel --plant skip-bucket   (one bucket left un-reduced: caught)
//
//   --no-overlap   one all-reduce of every gradient after the whole backward (the baseline)
//   --eager        the step launched kernel by kernel instead of replayed as a CUDA graph
//
// course: gpu
// course: gpus 2
// course: libs cublas nccl
// course: run
// course: run --no-overlap --eager --seed 2
// course: run --plant skip-bucket --seed 3
// course: bench --bench
// course: measured efficiency_pct samples_per_s speedup step_ms
// course: sanitizer-skip all a run trains whole epochs, too long under the sanitizer; mnist_check.cu runs the same
//         step under all four tools, and nccl_allreduce.cu shows what the tools report inside libnccl
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_nccl.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/verify.cuh"
#include "../mnist/mnist_host.cuh"

using namespace mnist;

// Version 4's three-epoch recipe (mnist_train.cu --seeds): warm-up to this peak, then a cosine to 0.
constexpr float kSchedulePeak = 0.1f;
constexpr int kMaxPerGpuBatch = 1024;

// --8<-- [start:buckets]
// Gradient buckets: contiguous ranges of the gradient buffer (PyTorch's parameter order), in the order
// the backward finishes them. backward_tc (mnist_model.cuh) already records an event where each is
// final: fc1's bias and fc2 come out of the forward's loss kernel (fork_fc1, the backward's first
// event); conv2's weight and fc1's weight come from the side stream (join), with conv2's batch-norm
// parameters finished before them; conv1 and its batch norm are the last kernels of the chain.
struct Bucket {
  int first, end;  // parameters [first, end) of the gradient buffer
  const char* name;
};
constexpr Bucket kBuckets[] = {{offset_of(B3), kTotalParams, "fc1 bias, fc2"},
                               {offset_of(W2), offset_of(B3), "conv2, BN2, fc1 weight"},
                               {0, offset_of(W2), "conv1, BN1"}};
constexpr int kNumBuckets = 3;
static_assert(kBuckets[2].end == kBuckets[1].first && kBuckets[1].end == kBuckets[0].first, "buckets tile");
// --8<-- [end:buckets]

// One GPU's replica: the network, the data set, and a stream and events for the gradients' all-reduce.
struct Replica {
  int device;
  Net* net;
  DeviceData data;
  cudaStream_t comm_stream;
  cudaEvent_t backward_done, reduced;
  std::vector<int> shard;  // this GPU's part of the epoch's shuffle (host copy, read by an async upload)
};

// How the gradients are reduced: bucket by bucket beside the backward, once after it, or (--plant
// skip-bucket) bucket by bucket with the middle bucket left out, a fault the gradient check must catch.
enum class Reduce { kOverlap, kAfterBackward, kSkipBucket };

// --8<-- [start:step]
static void all_reduce(const Replica& r, ncclComm_t comm, int first, int end) {
  float* g = r.net->grads + first;  // in place: every GPU ends with the mean of the GPUs' gradients
  NCCL_CHECK(ncclAllReduce(g, g, end - first, ncclFloat, ncclAvg, comm, r.comm_stream));
}

// One data-parallel step on one GPU: v4's forward and backward on this GPU's shard (b images), the
// gradients averaged over the GPUs, then v4's SGD step (the same on every GPU, so the replicas stay equal).
static void data_parallel_step(const Replica& r, ncclComm_t comm, int gpus, const Source& src, int b, Reduce how,
                               tc::LrSchedule lr) {
  const Net& n = *r.net;
  forward(n, kTc, src, b, n.loss_hist, n.loss_cap);
  backward(n, kTc, b);
  CUDA_CHECK(cudaEventRecord(r.backward_done, n.st));
  if (gpus > 1) {
    if (how == Reduce::kAfterBackward) {
      CUDA_CHECK(cudaStreamWaitEvent(r.comm_stream, r.backward_done, 0));
      all_reduce(r, comm, 0, kTotalParams);
    } else {
      // Each bucket waits only for the event that says its gradients are final, so the first two
      // buckets travel while the backward's chain still runs conv2's input gradient and conv1.
      const cudaEvent_t final_at[kNumBuckets] = {n.fork_fc1, n.join, r.backward_done};
      for (int k = 0; k < kNumBuckets; ++k) {
        if (how == Reduce::kSkipBucket && k == 1) continue;  // the planted fault
        CUDA_CHECK(cudaStreamWaitEvent(r.comm_stream, final_at[k], 0));
        all_reduce(r, comm, kBuckets[k].first, kBuckets[k].end);
      }
    }
    CUDA_CHECK(cudaEventRecord(r.reduced, r.comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(n.st, r.reduced, 0));  // SGD reads the averaged gradients
  }
  tc::next_learning_rate<<<1, 1, 0, n.st>>>(lr, n.run_step, n.lr_now);
  tc::sgd_update_bf16<<<blocks(kTotalParams), 256, 0, n.st>>>(n.params, n.grads, n.params_bf16, n.lr_now,
                                                              kTotalParams, n.step);
  CUDA_CHECK_LAUNCH();
}
// --8<-- [end:step]

// --eager: every step launched kernel by kernel, no graph (to tell a problem of the graph from others).
static bool use_graphs = true;

// The same step as a CUDA graph (as version 4 runs it), NCCL's kernels included. Each thread captures
// its own GPU's step, so the capture is thread-local: another thread's capture is no concern of it.
// With --eager: no graph (nullptr), and launch_step launches the step itself.
static cudaGraphExec_t capture_data_parallel_step(const Replica& r, ncclComm_t comm, int gpus, const Source& src,
                                                  int b, Reduce how, tc::LrSchedule lr) {
  if (!use_graphs) return nullptr;
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(r.net->st, cudaStreamCaptureModeThreadLocal));
  data_parallel_step(r, comm, gpus, src, b, how, lr);
  CUDA_CHECK(cudaStreamEndCapture(r.net->st, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

static void launch_step(cudaGraphExec_t exec, const Replica& r, ncclComm_t comm, int gpus, const Source& src, int b,
                        Reduce how, tc::LrSchedule lr) {
  if (exec) CUDA_CHECK(cudaGraphLaunch(exec, r.net->st));
  else data_parallel_step(r, comm, gpus, src, b, how, lr);
}

// --8<-- [start:shard]
// GPU g's shard of each global batch of G * b images: images perm[s G b + g b + i], i < b, laid out as
// the single-GPU gather reads a batch (perm[s b + i]). Together the G shards are the batch that one
// GPU would train on at step s.
static void upload_shard(Replica& r, const std::vector<int>& perm, int g, int gpus, int b, int steps) {
  r.shard.resize(static_cast<size_t>(steps) * b);
  for (int s = 0; s < steps; ++s)
    for (int i = 0; i < b; ++i)
      r.shard[static_cast<size_t>(s) * b + i] = perm[(static_cast<size_t>(s) * gpus + g) * b + i];
  CUDA_CHECK(cudaMemcpyAsync(r.data.perm, r.shard.data(), r.shard.size() * sizeof(int), cudaMemcpyHostToDevice,
                             r.net->st));
  CUDA_CHECK(cudaMemsetAsync(r.net->step, 0, sizeof(int), r.net->st));
}
// --8<-- [end:shard]

// The epoch's shuffle, drawn as new_epoch (mnist_host.cuh) draws it, so that one seed gives the
// single-GPU run and the data-parallel run the same batches.
static std::vector<int> epoch_shuffle(std::mt19937_64& rng, int count) {
  std::vector<int> perm(count);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  return perm;
}

static Source source_of(const Replica& r, int steps) {
  return Source{r.data.train_images, r.data.train_labels, r.data.perm, r.net->step, steps};
}

// Runs f(replica, g) for the first `gpus` replicas, one host thread per GPU, each on its own device.
template <typename F>
static void on_every_gpu(std::vector<Replica>& rs, int gpus, F&& f) {
  std::vector<std::thread> threads;
  for (int g = 0; g < gpus; ++g)
    threads.emplace_back([&rs, &f, g] {
      CUDA_CHECK(cudaSetDevice(rs[g].device));
      f(rs[g], g);
    });
  for (std::thread& t : threads) t.join();
}

// The host threads meet here before each timed step, so that every GPU starts the step together.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation != generation_; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_, waiting_ = 0;
  long generation_ = 0;
};

// --- checks -----------------------------------------------------------------------------------------

// Elements where |got - want| > rtol * scale, NaN included; scale: the mean of the shards' |gradient|, so
// the bound follows the values summed (an element that cancels to about 0 keeps its shards' scale).
static size_t count_bad(const std::vector<float>& got, const std::vector<double>& want,
                        const std::vector<double>& scale, double rtol, size_t& first_bad) {
  size_t bad = 0;
  first_bad = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rtol * scale[i])) {
      if (!bad) first_bad = i;
      ++bad;
    }
  }
  return bad;
}

// --8<-- [start:check_gradients]
// Check (a): one data-parallel step's averaged gradient, on every GPU, against the float64 mean of the
// gradients that the single-GPU step computes on each shard alone (on GPU 0). Returns, per GPU, the
// number of elements out of tolerance (0: the GPU passes).
static std::vector<size_t> gradient_errors(std::vector<Replica>& rs, std::vector<ncclComm_t>& comms, int gpus,
                                           int batch, uint64_t seed, Reduce how) {
  const int b = batch / gpus;
  const int steps = rs[0].data.train_count / batch;
  const std::vector<float> init = init_params(seed);
  std::mt19937_64 rng(seed);
  const std::vector<int> perm = epoch_shuffle(rng, rs[0].data.train_count);
  const tc::LrSchedule lr{kLearningRate, 0, 0};
  // The reference: the single-GPU step on GPU 0, shard by shard (forward and backward, no SGD).
  std::vector<double> want(kTotalParams, 0.0), scale(kTotalParams, 0.0);
  CUDA_CHECK(cudaSetDevice(rs[0].device));
  upload_params(*rs[0].net, init);
  for (int g = 0; g < gpus; ++g) {
    upload_shard(rs[0], perm, g, gpus, b, steps);
    course::poison(rs[0].net->grads, kTotalParams * sizeof(float));
    const Source src = source_of(rs[0], steps);
    forward(*rs[0].net, kTc, src, b, rs[0].net->loss_hist, rs[0].net->loss_cap);
    backward(*rs[0].net, kTc, b);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> local = course::to_host(rs[0].net->grads, kTotalParams);
    for (int i = 0; i < kTotalParams; ++i) {
      want[i] += static_cast<double>(local[i]) / gpus;
      scale[i] += std::fabs(static_cast<double>(local[i])) / gpus;
    }
  }
  // The data-parallel step on every GPU at once, its gradients poisoned first.
  std::vector<size_t> bad(gpus);
  on_every_gpu(rs, gpus, [&](Replica& r, int g) {
    upload_params(*r.net, init);
    CUDA_CHECK(cudaMemset(r.net->run_step, 0, sizeof(int)));
    upload_shard(r, perm, g, gpus, b, steps);
    course::poison(r.net->grads, kTotalParams * sizeof(float));
    data_parallel_step(r, comms[g], gpus, source_of(r, steps), b, how, lr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = course::to_host(r.net->grads, kTotalParams);
    size_t first_bad = 0;
    // ncclAvg in fp32 over G values: a few roundings of the shards' magnitudes, far below 1e-5 of them.
    bad[g] = count_bad(got, want, scale, 1e-5, first_bad);
    if (bad[g] && how != Reduce::kSkipBucket)
      std::printf("GPU %d: %zu gradients wrong, first at %zu: got %.9g, want %.9g (scale %.3g)\n", g, bad[g],
                  first_bad, got[first_bad], want[first_bad], scale[first_bad]);
  });
  return bad;
}
// --8<-- [end:check_gradients]

static bool check_gradients(std::vector<Replica>& rs, std::vector<ncclComm_t>& comms, int gpus, int batch,
                            uint64_t seed, Reduce how) {
  const std::vector<size_t> bad = gradient_errors(rs, comms, gpus, batch, seed, how);
  bool ok = true;
  for (int g = 0; g < gpus; ++g) {
    char name[96], detail[96];
    std::snprintf(name, sizeof(name), "averaged_gradient_gpu%d_%s", g,
                  how == Reduce::kOverlap ? "bucketed_overlap" : "after_backward");
    std::snprintf(detail, sizeof(detail), "wrong=%zu gpus=%d global_batch=%d rtol=1e-5 of the shards' |g|", bad[g],
                  gpus, batch);
    ok &= course::check_true(name, bad[g] == 0, kTotalParams, detail);
  }
  return ok;
}

// --plant skip-bucket: the clean step passes check (a) and the step with one bucket left out fails it.
static bool check_plant(std::vector<Replica>& rs, std::vector<ncclComm_t>& comms, int gpus, int batch,
                        uint64_t seed) {
  const std::vector<size_t> clean = gradient_errors(rs, comms, gpus, batch, seed, Reduce::kOverlap);
  const std::vector<size_t> planted = gradient_errors(rs, comms, gpus, batch, seed, Reduce::kSkipBucket);
  bool clean_ok = true, caught = true;
  for (int g = 0; g < gpus; ++g) clean_ok &= clean[g] == 0, caught &= planted[g] > 0;
  char detail[128];
  std::snprintf(detail, sizeof(detail), "clean=%s planted_wrong_on_gpu0=%zu bucket=\"%s\" (%d gradients)",
                clean_ok ? "pass" : "FAIL", planted[0], kBuckets[1].name, kBuckets[1].end - kBuckets[1].first);
  return course::check_true("planted_skip_bucket_caught", clean_ok && caught, static_cast<size_t>(gpus), detail);
}

// --8<-- [start:accuracy]
// Trains `epochs` epochs at global batch `batch` with version 4's recipe, once on GPU 0 alone (mnist_host's
// train) and once data-parallel on `gpus` GPUs from the same weights and shuffles; prints the test accuracy
// of both after every epoch. Check (b) follows: after thousands of steps every replica's weights are
// bit for bit GPU 0's. The check on accuracy: the data-parallel run ends at 99.0% or more.
static bool check_training(std::vector<Replica>& rs, std::vector<ncclComm_t>& comms, int gpus, int batch,
                           int epochs, uint64_t seed, Reduce how) {
  CUDA_CHECK(cudaSetDevice(rs[0].device));
  std::printf("one GPU, batch %d:\n", batch);
  const TrainResult single =
      train(*rs[0].net, rs[0].data, Runner{kTc, true}, epochs, batch, kSchedulePeak, seed, true);
  const int b = batch / gpus, steps = rs[0].data.train_count / batch;
  const tc::LrSchedule lr{kSchedulePeak, kWarmupSteps, epochs * steps};
  const std::vector<float> init = init_params(seed);
  std::mt19937_64 rng(seed);
  std::vector<cudaGraphExec_t> exec(gpus, nullptr);
  std::vector<double> accuracy;
  std::vector<int> pred;
  std::printf("%d GPUs, batch %d per GPU:\n", gpus, b);
  for (int e = 0; e < epochs; ++e) {
    const std::vector<int> perm = epoch_shuffle(rng, rs[0].data.train_count);
    on_every_gpu(rs, gpus, [&](Replica& r, int g) {
      if (e == 0) {
        upload_params(*r.net, init);
        CUDA_CHECK(cudaMemset(r.net->run_step, 0, sizeof(int)));
      }
      upload_shard(r, perm, g, gpus, b, steps);
      const Source src = source_of(r, steps);
      if (!exec[g]) exec[g] = capture_data_parallel_step(r, comms[g], gpus, src, b, how, lr);
      for (int s = 0; s < steps; ++s) launch_step(exec[g], r, comms[g], gpus, src, b, how, lr);
      CUDA_CHECK(cudaStreamSynchronize(r.net->st));
    });
    CUDA_CHECK(cudaSetDevice(rs[0].device));
    accuracy.push_back(evaluate(*rs[0].net, rs[0].data, kTc, pred));
    std::printf("epoch %d: test accuracy %.2f%% on %d GPUs, %.2f%% on one GPU\n", e + 1, accuracy.back(), gpus,
                single.accuracy[e]);
  }
  on_every_gpu(rs, gpus, [&](Replica&, int g) {
    if (exec[g]) CUDA_CHECK(cudaGraphExecDestroy(exec[g]));
  });
  char detail[160];
  std::snprintf(detail, sizeof(detail), "gpus=%d accuracy=%.2f%% one_gpu=%.2f%% epochs=%d global_batch=%d", gpus,
                accuracy.back(), single.accuracy.back(), epochs, batch);
  bool ok = course::check_true("data_parallel_test_accuracy_at_least_99", accuracy.back() >= 99.0, 10000, detail);
  // Check (b): the replicas have not drifted apart.
  CUDA_CHECK(cudaSetDevice(rs[0].device));
  const std::vector<float> ref = course::to_host(rs[0].net->params, kTotalParams);
  size_t moved = 0;
  for (int i = 0; i < kTotalParams; ++i) moved += ref[i] != init[i];
  ok &= course::check_true("weights_trained_on_gpu0", moved > kTotalParams / 2, kTotalParams,
                           ("changed=" + std::to_string(moved)).c_str());
  for (int g = 1; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(rs[g].device));
    const std::vector<float> mine = course::to_host(rs[g].net->params, kTotalParams);
    char name[64];
    std::snprintf(name, sizeof(name), "replica_gpu%d_weights_bitwise_equal_gpu0", g);
    ok &= course::check_close(name, mine.data(), ref.data(), kTotalParams, 0.0, 0.0);
  }
  return ok;
}
// --8<-- [end:accuracy]

// --- benchmark --------------------------------------------------------------------------------------

// --8<-- [start:timing]
// Median time of one step on `gpus` GPUs, per-GPU batch b: each thread captures its GPU's step as a
// graph, warms up, then before each timed step the threads meet at a barrier, each times its own step
// with CUDA events, and the step lasts as long as its slowest GPU (NCCL makes the others wait for it).
static double median_step_ms(std::vector<Replica>& rs, std::vector<ncclComm_t>& comms, int gpus, int b, Reduce how,
                             int repeats) {
  const int steps = rs[0].data.train_count / (gpus * b);
  std::mt19937_64 rng(1);
  const std::vector<int> perm = epoch_shuffle(rng, rs[0].data.train_count);
  const std::vector<float> init = init_params(0);
  std::vector<std::vector<float>> times(gpus, std::vector<float>(repeats));
  Barrier barrier(gpus);
  on_every_gpu(rs, gpus, [&](Replica& r, int g) {
    upload_params(*r.net, init);
    upload_shard(r, perm, g, gpus, b, steps);
    const tc::LrSchedule lr{kLearningRate, 0, 0};
    const Source src = source_of(r, steps);
    const cudaGraphExec_t exec = capture_data_parallel_step(r, comms[g], gpus, src, b, how, lr);
    for (int i = 0; i < 10; ++i) launch_step(exec, r, comms[g], gpus, src, b, how, lr);
    CUDA_CHECK(cudaStreamSynchronize(r.net->st));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < repeats; ++i) {
      barrier.wait();
      CUDA_CHECK(cudaEventRecord(start, r.net->st));
      launch_step(exec, r, comms[g], gpus, src, b, how, lr);
      CUDA_CHECK(cudaEventRecord(stop, r.net->st));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK(cudaEventElapsedTime(&times[g][i], start, stop));
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
  });
  std::vector<float> slowest(repeats, 0.0f);
  for (int i = 0; i < repeats; ++i)
    for (int g = 0; g < gpus; ++g) slowest[i] = std::max(slowest[i], times[g][i]);
  std::nth_element(slowest.begin(), slowest.begin() + repeats / 2, slowest.end());
  return slowest[repeats / 2];
}
// --8<-- [end:timing]

// One BENCH row. speedup: samples per second over the one-GPU row of the same case family (weak: the same
// per-GPU batch; strong: the same global batch); efficiency: speedup / G.
static void print_row(const char* family, int gpus, int b, const char* impl, double ms, double one_gpu_rate,
                      bool peer) {
  const int global = gpus * b;
  const double rate = global / (ms * 1e-3), speedup = rate / one_gpu_rate;
  char case_name[96];
  if (family[0] == 'w')
    std::snprintf(case_name, sizeof(case_name), "weak scaling, batch %d per GPU, %d GPUs", b, gpus);
  else
    std::snprintf(case_name, sizeof(case_name), "strong scaling, batch %d in all, %d GPUs", global, gpus);
  std::printf("%-44s %-46s %8.4f ms  %9.0f samples/s  speedup %5.2f  efficiency %5.1f%%\n", case_name, impl, ms,
              rate, speedup, 100 * speedup / gpus);
  std::printf(
      "BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": %s, \"gpus\": %d, \"per_gpu_batch\": %d, \"global_batch\": %d, \"samples_per_s\": %.0f, "
      "\"speedup\": %.4f, \"efficiency_pct\": %.2f, \"step_ms\": %.6g}\n",
      case_name, impl, ms, gpus * step_bytes(b), gpus * step_flops(b), peer ? "true" : "false", gpus, b, global, rate,
      speedup, 100 * speedup / gpus, ms);
  std::fflush(stdout);
}

constexpr const char* kOneGpu = "v4 bf16, one GPU (no all-reduce)";
constexpr const char* kOverlapped = "v4 bf16, 3 buckets overlapped with backward";
constexpr const char* kAfter = "v4 bf16, one all-reduce after backward";

// Weak scaling at per-GPU batches 256 and 1024, strong scaling at global batch 1024: for each G, the
// bucketed, overlapped all-reduce and the one after the backward (the baseline: the peer row).
static void bench(std::vector<Replica>& rs, std::vector<std::vector<ncclComm_t>>& comms_of, int max_gpus,
                  int repeats) {
  struct Family {
    const char* name;
    int batch;  // weak: per GPU; strong: in all
  };
  for (const Family f : {Family{"weak", 256}, Family{"weak", 1024}, Family{"strong", 1024}}) {
    const double one_ms = median_step_ms(rs, comms_of[1], 1, f.batch, Reduce::kOverlap, repeats);
    const double one_rate = f.batch / (one_ms * 1e-3);
    print_row(f.name, 1, f.batch, kOneGpu, one_ms, one_rate, false);
    for (int gpus = 2; gpus <= max_gpus; gpus *= 2) {
      const int b = f.name[0] == 'w' ? f.batch : f.batch / gpus;
      print_row(f.name, gpus, b, kOverlapped, median_step_ms(rs, comms_of[gpus], gpus, b, Reduce::kOverlap, repeats),
                one_rate, false);
      print_row(f.name, gpus, b, kAfter, median_step_ms(rs, comms_of[gpus], gpus, b, Reduce::kAfterBackward, repeats),
                one_rate, true);
    }
  }
}

// NCCL connects a communicator's GPUs lazily, at its first collectives: connect every communicator
// here, with each size the step sends, so that no CUDA graph capture is where it happens.
static void connect(std::vector<Replica>& rs, std::vector<std::vector<ncclComm_t>>& comms_of) {
  for (size_t n = 2; n < comms_of.size(); ++n) {
    if (comms_of[n].empty()) continue;
    for (int count : {kBuckets[0].end - kBuckets[0].first, kBuckets[1].end - kBuckets[1].first,
                      kBuckets[2].end - kBuckets[2].first, kTotalParams}) {
      NCCL_CHECK(ncclGroupStart());  // one thread drives every rank here: the calls form one group
      for (size_t g = 0; g < n; ++g) {
        CUDA_CHECK(cudaSetDevice(rs[g].device));
        CUDA_CHECK(cudaMemsetAsync(rs[g].net->grads, 0, count * sizeof(float), rs[g].comm_stream));
        NCCL_CHECK(ncclAllReduce(rs[g].net->grads, rs[g].net->grads, count, ncclFloat, ncclAvg, comms_of[n][g],
                                 rs[g].comm_stream));
      }
      NCCL_CHECK(ncclGroupEnd());
    }
    for (size_t g = 0; g < n; ++g) {
      CUDA_CHECK(cudaSetDevice(rs[g].device));
      CUDA_CHECK(cudaStreamSynchronize(rs[g].comm_stream));
    }
  }
}

// --8<-- [start:main]
int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const std::string data_dir = mnist::data_dir(args.get_str("--data-dir", "").c_str());
  const bool run_bench = args.has("--bench");
  const bool no_overlap = args.has("--no-overlap");
  use_graphs = !args.has("--eager");
  const std::string plant_text = args.get_str("--plant", "none");
  const long long want_gpus = args.get_int("--gpus", 0, 0, 1024);  // 0: every GPU
  const int batch = static_cast<int>(args.get_int("--batch", kReferenceBatch, 1, kMaxPerGpuBatch));
  const int epochs = static_cast<int>(args.get_int("--epochs", 3, 1, 100));
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 1, 0, 1LL << 40));
  args.finish();
  course::Plant plant;
  if (!course::parse_plant(plant_text, {course::Plant::kSkipBucket}, plant)) return course::kExitFail;
  Split train_split, test_split;
  load_data(data_dir, train_split, test_split);
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast stays off on the course's machines
  int have = 0;
  CUDA_CHECK(cudaGetDeviceCount(&have));
  if (want_gpus > have) {
    std::fprintf(stderr, "error: --gpus %lld, but this machine has %d GPUs\n", want_gpus, have);
    return course::kExitFail;
  }
  const int gpus = want_gpus > 0 ? static_cast<int>(want_gpus) : have;
  if (gpus < 2) {
    std::printf("WAIVED needs 2 GPUs (this machine has %d)\n", have);
    return course::kExitWaived;
  }
  if (batch % gpus != 0) {
    std::fprintf(stderr, "error: the global batch (--batch %d) must split evenly over %d GPUs\n", batch, gpus);
    return course::kExitFail;
  }
  for (int g = 0; g < gpus; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    course::require_compute_capability(8, 0, "version 4 multiplies on bf16 tensor cores (mma.sync m16n8k16.bf16)");
  }
  CUDA_CHECK(cudaSetDevice(0));
  igemm::sm_count();  // cached in a plain static: filled here, once, before the threads read it (same GPUs)
  // One replica per GPU, and one set of communicators per GPU count that runs (1, 2, 4, ... and gpus).
  std::vector<Replica> rs(gpus);
  for (int g = 0; g < gpus; ++g) rs[g].device = g;
  on_every_gpu(rs, gpus, [&](Replica& r, int) {
    r.net = new Net(kMaxPerGpuBatch, 60000);
    r.data = upload(train_split, test_split);
    CUDA_CHECK(cudaStreamCreate(&r.comm_stream));
    CUDA_CHECK(cudaEventCreateWithFlags(&r.backward_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&r.reduced, cudaEventDisableTiming));
  });
  std::vector<std::vector<ncclComm_t>> comms_of(gpus + 1);
  std::vector<int> devices(gpus);
  std::iota(devices.begin(), devices.end(), 0);
  for (int n = 1; n <= gpus; ++n) {
    if (n != gpus && (n & (n - 1)) != 0) continue;  // the bench's counts are powers of two
    comms_of[n].resize(n);
    NCCL_CHECK(ncclCommInitAll(comms_of[n].data(), n, devices.data()));
  }
  connect(rs, comms_of);
  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  std::printf("NCCL %d, %d GPUs, global batch %d (%d per GPU)\n", version, gpus, batch, batch / gpus);
  bool ok = true;
  if (plant == course::Plant::kSkipBucket) {
    ok = check_plant(rs, comms_of[gpus], gpus, batch, seed);
  } else {
    const Reduce how = no_overlap ? Reduce::kAfterBackward : Reduce::kOverlap;
    ok &= check_gradients(rs, comms_of[gpus], gpus, batch, seed, how);
    if (!run_bench) ok &= check_training(rs, comms_of[gpus], gpus, batch, epochs, seed, how);
    if (ok && run_bench) bench(rs, comms_of, gpus, 200);
  }
  for (auto& comms : comms_of)
    for (ncclComm_t c : comms) NCCL_CHECK(ncclCommDestroy(c));
  return ok ? 0 : course::kExitFail;
}
// --8<-- [end:main]
