#pragma once
// In-run ratios. A benchmark declares what it is compared against through its label:
//   baseline:  state.SetLabel(posenc_bench::baseline_label("stream_rmw/67108864"));
//   kernel:    state.SetLabel(posenc_bench::ratio_label("stream_rmw/67108864", 0.70));
// main.cpp's reporter divides the kernel's rate by the baseline's rate from the same run and
// prints the ratio next to the floor. The metric is bytes_per_second unless a counter name is
// given (e.g. "GFLOP/s"), in which case both benchmarks must set that counter.

#include <string>

namespace posenc_bench {

inline std::string baseline_label(const std::string& id) { return "baseline=" + id; }

inline std::string ratio_label(const std::string& baseline_id, double floor,
                               const std::string& metric = "bytes_per_second") {
  return "ratio_to=" + baseline_id + " floor=" + std::to_string(floor) + " metric=" + metric;
}

}  // namespace posenc_bench
