// memory.cuh: device memory in one line each (device_alloc, to_device, to_host, device_free), and
// poison, which fills an output with NaN so that any element a kernel forgets to write fails its check.
// Taught in docs/conventions.md.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "check.cuh"

namespace course {

// --8<-- [start:memory]
// Device memory: allocate, copy in, copy out, free a list of buffers.
template <typename T>
T* device_alloc(size_t count) {
  T* ptr = nullptr;
  CUDA_CHECK(cudaMalloc(&ptr, count * sizeof(T)));
  return ptr;
}

template <typename T>
T* to_device(const std::vector<T>& host) {
  T* ptr = device_alloc<T>(host.size());
  CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return ptr;
}

template <typename T>
std::vector<T> to_host(const T* device, size_t count) {
  std::vector<T> host(count);
  CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

inline void device_free(std::initializer_list<const void*> buffers) {
  for (const void* ptr : buffers) CUDA_CHECK(cudaFree(const_cast<void*>(ptr)));
}

// Fill device memory with NaN bytes so that any element a kernel forgets to write fails the check.
inline void poison(void* device_ptr, size_t bytes) {
  CUDA_CHECK(cudaMemset(device_ptr, 0xFF, bytes));  // 0xFFFFFFFF is a NaN as float
}
// --8<-- [end:memory]

}  // namespace course
