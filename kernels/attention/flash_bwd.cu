// flash_bwd.cu: the backward pass of attention, FlashAttention-2 style: dQ, dK and dV from dO, the
// forward's output O and the logsumexp it saved, recomputing P tile by tile instead of storing it.
// Checked against a float64 reference; timed on the chapter's benchmark.
//
// Taught in docs/attention/backward.md. One configuration: bf16 Q, K, V, O, dO in, fp32 arithmetic,
// fp32 dQ, dK, dV out, head dimension 64 or 128, causal and key-padding masks. Three kernels:
//   bwd_delta  delta_i = rowsum(dO_i o O_i), one warp per row
//   bwd_dkdv   one warp per key j: loops over the query rows that see it, accumulates dK_j and dV_j
//   bwd_dq     one warp per query row i: loops over its keys, accumulates dQ_i
// (FlashAttention-2 computes dQ inside the dK/dV loop with atomic adds; two loops recompute P
// once more but need no atomics. Neither uses tensor cores here: this is the algorithm, in FP32.)
// Build: nvcc -std=c++17 -O3 -arch=native -o build/attention/flash_bwd kernels/attention/flash_bwd.cu
// Run:   ./build/attention/flash_bwd --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
//        ./build/attention/flash_bwd --bench
// Needs compute capability 8.0 (the forward pass it runs first uses mma.sync).
//
// course: gpu
// course: run --batch 3 --heads 2 --seq 127 --dim 64 --padding
// course: run --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 1 --heads 2 --seq 777 --dim 128 --causal
// course: bench --bench
#include <string>

#include "attention_common.cuh"
#include "flash_fwd.cuh"

using flash::bf16;

// --8<-- [start:tolerances]
// Tolerances. dV = P^T dO uses P recomputed in fp32 from fp32 scores and the saved logsumexp: the
// scores' error (3.5e-4 in the exponent, attention_common.cuh) times |dO| <= 1 summed over P's unit
// row mass: atol 2^-10. dQ and dK also go through delta = rowsum(dO o O), with O the forward's bf16
// output: relative errors up to 2^-8 (rounding) plus 2^-8 absolute (bf16 P), independent across the
// D terms, add up like sqrt(D) * 2^-7 ~ 0.09 at worst for D = 128, realistically a fifth of that;
// dQ_i = scale * sum_j dS_ij k_j carries delta's error times scale * |sum_j P_ij k_j| <= 0.18:
// about 4e-3. atol 2^-6 leaves a factor of four. rtol 2^-7 as in the forward.
constexpr double kAtolDv = 0x1p-10, kAtolDqDk = 0x1p-6;
// --8<-- [end:tolerances]

struct BwdParams {
  const bf16 *q, *k, *v, *o, *d_out;
  const float* lse;  // from the forward, natural log, +inf for a fully masked row
  const int* key_len;
  float *delta, *dq, *dk, *dv;
  int heads, seq;
  float scale;
  bool causal;
};

constexpr int kWarps = 8, kTile = 32;

__device__ inline float dot_warp(const float* a, const float* b, int per_lane) {
  float x = 0.0f;
  for (int c = 0; c < per_lane; ++c) x += a[c] * b[c];
  return warp_add(x);  // softmax.cuh's butterfly: every lane gets the sum
}

// --8<-- [start:delta]
template <int D>
__global__ void __launch_bounds__(kWarps * 32) bwd_delta(BwdParams p, long long rows) {
  const long long r = blockIdx.x * 1LL * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  float x = 0.0f;
  for (int c = lane; c < D; c += 32)
    x += __bfloat162float(p.d_out[r * D + c]) * __bfloat162float(p.o[r * D + c]);
  x = warp_add(x);
  if (lane == 0) p.delta[r] = x;
}
// --8<-- [end:delta]

// --8<-- [start:dkdv]
// One warp per key j (lane owns columns lane, lane + 32, ...); the block's kWarps keys share tiles
// of kTile query rows (Q, dO, logsumexp, delta) staged in shared memory as floats.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) bwd_dkdv(BwdParams p) {
  constexpr int kPer = D / 32;
  __shared__ float q_s[kTile][D], do_s[kTile][D], lse_s[kTile], delta_s[kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / p.heads, key0 = blockIdx.x * kWarps, j = key0 + warp;
  const long long head = 1LL * bh * p.seq;
  const int key_len = p.key_len[b];
  float kj[kPer], vj[kPer], dk[kPer] = {}, dv[kPer] = {};
  for (int c = 0; c < kPer; ++c) {
    const bool in = j < p.seq;
    kj[c] = in ? __bfloat162float(p.k[(head + j) * D + lane + 32 * c]) : 0.0f;
    vj[c] = in ? __bfloat162float(p.v[(head + j) * D + lane + 32 * c]) : 0.0f;
  }
  // Under a causal mask only rows i >= j see key j: start at the block's first key.
  const int first_row = p.causal ? (key0 / kTile) * kTile : 0;
  for (int i0 = first_row; i0 < p.seq && key0 < key_len; i0 += kTile) {
    __syncthreads();
    for (int t = threadIdx.x; t < kTile * D; t += blockDim.x) {
      const int i = i0 + t / D;
      q_s[t / D][t % D] = i < p.seq ? __bfloat162float(p.q[(head + i) * D + t % D]) : 0.0f;
      do_s[t / D][t % D] = i < p.seq ? __bfloat162float(p.d_out[(head + i) * D + t % D]) : 0.0f;
    }
    for (int t = threadIdx.x; t < kTile; t += blockDim.x) {
      lse_s[t] = i0 + t < p.seq ? p.lse[head + i0 + t] : INFINITY;
      delta_s[t] = i0 + t < p.seq ? p.delta[head + i0 + t] : 0.0f;
    }
    __syncthreads();
    for (int ii = 0; ii < kTile; ++ii) {
      const int i = i0 + ii;
      if (i >= p.seq || j >= key_len || (p.causal && j > i)) continue;  // uniform across the warp
      float qi[kPer], doi[kPer];
      for (int c = 0; c < kPer; ++c) qi[c] = q_s[ii][lane + 32 * c], doi[c] = do_s[ii][lane + 32 * c];
      const float prob = expf(dot_warp(qi, kj, kPer) * p.scale - lse_s[ii]);  // P_ij, recomputed
      const float ds = prob * (dot_warp(doi, vj, kPer) - delta_s[ii]);        // dS_ij
      for (int c = 0; c < kPer; ++c) {
        dv[c] += prob * doi[c];
        dk[c] += ds * qi[c];
      }
    }
  }
  if (j >= p.seq) return;
  for (int c = 0; c < kPer; ++c) {
    p.dk[(head + j) * D + lane + 32 * c] = dk[c] * p.scale;
    p.dv[(head + j) * D + lane + 32 * c] = dv[c];
  }
}
// --8<-- [end:dkdv]

// --8<-- [start:dq]
// One warp per query row i; the block's kWarps rows share tiles of kTile keys (K, V) in shared memory.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) bwd_dq(BwdParams p) {
  constexpr int kPer = D / 32;
  __shared__ float k_s[kTile][D], v_s[kTile][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / p.heads, row0 = blockIdx.x * kWarps, i = row0 + warp;
  const long long head = 1LL * bh * p.seq;
  const int key_len = p.key_len[b];
  const bool row_in = i < p.seq;
  float qi[kPer], doi[kPer], dq[kPer] = {};
  for (int c = 0; c < kPer; ++c) {
    qi[c] = row_in ? __bfloat162float(p.q[(head + i) * D + lane + 32 * c]) : 0.0f;
    doi[c] = row_in ? __bfloat162float(p.d_out[(head + i) * D + lane + 32 * c]) : 0.0f;
  }
  const float lse = row_in ? p.lse[head + i] : INFINITY, delta = row_in ? p.delta[head + i] : 0.0f;
  const int last_key = p.causal ? min(key_len, row0 + kWarps) : key_len;
  for (int j0 = 0; j0 < last_key; j0 += kTile) {
    __syncthreads();
    for (int t = threadIdx.x; t < kTile * D; t += blockDim.x) {
      const int j = j0 + t / D;
      k_s[t / D][t % D] = j < p.seq ? __bfloat162float(p.k[(head + j) * D + t % D]) : 0.0f;
      v_s[t / D][t % D] = j < p.seq ? __bfloat162float(p.v[(head + j) * D + t % D]) : 0.0f;
    }
    __syncthreads();
    for (int jj = 0; jj < kTile; ++jj) {
      const int j = j0 + jj;
      if (!row_in || j >= key_len || (p.causal && j > i)) continue;  // uniform across the warp
      float kj[kPer], vj[kPer];
      for (int c = 0; c < kPer; ++c) kj[c] = k_s[jj][lane + 32 * c], vj[c] = v_s[jj][lane + 32 * c];
      const float prob = expf(dot_warp(qi, kj, kPer) * p.scale - lse);
      const float ds = prob * (dot_warp(doi, vj, kPer) - delta);
      for (int c = 0; c < kPer; ++c) dq[c] += ds * kj[c];
    }
  }
  if (!row_in) return;
  for (int c = 0; c < kPer; ++c) p.dq[(head + i) * D + lane + 32 * c] = dq[c] * p.scale;
}
// --8<-- [end:dq]

template <int D>
void backward_d(const BwdParams& p, int batch) {
  const int bh = batch * p.heads;
  const long long rows = 1LL * bh * p.seq;
  bwd_delta<D><<<static_cast<unsigned>(course::ceil_div(rows, 1LL * kWarps)), kWarps * 32>>>(p, rows);
  CUDA_CHECK_LAUNCH();
  bwd_dkdv<D><<<dim3(course::ceil_div(p.seq, kWarps), bh), kWarps * 32>>>(p);
  CUDA_CHECK_LAUNCH();
  bwd_dq<D><<<dim3(course::ceil_div(p.seq, kWarps), bh), kWarps * 32>>>(p);
  CUDA_CHECK_LAUNCH();
}

void backward(const BwdParams& p, int batch, int dim) {
  if (dim == 64) backward_d<64>(p, batch);
  else backward_d<128>(p, batch);
}

// Runs the forward (v2) and the backward on one shape, checks dQ, dK, dV on a sample of (batch,
// head)s against the float64 reference, and with repeats > 0 times the backward alone.
bool check_and_time(const attn::Shape& s, uint64_t seed, int repeats) {
  const attn::Inputs in = attn::make_inputs(s, seed);
  std::vector<float> d_out(s.elements());
  std::vector<bf16> d_out_b;
  course::fill_uniform(d_out, seed + 3, -1.0f, 1.0f);
  attn::round_to_bf16(d_out, d_out_b);
  const size_t n = s.elements() * sizeof(bf16), nf = s.elements() * sizeof(float), nr = s.rows() * sizeof(float);
  bf16 *q, *k, *v, *o, *dob;
  float *lse, *delta, *dq, *dk, *dv;
  int* key_len;
  for (bf16** ptr : {&q, &k, &v, &o, &dob}) CUDA_CHECK(cudaMalloc(ptr, n));
  for (float** ptr : {&dq, &dk, &dv}) CUDA_CHECK(cudaMalloc(ptr, nf));
  CUDA_CHECK(cudaMalloc(&lse, nr));
  CUDA_CHECK(cudaMalloc(&delta, nr));
  CUDA_CHECK(cudaMalloc(&key_len, s.batch * sizeof(int)));
  const double alloc = 5.0 * n + 3.0 * nf + 2.0 * nr + s.batch * sizeof(int);
  CUDA_CHECK(cudaMemcpy(q, in.qb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(k, in.kb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(v, in.vb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dob, d_out_b.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(key_len, s.key_len.data(), s.batch * sizeof(int), cudaMemcpyHostToDevice));
  for (void* ptr : {static_cast<void*>(o), static_cast<void*>(lse), static_cast<void*>(delta), static_cast<void*>(dq),
                    static_cast<void*>(dk), static_cast<void*>(dv)})
    course::poison(ptr, ptr == static_cast<void*>(o) ? n : (ptr == lse || ptr == delta) ? nr : nf);

  const flash::Params fwd{q, k, v, o, lse, key_len, s.heads, s.seq, static_cast<float>(s.scale()) * flash::kLog2e,
                          s.causal};
  flash::launch(2, fwd, s.batch, s.dim);
  const BwdParams p{q, k, v, o, dob, lse, key_len, delta, dq, dk, dv, s.heads, s.seq,
                    static_cast<float>(s.scale()), s.causal};
  backward(p, s.batch, s.dim);
  CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> got_dq(s.elements()), got_dk(s.elements()), got_dv(s.elements());
  CUDA_CHECK(cudaMemcpy(got_dq.data(), dq, nf, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_dk.data(), dk, nf, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_dv.data(), dv, nf, cudaMemcpyDeviceToHost));
  // The reference costs seq^2 * dim per (batch, head): all of them for the small checks, the last
  // one (seconds of CPU time) at the benchmark's size.
  const long long bh_count = 1LL * s.batch * s.heads, per_head = 1LL * s.seq * s.dim;
  const bool small = 1.0 * bh_count * s.seq * s.seq * s.dim < 4e9;
  std::vector<long long> heads_to_check;
  for (long long bh = 0; bh < bh_count; ++bh)
    if (small || bh == bh_count - 1) heads_to_check.push_back(bh);
  std::vector<float> g_dq, g_dk, g_dv;
  std::vector<double> w_dq, w_dk, w_dv, rq(per_head), rk(per_head), rv(per_head);
  for (long long bh : heads_to_check) {
    attn::reference_backward(s, in.q.data(), in.k.data(), in.v.data(), d_out.data(), bh, rq.data(), rk.data(), rv.data());
    g_dq.insert(g_dq.end(), got_dq.begin() + bh * per_head, got_dq.begin() + (bh + 1) * per_head);
    g_dk.insert(g_dk.end(), got_dk.begin() + bh * per_head, got_dk.begin() + (bh + 1) * per_head);
    g_dv.insert(g_dv.end(), got_dv.begin() + bh * per_head, got_dv.begin() + (bh + 1) * per_head);
    w_dq.insert(w_dq.end(), rq.begin(), rq.end());
    w_dk.insert(w_dk.end(), rk.begin(), rk.end());
    w_dv.insert(w_dv.end(), rv.begin(), rv.end());
  }
  const bool padded = s.key_len[0] < s.seq || s.key_len[s.batch - 1] < s.seq;
  const std::string name = attn::case_name(s) + (padded ? " padded" : "");
  bool ok = course::check_close(attn::check_label("dQ " + name).c_str(), g_dq.data(), w_dq.data(), g_dq.size(), attn::kRtol, kAtolDqDk);
  ok = course::check_close(attn::check_label("dK " + name).c_str(), g_dk.data(), w_dk.data(), g_dk.size(), attn::kRtol, kAtolDqDk) && ok;
  ok = course::check_close(attn::check_label("dV " + name).c_str(), g_dv.data(), w_dv.data(), g_dv.size(), attn::kRtol, kAtolDv) && ok;

  if (repeats > 0) {
    const double ms = course::time_kernel_ms([&] { backward(p, s.batch, s.dim); }, 1, repeats);
    // Reads Q, K, V, O, dO (bf16) and the logsumexp; writes dQ, dK, dV (fp32). The arithmetic is the
    // usual count, 2.5 times the forward's (five matrix products instead of two), not what this
    // implementation spends (it recomputes P and dP in the dQ kernel).
    const double bytes = 5.0 * n + nr + 3.0 * nf;
    attn::print_bench_row((attn::case_name(s) + " backward").c_str(), "flash bwd FP32 (bf16 in, fp32 math)", ms, bytes,
                          2.5 * s.forward_flops(), s.seq, alloc);
  }
  for (void* ptr : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(o),
                    static_cast<void*>(dob), static_cast<void*>(lse), static_cast<void*>(delta), static_cast<void*>(dq),
                    static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(key_len)})
    CUDA_CHECK(cudaFree(ptr));
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int batch = static_cast<int>(args.get_int("--batch", 2, 1, 64));
  const int heads = static_cast<int>(args.get_int("--heads", 3, 1, 64));
  const int seq = static_cast<int>(args.get_int("--seq", 333, 1, 1 << 16));
  const int dim = static_cast<int>(args.get_int("--dim", 128, 64, 128));
  const bool causal = args.has("--causal");
  const bool padding = args.has("--padding");
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2024, 0));
  const bool bench = args.has("--bench");
  args.finish();
  if (dim != 64 && dim != 128) {
    std::fprintf(stderr, "error: --dim must be 64 or 128, got %d\n", dim);
    return course::kExitFail;
  }
  course::require_compute_capability(8, 0, "the forward pass uses bf16 mma.sync");
  bool ok = true;
  if (!bench) {
    ok = check_and_time({batch, heads, seq, dim, causal, attn::key_lengths(batch, seq, padding)}, seed, 0);
  } else {
    for (bool is_causal : {false, true})
      ok = check_and_time({4, 16, 4096, 128, is_causal, attn::key_lengths(4, 4096, false)}, seed, 5) && ok;
  }
  return ok ? 0 : course::kExitFail;
}
