// bench_fields.cuh: course::print_bench with extra whole-number fields a chapter plots or tabulates,
// e.g. {{"size", 4096}, {"workspace_bytes", ws}}, appended to the same BENCH line.
// It sits beside course.cuh rather than in it only because any change to course.cuh makes every
// program's GPU record stale; fold it into course.cuh's print_bench at the next full re-verification.
#pragma once

#include <cstdio>
#include <initializer_list>

#include "course.cuh"

namespace course {

// --8<-- [start:bench]
struct BenchField {
  template <typename Number>  // any integer or floating type, without a narrowing cast at the call
  BenchField(const char* field_name, Number field_value) : name(field_name), value(static_cast<double>(field_value)) {}
  const char* name;
  double value;  // printed as a whole number
};

inline void print_bench(const char* case_name, const char* impl, double time_ms, double bytes, double flops,
                        bool peer, std::initializer_list<BenchField> extra) {
  std::printf(
      "BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %.0f, \"flops\": %.0f, "
      "\"peer\": %s",
      case_name, impl, time_ms, bytes, flops, peer ? "true" : "false");
  for (const BenchField& field : extra) std::printf(", \"%s\": %.0f", field.name, field.value);
  std::printf("}\n");
  std::fflush(stdout);
}
// --8<-- [end:bench]

}  // namespace course
