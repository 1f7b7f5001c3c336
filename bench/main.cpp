// posenc_bench: Google Benchmark main with a summary of in-run ratios (see summary.hpp).

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// A label's fields: "baseline=<id>" and any number of ratios, each "ratio_to=<id>" followed by
/// its "floor=" and "metric=" (summary.hpp).
struct RatioSpec {
  std::string to;
  double floor = 0.0;
  std::string metric = "bytes_per_second";
};

struct Label {
  std::string baseline;
  std::vector<RatioSpec> ratios;
};

Label parse_label(const std::string& text) {
  Label label;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    const auto eq = token.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
    if (key == "baseline") {
      label.baseline = value;
    } else if (key == "ratio_to") {
      label.ratios.push_back(RatioSpec{value});
    } else if (key == "floor" && !label.ratios.empty()) {
      label.ratios.back().floor = std::stod(value);
    } else if (key == "metric" && !label.ratios.empty()) {
      label.ratios.back().metric = value;
    }
  }
  return label;
}

double metric_of(const benchmark::BenchmarkReporter::Run& run, const std::string& metric) {
  const auto it = run.counters.find(metric);
  return it == run.counters.end() ? 0.0 : static_cast<double>(it->second.value);
}

class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      runs_.push_back(run);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::map<std::string, const Run*> baselines;
    for (const Run& run : runs_) {
      const Label label = parse_label(run.report_label);
      if (!label.baseline.empty()) baselines[label.baseline] = &run;
    }
    std::printf("\n=== posenc in-run ratios (kernel rate / baseline rate, same process) ===\n");
    std::printf("%-62s %-28s %8s %7s %-12s %s\n", "benchmark", "baseline", "ratio", "floor", "",
                "paired");
    int below = 0;
    for (const Run& run : runs_) {
      // A benchmark that timed its baseline back to back with the kernel reports that ratio
      // as a paired_* counter: the steadier figure on a shared machine.
      std::string paired;
      for (const auto& [name, counter] : run.counters) {
        if (name.rfind("paired_", 0) == 0) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(counter.value));
          paired = buf;
        }
      }
      // The paired figure belongs to the label's first ratio (its paired reference).
      const std::vector<RatioSpec> ratios = parse_label(run.report_label).ratios;
      for (std::size_t i = 0; i < ratios.size(); ++i) {
        const RatioSpec& spec = ratios[i];
        const auto base = baselines.find(spec.to);
        if (base == baselines.end()) {
          std::printf("%-62s %-28s %8s (baseline not run)\n", run.benchmark_name().c_str(),
                      spec.to.c_str(), "-");
          continue;
        }
        const double denom = metric_of(*base->second, spec.metric);
        const double ratio = denom > 0.0 ? metric_of(run, spec.metric) / denom : 0.0;
        const bool ok = ratio >= spec.floor;
        below += ok ? 0 : 1;
        std::printf("%-62s %-28s %8.3f %7.2f %-12s %s\n", run.benchmark_name().c_str(),
                    spec.to.c_str(), ratio, spec.floor, ok ? "ok" : "BELOW FLOOR",
                    i == 0 ? paired.c_str() : "");
      }
    }
    std::printf("%d ratio(s) below their floor\n", below);
  }

 private:
  std::vector<Run> runs_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
