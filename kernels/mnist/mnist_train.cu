// mnist_train.cu: trains the course's MNIST CNN (mnist_model.cuh) on the GPU, saves and loads its
// weights, and classifies with them.
//
// Taught in docs/mnist/: index.md (main), tensor-cores.md (the weights file, prediction, the 50-step
// loss curve that loss_curve.py compares with PyTorch). The benchmark is mnist_bench.cu, the layer
// checks mnist_check.cu. The data folder is --data-dir, else $MNIST_DIR, else data/mnist.
// Build: nvcc -std=c++17 -O3 -arch=native -o build/mnist/mnist_train kernels/mnist/mnist_train.cu -lcublas
// Run:   ./build/mnist/mnist_train                    (one epoch of versions 3 and 4 learns)
//        ./build/mnist/mnist_train --train --epochs 8 (the accuracy runs: test accuracy >= 99%)
//        ./build/mnist/mnist_train --train --version 4 --epochs 3 --save w.bin   (trains v4, saves)
//        ./build/mnist/mnist_train --predict w.bin    (classifies the test set with saved weights)
//        ./build/mnist/mnist_train --predict w.bin --image digit.pgm   (one 28x28 8-bit PGM image)
//        ./build/mnist/mnist_train --train --version 3 --curves FILE   (every tenth step's loss and the
//                                                    misclassified test digits, as JSON)
//        ./build/mnist/mnist_train --loss-curve DIR --version 4   (initial weights and 50 steps' losses
//                                                    for loss_curve.py)
//        ./build/mnist/mnist_train --seeds 5 --epochs 3 [--bench]   (version 4 from seeds 1 to 5 with
//                                                    the learning-rate schedule: each ends at >= 99%)
//
// course: gpu
// course: libs cublas
// course: run
// course: run --train --version 4 --epochs 5 --save build/mnist/v4-weights.bin --predict build/mnist/v4-weights.bin
// course: bench --bench --seeds 5 --epochs 3
// course: measured test_accuracy
// course: sanitizer-skip all a run trains whole epochs, too long under the sanitizer; mnist_check.cu runs the same
//         step (mnist_model.cuh) of every version under all four tools
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/verify.cuh"
#include "mnist_host.cuh"

using namespace mnist;

static void write_curves(const char* path, const TrainResult& t, const std::vector<uint8_t>& labels, const char* impl,
                         int B, float lr, int epochs) {
  std::ofstream f(path);
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path);
    std::exit(course::kExitFail);
  }
  const int every = 10;
  f << "{\"impl\": \"" << impl << "\", \"batch\": " << B << ", \"lr\": " << lr << ", \"epochs\": " << epochs
    << ", \"train_seconds\": " << t.seconds << ", \"loss_every\": " << every << ", \"loss\": [";
  for (size_t i = 0; i < t.losses.size(); i += every) f << (i ? ", " : "") << t.losses[i];
  f << "], \"test_accuracy\": [";
  for (size_t i = 0; i < t.accuracy.size(); ++i) f << (i ? ", " : "") << t.accuracy[i];
  f << "], \"misclassified\": [";
  bool first = true;
  for (size_t i = 0; i < t.pred.size(); ++i) {
    if (t.pred[i] == labels[i]) continue;
    f << (first ? "" : ", ") << "[" << i << ", " << t.pred[i] << ", " << int(labels[i]) << "]";
    first = false;
  }
  f << "]}\n";
}

// A file named on the command line cannot be used: say which and why, and exit 1.
[[noreturn]] static void bad_file(const std::string& path, const std::string& why) {
  std::fprintf(stderr, "error: %s: %s\n", path.c_str(), why.c_str());
  std::exit(course::kExitFail);
}

// --8<-- [start:weights_file]
// The weights file of --save and --predict (little-endian, as every GPU host the course targets):
//   8 bytes   "MNISTCNN"   magic
//   uint32    1            format version
//   uint32    10           number of tensors, in PyTorch's model.parameters() order
//   per tensor: uint32 rank, then rank uint32 sizes (conv1.weight: 4 32 1 3 3; ...; fc2.bias: 1 10)
//   float32   421,738 values: the tensors one after the other, each row-major (PyTorch's layout)
constexpr char kWeightsMagic[8] = {'M', 'N', 'I', 'S', 'T', 'C', 'N', 'N'};
constexpr uint32_t kWeightsVersion = 1;
static const std::vector<uint32_t> kShapes[kNumParams] = {{32, 1, 3, 3}, {32}, {32}, {64, 32, 3, 3}, {64},
                                                          {64},          {128, 3136}, {128}, {10, 128}, {10}};

static void save_weights(const std::string& path, const std::vector<float>& p) {
  std::ofstream f(path, std::ios::binary);
  auto put = [&](uint32_t v) { f.write(reinterpret_cast<const char*>(&v), sizeof(v)); };
  f.write(kWeightsMagic, sizeof(kWeightsMagic));
  put(kWeightsVersion);
  put(kNumParams);
  for (const auto& shape : kShapes) {
    put(static_cast<uint32_t>(shape.size()));
    for (uint32_t d : shape) put(d);
  }
  f.write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(course::kExitFail);
  }
}

// Reads a weights file, or exits 1 saying what is wrong with it.
static std::vector<float> load_weights(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  auto fail = [&](const std::string& why) { bad_file(path, why); };
  if (!f) fail("cannot open it");
  char magic[8] = {};
  f.read(magic, sizeof(magic));
  if (!f || std::memcmp(magic, kWeightsMagic, sizeof(magic)) != 0)
    fail("not a weights file of mnist_train (no \"MNISTCNN\" magic at its start)");
  auto get = [&]() {
    uint32_t v = 0;
    f.read(reinterpret_cast<char*>(&v), sizeof(v));
    if (!f) fail("truncated header");
    return v;
  };
  if (const uint32_t v = get(); v != kWeightsVersion) fail("format version " + std::to_string(v) + ", expected 1");
  if (const uint32_t c = get(); c != kNumParams) fail(std::to_string(c) + " tensors, expected 10");
  for (int t = 0; t < kNumParams; ++t) {
    const uint32_t rank = get();
    std::vector<uint32_t> shape(rank <= 4 ? rank : 0);
    for (auto& d : shape) d = get();
    if (shape != kShapes[t]) fail("tensor " + std::to_string(t) + " has the wrong shape for this network");
  }
  std::vector<float> p(kTotalParams);
  f.read(reinterpret_cast<char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
  if (!f) fail("truncated: fewer than 421738 weights");
  if (f.peek() != std::char_traits<char>::eof()) fail("longer than a weights file: extra bytes after the weights");
  for (float v : p)
    if (!std::isfinite(v)) fail("contains a NaN or infinite weight");
  return p;
}
// --8<-- [end:weights_file]

// --8<-- [start:pgm]
// A 28 x 28 8-bit greyscale image in binary PGM ("P5": the header "P5 28 28 255", whitespace and
// #-comments allowed between its fields, one whitespace byte, then 784 pixel bytes, row by row).
// Like MNIST's digits it should be a light digit on a dark background (0 = black).
static std::vector<uint8_t> read_pgm(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  auto fail = [&](const std::string& why) { bad_file(path, why); };
  if (!f) fail("cannot open it");
  auto field = [&]() {  // the next header field, skipping whitespace and comments
    std::string tok;
    int ch;
    while ((ch = f.get()) != EOF) {
      if (ch == '#') {
        while ((ch = f.get()) != EOF && ch != '\n') {
        }
        continue;
      }
      if (std::isspace(ch)) {
        if (!tok.empty()) break;
        continue;
      }
      tok += static_cast<char>(ch);
      if (tok.size() > 8) fail("malformed PGM header");
    }
    return tok;
  };
  if (field() != "P5") fail("not a binary PGM image (it must start with \"P5\")");
  int dims[3];
  for (int& d : dims) {
    const std::string tok = field();
    if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos) fail("malformed PGM header");
    d = std::stoi(tok);
  }
  if (dims[0] != 28 || dims[1] != 28) {
    fail("image is " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + ", expected 28x28");
  }
  if (dims[2] < 1 || dims[2] > 255) fail("maximum value " + std::to_string(dims[2]) + ", expected 1..255 (8-bit)");
  std::vector<uint8_t> px(784);
  f.read(reinterpret_cast<char*>(px.data()), 784);
  if (!f) fail("truncated: fewer than 784 pixel bytes");
  for (auto& v : px) {
    if (v > dims[2]) fail("a pixel exceeds the header's maximum value");
    v = static_cast<uint8_t>((v * 255 + dims[2] / 2) / dims[2]);  // to 0..255
  }
  return px;
}
// --8<-- [end:pgm]

// --8<-- [start:predict]
// --predict: the test set's accuracy with saved weights; with --image, that one image's class. Batch
// norm normalises with the statistics of the batch at hand (the model keeps no running statistics),
// so the image is classified in a batch with the first 999 test images, as evaluation does with
// batches of 1000: it sees the statistics it was trained with.
static double predict(Net& n, DeviceData& d, Version v, const std::vector<float>& weights, const std::string& image) {
  upload_params(n, weights);
  std::vector<int> pred;
  const double acc = evaluate(n, d, v, pred);
  std::printf("test accuracy %.2f%% with the saved weights (version %d)\n", acc, version_number(v));
  if (image.empty()) return acc;
  const std::vector<uint8_t> px = read_pgm(image);
  uint8_t* imgs = course::device_alloc<uint8_t>(kEvalChunk * 784);
  uint8_t* labels = course::device_alloc<uint8_t>(kEvalChunk);
  CUDA_CHECK(cudaMemcpy(imgs, d.test_images, (kEvalChunk - 1) * 784, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy(imgs + (kEvalChunk - 1) * 784, px.data(), 784, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(labels, d.test_labels, kEvalChunk, cudaMemcpyDeviceToDevice));  // the image's: unused
  const int zero = 0;
  CUDA_CHECK(cudaMemcpy(d.eval_step, &zero, sizeof(int), cudaMemcpyHostToDevice));
  float* scratch_loss = course::device_alloc<float>(1);
  const Source src{imgs, labels, d.test_perm, d.eval_step, 1};  // test_perm starts 0, 1, 2, ...
  forward(n, v, src, kEvalChunk, scratch_loss, 1);
  CUDA_CHECK(cudaStreamSynchronize(n.st));
  const std::vector<float> z = course::to_host(n.logits + (kEvalChunk - 1) * 10, 10);
  const float m = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (float zi : z) sum += std::exp(zi - m);
  const int best = static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin());
  std::printf("%s: digit %d (probability %.3f); all:", image.c_str(), best, 1.0 / sum);
  for (int k = 0; k < 10; ++k) std::printf(" %d:%.3f", k, std::exp(z[k] - m) / sum);
  std::printf("\n");
  course::device_free({imgs, labels, scratch_loss});
  return acc;
}
// --8<-- [end:predict]

// --8<-- [start:loss_curve]
// --loss-curve DIR: the initial weights (DIR/init.bin, the weights-file format) and the losses of the
// first 50 steps (DIR/losses-<version>.txt, one a line) of version 3 (fp32, "fused") and/or 4 (bf16,
// "tc"), with the training images in file order (no shuffle), so that loss_curve.py
// can train PyTorch from the same weights on the same batches and compare the curves step by step.
constexpr int kCurveSteps = 50;

static void loss_curve(Net& n, DeviceData& d, const std::string& dir, int only_version, int B, float lr) {
  const std::vector<float> init = init_params(0);
  save_weights(dir + "/init.bin", init);
  std::vector<int> order(d.train_count);
  std::iota(order.begin(), order.end(), 0);
  CUDA_CHECK(cudaMemcpy(d.perm, order.data(), order.size() * sizeof(int), cudaMemcpyHostToDevice));
  const Source src{d.train_images, d.train_labels, d.perm, n.step, d.train_count / B};
  for (Version v : {kFused, kTc}) {
    if (only_version && version_number(v) != only_version) continue;
    if (v == kTc && !tf32_supported()) continue;
    upload_params(n, init);
    CUDA_CHECK(cudaMemset(n.step, 0, sizeof(int)));
    for (int s = 0; s < kCurveSteps; ++s) train_step(n, v, src, B, lr);
    const std::vector<float> losses = course::to_host(n.loss_hist, kCurveSteps);
    const std::string path = dir + "/losses-" + kVersionName[v] + ".txt";
    std::ofstream f(path);
    f.precision(9);
    for (float l : losses) f << l << "\n";
    if (!f) {
      std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
      std::exit(course::kExitFail);
    }
    std::printf("wrote %d losses of version %d (batch %d) to %s; first %.4f, last %.4f\n", kCurveSteps,
                version_number(v), B, path.c_str(), losses.front(), losses.back());
  }
}
// --8<-- [end:loss_curve]

// --8<-- [start:seeds]
// --seeds N: version 4 trained from seeds 1 to N (the initial weights and the shuffles) for --epochs
// epochs, with the learning rate warmed up over kWarmupSteps steps to kSchedulePeak and then decayed
// to 0 along half a cosine (tc::LrSchedule; mnist_torch.py --time-to-99 trains with the same recipe).
// Each run must end at 99.0% test accuracy or more. With --bench each run is a BENCH row (its training
// time, its final accuracy), and one more row is the time to 99%: the training time (evaluation and
// the one-time graph capture not included) up to the end of the first epoch at 99.0% or more, the
// median over the seeds that got there. The step is deterministic, so a seed gives the same accuracy
// in every run (mnist_check.cu checks that ten steps repeat bit for bit).
constexpr float kSchedulePeak = 0.1f;

static bool seeds_mode(Net& n, DeviceData& d, int seeds, int epochs, int B, bool bench) {
  const Runner r{kTc, true};
  const int steps_per_epoch = d.train_count / B;
  bool ok = true;
  std::vector<std::pair<double, int>> to_99;  // (seconds, epochs) of each seed that reached 99%
  for (int seed = 1; seed <= seeds; ++seed) {
    std::printf("seed %d, %d epochs, learning rate: %d steps of warm-up to %g, then a cosine to 0\n", seed, epochs,
                kWarmupSteps, kSchedulePeak);
    const TrainResult t = train(n, d, r, epochs, B, kSchedulePeak, seed, true);
    int reached = 0;
    double seconds = 0.0;
    for (size_t e = 0; e < t.accuracy.size() && !reached; ++e) {
      seconds += t.epoch_seconds[e];
      if (t.accuracy[e] >= 99.0) reached = static_cast<int>(e) + 1;
    }
    if (reached) to_99.emplace_back(seconds, reached);
    char name[96], detail[128], kind[64];
    std::snprintf(name, sizeof(name), "v4_seed_%d_test_accuracy_at_least_99_after_%d_epochs", seed, epochs);
    std::snprintf(detail, sizeof(detail), "seed=%d accuracy=%.2f%% first_at_99_epoch=%d epochs=%d batch=%d", seed,
                  t.accuracy.back(), reached, epochs, B);
    ok &= course::check_true(name, t.accuracy.back() >= 99.0, 10000, detail);
    std::snprintf(kind, sizeof(kind), "seed %d, %d epochs", seed, epochs);
    if (bench) print_run_bench(kind, B, r.name(), t.seconds * 1e3, epochs * steps_per_epoch, t.accuracy.back());
  }
  std::sort(to_99.begin(), to_99.end());
  if (!to_99.empty()) {
    const auto median = to_99[(to_99.size() - 1) / 2];  // the lower median: a seed's own time
    std::printf("time to 99%%: %.3f s (median of %zu seeds that reached it)\n", median.first, to_99.size());
    if (bench) print_run_bench("time to 99%", B, r.name(), median.first * 1e3, median.second * steps_per_epoch);
  }
  return ok;
}
// --8<-- [end:seeds]

// --train: the accuracy runs (or the one --version names), with the weights saved and read back.
struct TrainOptions {
  int epochs, batch, only_version;
  std::string curves[2];  // --curves (version 3 in FP32), --curves-tf32
  std::string save_path, predict_path, image_path;
};

static bool train_mode(Net& n, DeviceData& d, const Split& test_split, const TrainOptions& o,
                       Version predict_version) {
  bool ok = true;
  for (const Runner r : kAccuracyRunners) {
    if (!runs_here(r, o.only_version)) continue;
    if (o.only_version == 0 && !o.save_path.empty() && r.v != predict_version) continue;  // train what is saved
    const TrainResult t = accuracy_run(n, d, r, o.epochs, o.batch, kLearningRate, ok);
    if (r.v != kTc) {
      const std::string& path = o.curves[r.v == kTf32 ? 1 : 0];
      if (!path.empty()) write_curves(path.c_str(), t, test_split.labels, r.name(), o.batch, kLearningRate, o.epochs);
    }
    if (o.save_path.empty() || r.v != predict_version) continue;
    save_weights(o.save_path, course::to_host(n.params, kTotalParams));
    std::printf("saved the weights of version %d to %s\n", version_number(r.v), o.save_path.c_str());
    if (!o.predict_path.empty()) {  // read them back, and the same kernels must classify as in training
      const double acc = predict(n, d, r.v, load_weights(o.predict_path), o.image_path);
      char what[96];
      std::snprintf(what, sizeof(what), "after_training=%.2f%% from_file=%.2f%%", t.accuracy.back(), acc);
      ok &= course::check_true("saved_weights_predict_as_trained", std::fabs(acc - t.accuracy.back()) <= 0.1, 10000,
                               what);
    }
  }
  return ok;
}

// --8<-- [start:main]
int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const std::string data_dir = mnist::data_dir(args.get_str("--data-dir", "").c_str());
  TrainOptions o;
  o.epochs = static_cast<int>(args.get_int("--epochs", 8, 1, 1000));
  o.batch = static_cast<int>(args.get_int("--batch", kReferenceBatch, 1, 1024));
  o.only_version = static_cast<int>(args.get_int("--version", 0, 0, 4));  // 0: every version
  const bool train_flag = args.has("--train");
  o.curves[0] = args.get_str("--curves", "");
  o.curves[1] = args.get_str("--curves-tf32", "");
  o.save_path = args.get_str("--save", "");
  o.predict_path = args.get_str("--predict", "");
  o.image_path = args.get_str("--image", "");
  const std::string curve_dir = args.get_str("--loss-curve", "");
  const int seeds = static_cast<int>(args.get_int("--seeds", 0, 0, 100));  // 0: no seed runs
  const bool bench = args.has("--bench");
  args.finish();
  auto usage_error = [](const char* why) {
    std::fprintf(stderr, "error: %s\n", why);
    return course::kExitFail;
  };
  if (!o.image_path.empty() && o.predict_path.empty())
    return usage_error("--image needs --predict WEIGHTS (the weights to classify it with)");
  if (!o.predict_path.empty() && train_flag && o.save_path.empty())
    return usage_error("with --train, --predict reads back what --save wrote; give --save too");
  if (!curve_dir.empty() && (o.only_version == 1 || o.only_version == 2))
    return usage_error("--loss-curve writes versions 3 and 4 (--version 3 or 4, or neither)");
  if (!o.save_path.empty() && !train_flag)
    return usage_error("--save writes the weights that --train trained; give --train too");
  if ((!o.curves[0].empty() || !o.curves[1].empty()) && !train_flag)
    return usage_error("--curves and --curves-tf32 write a --train run's curves; give --train too");
  if (seeds &&
      (train_flag || !o.predict_path.empty() || !curve_dir.empty() || (o.only_version && o.only_version != 4)))
    return usage_error("--seeds trains version 4 alone; give it without --train, --predict and --loss-curve");
  if (bench && !seeds) return usage_error("--bench prints the BENCH rows of the --seeds runs; give --seeds too");
  // A weights file that cannot be read is an error before any GPU work.
  const std::vector<float> saved =
      o.predict_path.empty() || train_flag ? std::vector<float>{} : load_weights(o.predict_path);
  Split train_split, test_split;
  load_data(data_dir, train_split, test_split);
  if (o.only_version == 4 || seeds)
    course::require_compute_capability(8, 0, "version 4 multiplies on bf16 tensor cores (mma.sync m16n8k16.bf16)");

  Net n(1024, 60000);
  DeviceData d = upload(train_split, test_split);
  // Predictions run version 4 where the GPU has it (or the one --version names), else version 3.
  const Version predict_version = o.only_version == 4 || (o.only_version == 0 && tf32_supported()) ? kTc : kFused;
  if (!curve_dir.empty()) {
    loss_curve(n, d, curve_dir, o.only_version, o.batch, kLearningRate);
    return 0;
  }
  if (!o.predict_path.empty() && !train_flag) {
    predict(n, d, predict_version, saved, o.image_path);
    return 0;
  }
  if (train_flag) return train_mode(n, d, test_split, o, predict_version) ? 0 : course::kExitFail;
  if (seeds) return seeds_mode(n, d, seeds, o.epochs, o.batch, bench) ? 0 : course::kExitFail;

  // The checked run: one epoch of version 3 (as a CUDA graph) and, where the GPU has it, version 4
  // learns. Every layer and the versions' agreement are mnist_check.cu's checks.
  bool ok = true;
  for (const Runner r : {Runner{kFused, true}, Runner{kTc, true}}) {
    if (!runs_here(r, o.only_version)) continue;
    const TrainResult t = train(n, d, r, 1, kReferenceBatch, kLearningRate, 0);
    char detail[64], name[64];
    std::snprintf(detail, sizeof(detail), "accuracy=%.2f%% after 1 epoch", t.accuracy.back());
    std::snprintf(name, sizeof(name), "%sone_epoch_learns", r.v == kTc ? "tc_" : "");
    ok &= course::check_true(name, t.accuracy.back() >= 97.0, 10000, detail);
  }
  return ok ? 0 : course::kExitFail;
}
// --8<-- [end:main]
