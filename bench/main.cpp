// posenc_bench: Google Benchmark main with a summary of in-run ratios (see summary.hpp).

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::map<std::string, std::string> parse_label(const std::string& label) {
  std::map<std::string, std::string> fields;
  std::istringstream in(label);
  std::string token;
  while (in >> token) {
    const auto eq = token.find('=');
    if (eq != std::string::npos) fields[token.substr(0, eq)] = token.substr(eq + 1);
  }
  return fields;
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
      const auto fields = parse_label(run.report_label);
      if (auto it = fields.find("baseline"); it != fields.end()) baselines[it->second] = &run;
    }
    std::printf("\n=== posenc in-run ratios (kernel rate / baseline rate, same process) ===\n");
    std::printf("%-62s %-28s %8s %7s %-12s %s\n", "benchmark", "baseline", "ratio", "floor", "",
                "paired");
    int below = 0;
    for (const Run& run : runs_) {
      const auto fields = parse_label(run.report_label);
      const auto to = fields.find("ratio_to");
      if (to == fields.end()) continue;
      const std::string metric = fields.count("metric") ? fields.at("metric") : "bytes_per_second";
      const double floor = fields.count("floor") ? std::stod(fields.at("floor")) : 0.0;
      const auto base = baselines.find(to->second);
      if (base == baselines.end()) {
        std::printf("%-62s %-28s %8s (baseline not run)\n", run.benchmark_name().c_str(),
                    to->second.c_str(), "-");
        continue;
      }
      const double denom = metric_of(*base->second, metric);
      const double ratio = denom > 0.0 ? metric_of(run, metric) / denom : 0.0;
      const bool ok = ratio >= floor;
      below += ok ? 0 : 1;
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
      std::printf("%-62s %-28s %8.3f %7.2f %-12s %s\n", run.benchmark_name().c_str(),
                  to->second.c_str(), ratio, floor, ok ? "ok" : "BELOW FLOOR", paired.c_str());
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
