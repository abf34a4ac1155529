// cudnn_graph.cu: cuDNN's graph API through the cudnn-frontend C++ headers: convolution, bias and
// ReLU described as one graph, which cuDNN compiles into one fused kernel (runtime fusion).
//
// Taught in docs/libraries/cudnn.md. Needs the header-only cudnn-frontend (pip wheel
// nvidia-cudnn-frontend, folder include/); the course passes its folder with -isystem. Without
// the headers the program compiles to a stub that reports itself waived.
// Build: nvcc -std=c++17 -O3 -arch=native -isystem .cudnn_fe/include -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
//        -DCUDNN_FRONTEND_SKIP_JSON_LIB -o build/libraries/cudnn_graph kernels/libraries/cudnn_graph.cu -lcudnn
// Run:   ./build/libraries/cudnn_graph
//
// course: gpu
// course: libs cudnn
// course: headers cudnn_frontend
// course: nvcc-flags -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -DCUDNN_FRONTEND_SKIP_JSON_LIB
// course: run --n 3 --c 16 --h 19 --w 13 --k 24
// course: run --n 3 --c 16 --h 19 --w 13 --k 24 --plant zeros-small
// (One shape only: C and K must be multiples of 8, H and W are primes, and each run costs the test
// harness a rebuild of the frontend's templates, which takes a minute or more.)
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/inputs.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/verify.cuh"

// The options, read the same way whether or not the frontend's headers are there, so that a typo is
// an error (exit 1) even in the stub below.
struct Options {
  int n, c, h, w, k;
  uint64_t seed;
  bool plant;  // --plant zeros-small
};

static Options parse_options(int argc, char** argv) {
  const course::Args args{argc, argv};
  // fp16 tensor-core convolutions want channel counts that are multiples of 8 (16 bytes); the other
  // bounds keep the CPU reference quick.
  const Options o{(int)args.get_int("--n", 3, 1, 64), (int)args.get_int("--c", 16, 8, 256),
                  (int)args.get_int("--h", 19, 1, 256), (int)args.get_int("--w", 13, 1, 256),
                  (int)args.get_int("--k", 24, 8, 256), static_cast<uint64_t>(args.get_int("--seed", 2026, 0)),
                  course::plant_zeros_small_requested(args)};
  args.finish();
  if (o.plant && o.n < 2) {
    std::fprintf(stderr, "error: --plant zeros-small needs --n 2 or more (the quiet image is the second)\n");
    std::exit(course::kExitFail);
  }
  if (o.c % 8 || o.k % 8) {
    std::fprintf(stderr, "error: --c and --k must be multiples of 8 (fp16 tensor-core alignment)\n");
    std::exit(course::kExitFail);
  }
  return o;
}

// The frontend also includes nvrtc.h (for its experimental engines). With dynamic loading it
// looks cuDNN's functions up through a handle that the program provides, and opens NVRTC only if
// an engine needs it, so the program links nothing but cuDNN. SKIP_JSON_LIB leaves out the JSON
// serialisation support, which the program does not use and which slows compilation.
#if __has_include(<cudnn_frontend.h>) && __has_include(<nvrtc.h>)
#include <cuda_fp16.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include "../common/check_cudnn.cuh"

namespace fe = cudnn_frontend;

// The handle the frontend's dynamic loading resolves cuDNN's functions through. The program links
// libcudnn, so dlopen returns the copy already loaded.
void* cudnn_frontend::cudnn_dlhandle = nullptr;

// Every frontend call returns an error_t that carries a code and a message.
#define FE_CHECK(call)                                                                        \
  do {                                                                                        \
    auto e_ = (call);                                                                         \
    if (!e_.is_good()) {                                                                      \
      std::fprintf(stderr, "cudnn-frontend error at %s:%d\n  in: %s\n  %s\n", __FILE__, __LINE__, \
                   #call, e_.get_message().c_str());                                          \
      std::exit(course::kExitFail);                                                           \
    }                                                                                         \
  } while (0)

// CPU reference: y = relu(conv3x3(x, w, pad 1) + b), NHWC activations, KRSC filters, in double.
static void reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                      std::vector<double>& y, int N, int C, int H, int W, int K) {
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < W; ++q)
        for (int k = 0; k < K; ++k) {
          double acc = b[k];
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int hi = h - 1 + i, wi = q - 1 + j;
              if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
              for (int c = 0; c < C; ++c)
                acc += (double)x[(((size_t)n * H + hi) * W + wi) * C + c] * w[(((size_t)k * 3 + i) * 3 + j) * C + c];
            }
          y[(((size_t)n * H + h) * W + q) * K + k] = std::max(acc, 0.0);
        }
}

static std::vector<__half> to_half(std::vector<float>& v) {  // rounds v in place too
  std::vector<__half> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = __float2half(v[i]);
    v[i] = __half2float(out[i]);
  }
  return out;
}

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  const int N = o.n, C = o.c, H = o.h, W = o.w, K = o.k;
  const uint64_t seed = o.seed;
  cudnn_frontend::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW);
  if (!cudnn_frontend::cudnn_dlhandle) {
    std::fprintf(stderr, "error: cannot open libcudnn.so.9: %s\n", dlerror());
    return course::kExitFail;
  }
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));  // no GPU: a plain CUDA error rather than cuDNN's
  cudnnHandle_t handle;
  CUDNN_CHECK(cudnnCreate(&handle));

  // --8<-- [start:graph]
  // Tensors are described by dimensions in NCHW order and strides that say where each element
  // lives: these strides put C innermost, so the memory is NHWC, which tensor cores want.
  fe::graph::Graph graph;
  graph.set_io_data_type(fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto X = graph.tensor(fe::graph::Tensor_attributes().set_name("x").set_dim({N, C, H, W})
                            .set_stride({(int64_t)C * H * W, 1, (int64_t)C * W, C}));
  auto Wt = graph.tensor(fe::graph::Tensor_attributes().set_name("w").set_dim({K, C, 3, 3})
                             .set_stride({(int64_t)C * 9, 1, (int64_t)C * 3, C}));
  auto B = graph.tensor(fe::graph::Tensor_attributes().set_name("b").set_dim({1, K, 1, 1})
                            .set_stride({K, 1, K, K}));
  auto conv = graph.conv_fprop(X, Wt, fe::graph::Conv_fprop_attributes().set_padding({1, 1})
                                          .set_stride({1, 1}).set_dilation({1, 1}));
  auto biased = graph.pointwise(conv, B, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  auto Y = graph.pointwise(biased, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  Y->set_output(true).set_data_type(fe::DataType_t::HALF);
  // --8<-- [end:graph]

  // --8<-- [start:build]
  // validate: the graph is well formed. build_operation_graph: hand it to the backend.
  // create_execution_plans: ask the heuristic (mode A) for engines that can run it.
  // check_support: drop the ones that cannot run here. build_plans: compile (this is where a
  // runtime-fusion engine generates and compiles its kernel, which can take a moment).
  FE_CHECK(graph.validate());
  FE_CHECK(graph.build_operation_graph(handle));
  FE_CHECK(graph.create_execution_plans({fe::HeurMode_t::A}));
  FE_CHECK(graph.check_support(handle));
  FE_CHECK(graph.build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE));
  int64_t plans = graph.get_execution_plan_count(), ws_bytes = 0;
  std::string plan_name;
  FE_CHECK(graph.get_plan_name(plan_name));
  FE_CHECK(graph.get_workspace_size(ws_bytes));
  std::printf("%lld candidate plan(s); running %s with %lld bytes of workspace\n", (long long)plans,
              plan_name.c_str(), (long long)ws_bytes);
  // --8<-- [end:build]

  std::vector<float> x((size_t)N * H * W * C), w((size_t)K * 9 * C), b(K);
  course::fill_uniform(x, seed);
  course::fill_uniform(w, seed + 1);
  course::fill_uniform(b, seed + 2);
  // Every third image and every third bias, from the second, 2^10 times quieter (exact, and inside fp16's
  // normal range): the outputs of a quiet image's quiet channels are small beside the others.
  course::quiet_rows(x, N, (size_t)H * W * C, 0x1p-10f);
  course::quiet_rows(b, K, 1, 0x1p-10f);
  const auto x16 = to_half(x), w16 = to_half(w), b16 = to_half(b);
  const size_t ny = (size_t)N * H * W * K;
  __half *dx, *dw, *db, *dy;
  void* ws = nullptr;
  CUDA_CHECK(cudaMalloc(&dx, x16.size() * 2));
  CUDA_CHECK(cudaMalloc(&dw, w16.size() * 2));
  CUDA_CHECK(cudaMalloc(&db, b16.size() * 2));
  CUDA_CHECK(cudaMalloc(&dy, ny * 2));
  if (ws_bytes) CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  CUDA_CHECK(cudaMemcpy(dx, x16.data(), x16.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dw, w16.data(), w16.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b16.data(), b16.size() * 2, cudaMemcpyHostToDevice));
  course::poison(dy, ny * 2);  // 0xFFFF is a NaN in fp16 too

  // --8<-- [start:execute]
  // The variant pack binds each graph tensor to a device pointer for this execution.
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack = {
      {X, dx}, {Wt, dw}, {B, db}, {Y, dy}};
  FE_CHECK(graph.execute(handle, pack, ws));
  CUDA_CHECK(cudaDeviceSynchronize());
  // --8<-- [end:execute]

  std::vector<__half> y16(ny);
  CUDA_CHECK(cudaMemcpy(y16.data(), dy, ny * 2, cudaMemcpyDeviceToHost));
  std::vector<float> y(ny);
  for (size_t i = 0; i < ny; ++i) y[i] = __half2float(y16[i]);
  std::vector<double> want(ny), sum_abs(ny);
  reference(x, w, b, want, N, C, H, W, K);
  // --8<-- [start:tolerance]
  // Each output sums 9C products and a bias in fp32: its tolerance follows their sizes, sum |x w| + |b|
  // (the reference on |x|, |w| and |b|, before the ReLU), through course::sum_atol, with 2^-12 for the
  // inputs in case an engine rounds the convolution to fp16 before the bias; the fp16 output adds 2^-11 of
  // itself (rtol) and half its smallest subnormal step. A fixed atol of 5e-3 let the small outputs of a
  // quiet image's quiet channels come back as zeros.
  reference(course::abs_values(x), course::abs_values(w), course::abs_values(b), sum_abs, N, C, H, W, K);
  std::vector<double> atol = course::sum_atol(sum_abs, 9LL * C + 1, 0x1p-23, 0x1p-12);
  for (double& a : atol) a += 0x1p-25;
  const bool ok = course::check_close_each_planted("cudnn_graph_conv_bias_relu", y.data(), want.data(), atol.data(),
                                                   ny, 0x1p-11, o.plant ? 5e-3 : 0);
  // --8<-- [end:tolerance]
  for (void* p : {(void*)dx, (void*)dw, (void*)db, (void*)dy}) CUDA_CHECK(cudaFree(p));
  if (ws) CUDA_CHECK(cudaFree(ws));
  CUDNN_CHECK(cudnnDestroy(handle));
  return ok ? 0 : course::kExitFail;
}

#else  // no cudnn-frontend or NVRTC headers: say so, and count as waived rather than failed

int main(int argc, char** argv) {
  parse_options(argc, argv);
  std::printf(
      "WAIVED needs the cudnn-frontend and NVRTC headers (pip install nvidia-cudnn-frontend; pass its include/)\n");
  return course::kExitWaived;
}

#endif
