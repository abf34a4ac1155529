// idx_check.cpp: tests the MNIST loader (mnist_idx.h) on the CPU: good files load, and every kind of
// bad file (missing, truncated, wrong magic, wrong shape, bad label, damaged gzip) gives a clear error.
//
// Taught in docs/mnist/data.md. No GPU needed.
// Build: g++ -std=c++17 -O2 -o build/mnist/idx_check kernels/mnist/idx_check.cpp
// Run:   ./build/mnist/idx_check --synthetic    (small files it writes to build/mnist/idx_check_files/)
//        ./build/mnist/idx_check                (the real files: --data-dir, $MNIST_DIR, data/mnist or
//                                                ../shared/data/mnist; exits 2, "skipped", if none exist)
//
// course: run --synthetic
// course: run
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "../cpp/check.h"  // cli_*: strict command-line options for CPU programs
#include "mnist_idx.h"

static int g_failed = 0;

static bool check(const char* name, bool ok, const std::string& detail) {
  std::printf("CHECK %s %s n=1 %s\n", ok ? "PASS" : "FAIL", name, detail.c_str());
  if (!ok) ++g_failed;
  return ok;
}

// --- writing test files ---------------------------------------------------------------------------

static void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

static void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

static std::vector<uint8_t> idx_file(uint32_t magic, const std::vector<uint32_t>& dims, size_t data_bytes) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  for (uint32_t d : dims) put_be32(b, d);
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<uint8_t>((i * 7 + 3) % 10));
  return b;
}

static uint32_t crc32(const std::vector<uint8_t>& data) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A valid gzip file whose DEFLATE stream uses "stored" (uncompressed) blocks: enough to test the
// gzip path without needing a compressor.
static std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> g = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  size_t at = 0;
  do {
    const size_t len = std::min<size_t>(65535, data.size() - at);
    const bool last = at + len == data.size();
    g.push_back(last ? 1 : 0);
    g.push_back(static_cast<uint8_t>(len));
    g.push_back(static_cast<uint8_t>(len >> 8));
    g.push_back(static_cast<uint8_t>(~len));
    g.push_back(static_cast<uint8_t>(~len >> 8));
    g.insert(g.end(), data.begin() + static_cast<std::ptrdiff_t>(at),
             data.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  } while (at < data.size());
  const uint32_t crc = crc32(data), size = static_cast<uint32_t>(data.size());
  for (int s = 0; s < 32; s += 8) g.push_back(static_cast<uint8_t>(crc >> s));
  for (int s = 0; s < 32; s += 8) g.push_back(static_cast<uint8_t>(size >> s));
  return g;
}

// Runs `load` and checks that it throws IdxError whose message contains `needle`.
template <typename F>
static void expect_error(const char* name, const char* needle, F&& load) {
  try {
    load();
    check(name, false, "no error was raised");
  } catch (const mnist::IdxError& e) {
    const std::string msg = e.what();
    check(name, msg.find(needle) != std::string::npos, std::string("error=\"") + msg + "\"");
  }
}

// --8<-- [start:synthetic]
static void synthetic_checks() {
  const std::string dir = "build/mnist/idx_check_files";
  mkdir("build", 0755);
  mkdir("build/mnist", 0755);
  mkdir(dir.c_str(), 0755);
  const uint32_t n = 5;
  const std::vector<uint32_t> shape = {n, 28, 28};
  const std::vector<uint8_t> good = idx_file(mnist::kImageMagic, shape, n * 784);
  write_bytes(dir + "/good.idx", good);
  write_bytes(dir + "/good.idx.gz", gzip_stored(good));
  const std::vector<uint8_t> want(good.begin() + 16, good.end());

  check("raw_file_loads", mnist::read_idx(dir + "/good.idx", mnist::kImageMagic, shape) == want, "5 images");
  if (mnist::detail::Zlib::get().ok) {
    check("gzip_file_loads", mnist::read_idx(dir + "/good.idx.gz", mnist::kImageMagic, shape) == want, "5 images");
    std::vector<uint8_t> gz = gzip_stored(good);
    gz.resize(gz.size() / 2);
    write_bytes(dir + "/cut.idx.gz", gz);
    expect_error("truncated_gzip_is_an_error", "truncated",
                 [&] { mnist::read_idx(dir + "/cut.idx.gz", mnist::kImageMagic, shape); });
  } else {
    std::printf("NOTE zlib (libz.so.1) not found: gzip checks not run\n");
  }

  expect_error("missing_file_is_an_error", "not found", [&] { mnist::find_file(dir, "no-such-file"); });
  std::vector<uint8_t> cut(good.begin(), good.end() - 100);
  write_bytes(dir + "/cut.idx", cut);
  expect_error("truncated_file_is_an_error", "truncated",
               [&] { mnist::read_idx(dir + "/cut.idx", mnist::kImageMagic, shape); });
  write_bytes(dir + "/empty.idx", {});
  expect_error("empty_file_is_an_error", "too short",
               [&] { mnist::read_idx(dir + "/empty.idx", mnist::kImageMagic, shape); });
  expect_error("labels_read_as_images_is_an_error", "magic number",
               [&] { mnist::read_idx(dir + "/good.idx", mnist::kLabelMagic, {n}); });
  expect_error("wrong_shape_is_an_error", "dimension 1 is 28, expected 27",
               [&] { mnist::read_idx(dir + "/good.idx", mnist::kImageMagic, {n, 27, 28}); });

  // A split whose label file holds a 10: the loader must reject it.
  write_bytes(dir + "/t10k-images-idx3-ubyte", good);
  std::vector<uint8_t> labels = idx_file(mnist::kLabelMagic, {n}, n);
  labels.back() = 10;
  write_bytes(dir + "/t10k-labels-idx1-ubyte", labels);
  expect_error("label_out_of_range_is_an_error", "outside 0..9", [&] { mnist::load_split(dir, "t10k", n); });
}
// --8<-- [end:synthetic]

// --8<-- [start:real]
// Facts about the real files: sizes, the first labels, and how many of each digit each split has.
static void real_checks(const std::string& dir) {
  const mnist::Split train = mnist::load_split(dir, "train", 60000);
  const mnist::Split test = mnist::load_split(dir, "t10k", 10000);
  const std::array<int, 10> train_counts = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
  const std::array<int, 10> test_counts = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
  std::array<int, 10> tr{}, te{};
  for (uint8_t l : train.labels) ++tr[l];
  for (uint8_t l : test.labels) ++te[l];
  check("train_split_loads", train.images.size() == 60000u * 784 && train.labels.size() == 60000, "60000 images");
  check("test_split_loads", test.images.size() == 10000u * 784 && test.labels.size() == 10000, "10000 images");
  check("train_digit_counts", tr == train_counts, "per-digit counts match the published ones");
  check("test_digit_counts", te == test_counts, "per-digit counts match the published ones");
  check("first_labels", train.labels[0] == 5 && test.labels[0] == 7, "train[0]=5 test[0]=7");
  // The real gzip file, cut in half, must be reported as damaged.
  const std::string gz = dir + "/t10k-labels-idx1-ubyte.gz";
  if (mnist::detail::file_exists(gz) && mnist::detail::Zlib::get().ok) {
    std::vector<uint8_t> bytes = mnist::detail::read_raw(gz);
    bytes.resize(bytes.size() / 2);
    mkdir("build", 0755);
    mkdir("build/mnist", 0755);
    write_bytes("build/mnist/cut-labels.gz", bytes);
    expect_error("truncated_real_gzip_is_an_error", "truncated",
                 [&] { mnist::read_idx("build/mnist/cut-labels.gz", mnist::kLabelMagic, {10000}); });
  }
}
// --8<-- [end:real]

int main(int argc, char** argv) {
  Cli cli;
  cli_init(&cli, argc, argv);
  const bool synthetic = cli_has(&cli, "--synthetic");
  const char* dir_arg = cli_str(&cli, "--data-dir", nullptr);
  cli_finish(&cli);
  try {
    if (synthetic) {
      synthetic_checks();
    } else {
      // Explicit choices first, then the repository's data/ folder, then CI's shared copy.
      std::vector<std::string> dirs = {mnist::data_dir(dir_arg)};
      const char* env = std::getenv("MNIST_DIR");
      if (!dir_arg && !(env && *env)) dirs.push_back("../shared/data/mnist");
      std::string found;
      for (const std::string& d : dirs)
        if (mnist::detail::file_exists(d + "/t10k-labels-idx1-ubyte.gz") ||
            mnist::detail::file_exists(d + "/t10k-labels-idx1-ubyte"))
          if (found.empty()) found = d;
      if (found.empty()) {
        std::string where;
        for (const std::string& d : dirs) where += (where.empty() ? "" : ", ") + d;
        std::printf("WAIVED the MNIST files are in none of: %s (set --data-dir or MNIST_DIR)\n", where.c_str());
        return 2;
      }
      std::printf("reading MNIST from %s\n", found.c_str());
      real_checks(found);
    }
  } catch (const mnist::IdxError& e) {
    std::printf("CHECK FAIL unexpected_error n=1 %s\n", e.what());
    return 1;
  }
  return g_failed ? 1 : 0;
}
