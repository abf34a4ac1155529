// mnist_idx.h: reads the four standard MNIST files (IDX format, gzipped or raw) and validates them.
//
// Taught in docs/mnist/data.md. Plain C++17, no CUDA: the CUDA program copies what it returns to the
// GPU once. Every problem (missing file, wrong magic number, wrong shape, truncated data, a label
// outside 0..9) throws mnist::IdxError with a message that names the file and what is wrong.
// Gzipped files are read through zlib, loaded at run time (dlopen of libz.so.1), so nothing extra
// is needed to build; without zlib, gunzip the files and the raw ones are read instead.
//
// course: header
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mnist {

struct IdxError : std::runtime_error {
  explicit IdxError(const std::string& what) : std::runtime_error(what) {}
};

// The four files and their counts. Images are 28x28 uint8, labels uint8 in 0..9.
constexpr int kRows = 28, kCols = 28, kPixels = kRows * kCols;
constexpr uint32_t kImageMagic = 0x00000803;  // unsigned byte data, 3 dimensions
constexpr uint32_t kLabelMagic = 0x00000801;  // unsigned byte data, 1 dimension

struct Split {
  std::vector<uint8_t> images;  // count * 784 pixels, image after image, row after row
  std::vector<uint8_t> labels;  // count labels
  int count = 0;
};

// --- reading a whole file, gzipped or not ------------------------------------------------------

namespace detail {

// The four zlib functions we need, looked up once in libz.so.1 (gzread also reads raw files).
struct Zlib {
  using GzOpen = void* (*)(const char*, const char*);
  using GzRead = int (*)(void*, void*, unsigned);
  using GzError = const char* (*)(void*, int*);
  using GzClose = int (*)(void*);
  GzOpen open = nullptr;
  GzRead read = nullptr;
  GzError error = nullptr;
  GzClose close = nullptr;
  bool ok = false;

  template <typename F>
  static F lookup(void* lib, const char* name) {
    F f = nullptr;
    void* p = dlsym(lib, name);
    std::memcpy(&f, &p, sizeof(f));  // object pointer -> function pointer, without a cast warning
    return f;
  }
  Zlib() {
    void* lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    open = lookup<GzOpen>(lib, "gzopen");
    read = lookup<GzRead>(lib, "gzread");
    error = lookup<GzError>(lib, "gzerror");
    close = lookup<GzClose>(lib, "gzclose");
    ok = open && read && error && close;
  }
  static const Zlib& get() {
    static const Zlib z;
    return z;
  }
};

inline bool file_exists(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return f.good();
}

inline std::vector<uint8_t> read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IdxError(path + ": cannot open");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline std::vector<uint8_t> read_gzip(const std::string& path) {
  const Zlib& z = Zlib::get();
  if (!z.ok)
    throw IdxError(path + ": is gzipped, and zlib (libz.so.1) could not be loaded; gunzip the file and retry");
  void* f = z.open(path.c_str(), "rb");
  if (!f) throw IdxError(path + ": cannot open");
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    const int got = z.read(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got > 0) out.insert(out.end(), chunk.begin(), chunk.begin() + got);
    int errnum = 0;
    const char* msg = z.error(f, &errnum);
    if (got < 0 || errnum != 0) {  // Z_OK is 0; a cut-off file reports "unexpected end of file"
      const std::string why = msg ? msg : "unknown zlib error";
      z.close(f);
      throw IdxError(path + ": gzip data is damaged or truncated (" + why + "); download the file again");
    }
    if (got == 0) break;
  }
  z.close(f);
  return out;
}

}  // namespace detail

// The whole decompressed content of `path`: gzip is recognised by its first two bytes (1f 8b).
inline std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> head = detail::read_raw(path);
  if (head.size() >= 2 && head[0] == 0x1f && head[1] == 0x8b) return detail::read_gzip(path);
  return head;
}

// --8<-- [start:read_idx]
// Reads an IDX file and checks it: the magic number, the number of dimensions and each size, and
// that the data is exactly as long as the header says. Returns the data bytes after the header.
inline std::vector<uint8_t> read_idx(const std::string& path, uint32_t magic,
                                     const std::vector<uint32_t>& dims) {
  const std::vector<uint8_t> bytes = read_file(path);
  auto be32 = [&](size_t at) {  // IDX integers are big-endian
    return (uint32_t(bytes[at]) << 24) | (uint32_t(bytes[at + 1]) << 16) | (uint32_t(bytes[at + 2]) << 8) |
           uint32_t(bytes[at + 3]);
  };
  const size_t header = 4 + 4 * dims.size();
  if (bytes.size() < header)
    throw IdxError(path + ": " + std::to_string(bytes.size()) + " bytes, too short for an IDX header");
  char buf[160];
  if (be32(0) != magic) {
    std::snprintf(buf, sizeof(buf), ": magic number 0x%08x, expected 0x%08x (wrong file?)", be32(0), magic);
    throw IdxError(path + buf);
  }
  size_t expected = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    const uint32_t got = be32(4 + 4 * d);
    if (got != dims[d]) {
      std::snprintf(buf, sizeof(buf), ": dimension %zu is %u, expected %u", d, got, dims[d]);
      throw IdxError(path + buf);
    }
    expected *= dims[d];
  }
  if (bytes.size() - header != expected) {
    std::snprintf(buf, sizeof(buf), ": %zu data bytes, expected %zu (%s)", bytes.size() - header, expected,
                  bytes.size() - header < expected ? "truncated" : "trailing bytes");
    throw IdxError(path + buf);
  }
  return std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
}
// --8<-- [end:read_idx]

// `dir/name.gz` if it exists, else `dir/name`; the error lists both when neither does.
inline std::string find_file(const std::string& dir, const std::string& name) {
  const std::string gz = dir + "/" + name + ".gz", raw = dir + "/" + name;
  if (detail::file_exists(gz)) return gz;
  if (detail::file_exists(raw)) return raw;
  throw IdxError(name + ": not found (looked for " + gz + " and " + raw +
                 "); set --data-dir or MNIST_DIR to the folder holding the MNIST files");
}

// --8<-- [start:load_split]
// One split: prefix "train" (60000 images) or "t10k" (10000 images).
inline Split load_split(const std::string& dir, const std::string& prefix, uint32_t count) {
  Split s;
  s.count = static_cast<int>(count);
  s.images = read_idx(find_file(dir, prefix + "-images-idx3-ubyte"), kImageMagic, {count, kRows, kCols});
  const std::string label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  s.labels = read_idx(label_path, kLabelMagic, {count});
  for (size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] > 9)
      throw IdxError(label_path + ": label " + std::to_string(s.labels[i]) + " at index " + std::to_string(i) +
                     " is outside 0..9");
  return s;
}
// --8<-- [end:load_split]

// The data folder: the --data-dir argument if given, else $MNIST_DIR, else data/mnist.
inline std::string data_dir(const char* arg) {
  if (arg && *arg) return arg;
  const char* env = std::getenv("MNIST_DIR");
  if (env && *env) return env;
  return "data/mnist";
}

}  // namespace mnist
