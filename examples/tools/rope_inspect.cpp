// rope-inspect: what a Hugging Face config.json, or a GGUF model file, does to RoPE at a target
// context length.
//
//   rope-inspect config.json|model.gguf [--length N] [--json] [--svg plot.svg]
//                                       [--layout interleaved|half_split]
//
// A file that starts with the GGUF magic is read with posenc::load_gguf_config (its header and
// RoPE factor tensors only, not the weights), anything else as config.json.
// Prints the plan (rope_type, layout, head_dim / rotary_dim, theta, attention factor, softmax
// multiplier), then per frequency pair: inv_freq before and after scaling, wavelength
// 2 pi / inv_freq in tokens, how many full periods the pre-training length L0 covers, what the
// recipe does to the pair (kept / interpolated / blended) and whether its angles at the target
// length were seen in pre-training. Then the three lengths of seed 000 §7 (accepted by the
// config, computable, covered by training = L0 x factor) and plain warnings.
// --json writes the same as one JSON object; --svg writes a log-scale plot of the per-pair
// wavelength before and after scaling with L0 and the target marked (no plotting library).
// Exit status: 0 ok, 1 config rejected / unreadable, 2 usage error.

#include <posenc/diagnostics.hpp>
#include <posenc/gguf_config.hpp>
#include <posenc/hf_config.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string config;
  std::int64_t length = 0;  // 0 = max_position_embeddings
  bool json = false;
  std::string svg;
  std::optional<posenc::RopeLayout> layout;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rope-inspect: " << why << "\n"
            << "usage: rope-inspect config.json|model.gguf [--length N] [--json] [--svg plot.svg]\n"
            << "                    [--layout interleaved|half_split]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(s + " needs a value");
      return argv[++i];
    };
    if (s == "--length") {
      const std::string v = value();
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || errno == ERANGE || n < 1) {
        usage("--length must be an integer in [1, " + std::to_string(LLONG_MAX) + "], not " + v);
      }
      a.length = n;
    } else if (s == "--json") {
      a.json = true;
    } else if (s == "--svg") {
      a.svg = value();
    } else if (s == "--layout") {
      const std::string v = value();
      if (v == "interleaved") a.layout = posenc::RopeLayout::kInterleaved;
      else if (v == "half_split") a.layout = posenc::RopeLayout::kHalfSplit;
      else usage("--layout must be interleaved or half_split");
    } else if (s == "-h" || s == "--help") {
      usage("help");
    } else if (!s.empty() && s[0] == '-') {
      usage("unknown option " + s);
    } else if (a.config.empty()) {
      a.config = s;
    } else {
      usage("more than one config file given");
    }
  }
  if (a.config.empty()) usage("no config.json or GGUF file given");
  return a;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string num(double v) { return fmt("%.6g", v); }

// The absolute table a model adds, for the text report: its kind, formula and reach.
std::string absolute_summary(const posenc::HfModelConfig& c) {
  using posenc::HfAbsoluteKind;
  std::ostringstream o;
  const posenc::HfAbsolutePositions a = c.absolute.value_or(posenc::HfAbsolutePositions{});
  const std::string limit = c.max_position_embeddings > 0
                                ? std::to_string(c.max_position_embeddings)
                                : std::string("not given");
  const std::string lead = " after " + std::to_string(a.leading_rows) + " leading row" +
                           (a.leading_rows == 1 ? "" : "s");
  const std::string grid = a.grid_h > 0 ? std::to_string(a.grid_h) + " x " +
                                              std::to_string(a.grid_w) + " patch grid"
                                        : std::string("patch grid (size not given)");
  switch (a.kind) {
    case HfAbsoluteKind::kLearned:
      o << "a learned absolute table (hard limit " << limit << ")";
      if (c.absolute_position_offset > 0) {
        o << ", rows read at position + " << c.absolute_position_offset;
      }
      if (a.encoder_sinusoidal) {
        o << "; the encoder's: fixed sinusoids, layout "
          << posenc::to_string(a.encoder_sinusoidal->layout);
        if (a.encoder_max_positions > 0) o << ", " << a.encoder_max_positions << " rows";
      }
      break;
    case HfAbsoluteKind::kSinusoidal:
      o << "fixed sinusoids, ";
      if (a.sinusoidal) {
        o << "layout " << posenc::to_string(a.sinusoidal->layout) << ", base "
          << a.sinusoidal->base;
      } else {
        o << "formula not given by the config";
      }
      if (c.absolute_position_offset > 0) {
        o << ", position p encoded as p + " << c.absolute_position_offset;
      }
      if (c.max_position_embeddings > 0) {
        o << " (any position here; max_position_embeddings " << c.max_position_embeddings
          << ")";
      }
      break;
    case HfAbsoluteKind::kLearnedGrid:
      o << "a learned " << grid << lead
        << " (resize_learned_grid for other resolutions)";
      break;
    case HfAbsoluteKind::kSincosGrid:
      o << "a fixed sin-cos " << grid << lead
        << ", widths " << a.embed_dim << " (encoder) and " << a.decoder_embed_dim
        << " (decoder) (sincos_grid_mae)";
      break;
  }
  return o.str();
}

/// Scaling parameters of a plan, in config words.
std::string scaling_summary(const posenc::RopeParams& p) {
  const auto& s = p.scaling;
  std::ostringstream o;
  o << posenc::to_string(s.type);
  switch (s.type) {
    case posenc::RopeScalingType::kDefault: break;
    case posenc::RopeScalingType::kLinear:
    case posenc::RopeScalingType::kNtk: o << " (factor " << num(s.factor) << ")"; break;
    case posenc::RopeScalingType::kDynamic:
      o << " (factor " << num(s.factor) << ", L0 "
        << (s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings
                                                   : p.max_position_embeddings)
        << ")";
      break;
    case posenc::RopeScalingType::kYarn:
      o << " (factor " << num(s.factor) << ", original " << s.original_max_position_embeddings
        << ", beta_fast " << num(s.beta_fast) << ", beta_slow " << num(s.beta_slow);
      if (s.mscale != 0.0 || s.mscale_all_dim != 0.0) {
        o << ", mscale " << num(s.mscale) << ", mscale_all_dim " << num(s.mscale_all_dim);
      }
      o << ")";
      break;
    case posenc::RopeScalingType::kLlama3:
      o << " (factor " << num(s.factor) << ", low_freq_factor " << num(s.low_freq_factor)
        << ", high_freq_factor " << num(s.high_freq_factor) << ", original "
        << s.original_max_position_embeddings << ")";
      break;
    case posenc::RopeScalingType::kLongRope:
      o << " (" << s.short_factor.size() << "-entry short/long factor lists, original "
        << s.original_max_position_embeddings << ")";
      break;
    case posenc::RopeScalingType::kVllmNtk:
      o << " (factor " << num(s.factor);
      if (s.mixed_b) o << ", mixed_b " << num(*s.mixed_b);
      o << ")";
      break;
    case posenc::RopeScalingType::kProportional: {
      const auto plan = posenc::compute_rope_frequencies(p);
      const auto turning = std::count_if(plan.inv_freq.begin(), plan.inv_freq.end(),
                                         [](double w) { return w != 0.0; });
      o << " (partial_rotary_factor " << num(p.partial_rotary_factor) << ": " << turning
        << " of " << plan.inv_freq.size() << " pairs turn, factor " << num(s.factor) << ")";
      break;
    }
  }
  if (!s.freq_factors.empty()) {
    o << " + per-pair freq_factors (ggml rope_freqs, " << s.freq_factors.size() << " pairs, "
      << num(*std::min_element(s.freq_factors.begin(), s.freq_factors.end())) << " to "
      << num(*std::max_element(s.freq_factors.begin(), s.freq_factors.end())) << ")";
  }
  return o.str();
}

// ---- text report --------------------------------------------------------------------------

void print_layer(std::ostream& out, const posenc::HfModelConfig& c, const posenc::HfLayerRope& lr,
                 const posenc::RopeLengthReport& rep) {
  const auto& p = lr.params;
  const auto& f = rep.plan;
  out << "\n== layer type " << lr.layer_type;
  if (lr.num_layers > 0) out << " (" << lr.num_layers << " layers)";
  out << "\n";
  out << "rope_type            " << scaling_summary(p) << "\n";
  out << "layout               " << posenc::to_string(p.layout) << "  (" << c.layout_reason
      << ")\n";
  out << "head_dim             " << p.head_dim << "\n";
  out << "rotary_dim           " << f.rotary_dim << " (" << f.inv_freq.size() << " pairs)\n";
  out << "theta                " << num(p.theta) << "\n";
  out << "attention factor     " << num(f.attention_factor) << "  (multiplies cos and sin)\n";
  out << "softmax multiplier   " << num(f.softmax_scale_multiplier) << "\n";

  out << "\nlengths\n";
  out << "  accepted by config (max_position_embeddings)  "
      << (rep.accepted_length > 0 ? std::to_string(rep.accepted_length) : "not given") << "\n";
  out << "  computable (positions exact in double, 2^53)  " << rep.computable_length << "\n";
  out << "  trained (L0)                                  " << rep.trained_length << "\n";
  std::string covered = "  covered by training (L0 x factor " + num(rep.factor) + ")";
  covered.resize(std::max<std::size_t>(covered.size() + 1, 48), ' ');
  out << covered << num(rep.covered_length) << "\n";
  out << "  target                                        " << rep.target_length << "\n";

  out << "\npairs (wavelength = 2 pi / inv_freq in tokens; periods = L0 / wavelength before)\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %4s  %12s  %12s  %12s  %12s  %10s  %-12s  %s\n", "j",
                "inv_freq", "inv_freq", "wavelength", "wavelength", "periods", "scaling",
                "at target");
  out << line;
  std::snprintf(line, sizeof line, "  %4s  %12s  %12s  %12s  %12s  %10s  %-12s  %s\n", "",
                "before", "after", "before", "after", "in L0", "", "");
  out << line;
  int kept = 0, blended = 0, interp = 0, still = 0;
  for (const auto& pr : rep.pairs) {
    std::snprintf(line, sizeof line, "  %4ld  %12.6g  %12.6g  %12.6g  %12.6g  %10.4g  %-12s  %s\n",
                  static_cast<long>(pr.pair), pr.inv_freq_before, pr.inv_freq_after,
                  pr.wavelength_before, pr.wavelength_after, pr.periods_in_training,
                  pr.inv_freq_after == 0.0 ? "not rotated"
                                           : std::string(posenc::to_string(pr.scaling)).c_str(),
                  std::string(posenc::to_string(pr.range)).c_str());
    out << line;
    still += pr.inv_freq_after == 0.0;
    kept += pr.scaling == posenc::RopePairScaling::kKept && pr.inv_freq_after != 0.0;
    blended += pr.scaling == posenc::RopePairScaling::kBlended;
    interp += pr.scaling == posenc::RopePairScaling::kInterpolated;
  }
  out << "summary: " << kept << " kept, " << blended << " blended, " << interp
      << " interpolated";
  if (still > 0) out << ", " << still << " not rotated (inv_freq 0)";
  out << "; " << rep.unseen_pairs << " of " << rep.pairs.size()
      << " pairs reach angles never seen in training at length " << rep.target_length << "\n";
  out << "\nwarnings\n";
  if (rep.warnings.empty()) out << "  (none)\n";
  for (const auto& w : rep.warnings) out << "  - " << w << "\n";
}

// ---- JSON report --------------------------------------------------------------------------

nlohmann::json layer_json(const posenc::HfModelConfig& c, const posenc::HfLayerRope& lr,
                          const posenc::RopeLengthReport& rep) {
  const auto& p = lr.params;
  nlohmann::json j;
  j["layer_type"] = lr.layer_type;
  j["num_layers"] = lr.num_layers;
  j["rope_type"] = std::string(posenc::to_string(p.scaling.type));
  j["layout"] = std::string(posenc::to_string(p.layout));
  j["layout_reason"] = c.layout_reason;
  j["head_dim"] = p.head_dim;
  j["rotary_dim"] = rep.plan.rotary_dim;
  j["theta"] = p.theta;
  j["factor"] = rep.factor;
  j["attention_factor"] = rep.plan.attention_factor;
  j["softmax_scale_multiplier"] = rep.plan.softmax_scale_multiplier;
  if (!p.scaling.freq_factors.empty()) j["freq_factors"] = p.scaling.freq_factors;
  j["lengths"] = {{"accepted", rep.accepted_length},
                  {"computable", rep.computable_length},
                  {"trained", rep.trained_length},
                  {"covered", rep.covered_length},
                  {"target", rep.target_length}};
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& pr : rep.pairs) {
    pairs.push_back({{"j", pr.pair},
                     {"inv_freq_before", pr.inv_freq_before},
                     {"inv_freq_after", pr.inv_freq_after},
                     {"wavelength_before", pr.wavelength_before},
                     {"wavelength_after", pr.wavelength_after},
                     {"periods_in_training", pr.periods_in_training},
                     {"rotated", pr.inv_freq_after != 0.0},  // wavelengths of still pairs: null
                     {"scaling", std::string(posenc::to_string(pr.scaling))},
                     {"at_target", std::string(posenc::to_string(pr.range))}});
  }
  j["pairs"] = std::move(pairs);
  j["unseen_pairs"] = rep.unseen_pairs;
  j["warnings"] = rep.warnings;
  return j;
}

// ---- SVG plot -----------------------------------------------------------------------------

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string tick_label(int e) {
  static const char* small[] = {"1", "10", "100", "1k", "10k", "100k", "1M", "10M", "100M"};
  if (e >= 0 && e <= 8) return small[e];
  return "1e" + std::to_string(e);
}

/// Log-scale wavelength per pair, before (grey) and after (blue) scaling; horizontal lines at
/// L0 (red), L0 x factor (orange) and the target (green); a strip of squares under the x axis
/// colours each pair by where its angles at the target fall.
std::string make_svg(const posenc::HfModelConfig& c, const posenc::HfLayerRope& lr,
                     const posenc::RopeLengthReport& rep) {
  const double W = 900, H = 600, left = 80, right = 190, top = 60, bottom = 90;
  const double pw = W - left - right, ph = H - top - bottom;
  double lo = 1e300, hi = 0;
  // Pairs that never turn (proportional RoPE's tail) have an infinite wavelength: not drawn.
  const auto turns = [](const posenc::RopePairReport& p) { return std::isfinite(p.wavelength_after); };
  for (const auto& p : rep.pairs) {
    if (!turns(p)) continue;
    lo = std::min({lo, p.wavelength_before, p.wavelength_after});
    hi = std::max({hi, p.wavelength_before, p.wavelength_after});
  }
  for (double v : {static_cast<double>(rep.trained_length), static_cast<double>(rep.target_length),
                   rep.covered_length}) {
    if (v > 0) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  const int e_lo = static_cast<int>(std::floor(std::log10(lo)));
  const int e_hi = std::max(e_lo + 1, static_cast<int>(std::ceil(std::log10(hi))));
  const auto n = static_cast<double>(rep.pairs.size());
  const auto X = [&](double j) { return left + (n <= 1 ? 0.5 : j / (n - 1)) * pw; };
  const auto Y = [&](double v) {
    return top + ph - (std::log10(v) - e_lo) / static_cast<double>(e_hi - e_lo) * ph;
  };
  std::ostringstream s;
  s.precision(6);
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const std::string model = c.model_type.empty() ? std::string("model") : c.model_type;
  s << "<text x=\"" << left << "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">"
    << xml_escape(model + " - " + std::string(posenc::to_string(lr.params.scaling.type)) +
                  " RoPE, layer type " + lr.layer_type)
    << "</text>\n";
  s << "<text x=\"" << left << "\" y=\"44\" fill=\"#444\">wavelength 2&#960;/inv_freq per pair "
    << "(tokens, log scale), theta " << num(lr.params.theta) << ", rotary_dim "
    << rep.plan.rotary_dim << ", target " << rep.target_length << "</text>\n";
  // Grid and y labels.
  for (int e = e_lo; e <= e_hi; ++e) {
    const double y = Y(std::pow(10.0, e));
    s << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + pw << "\" y2=\"" << y
      << "\" stroke=\"#ddd\"/>\n";
    s << "<text x=\"" << left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
      << tick_label(e) << "</text>\n";
  }
  s << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  // x ticks every 8 pairs.
  for (std::size_t j = 0; j < rep.pairs.size(); j += 8) {
    const double x = X(static_cast<double>(j));
    s << "<text x=\"" << x << "\" y=\"" << top + ph + 16 << "\" text-anchor=\"middle\">" << j
      << "</text>\n";
  }
  s << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 20
    << "\" text-anchor=\"middle\">frequency pair j (high frequency left, low right)</text>\n";
  s << "<text transform=\"translate(18," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">wavelength (tokens)</text>\n";
  // Reference lengths.
  struct Ref {
    double v;
    const char* color;
    std::string label;
  };
  std::vector<Ref> refs;
  if (rep.trained_length > 0) {
    refs.push_back({static_cast<double>(rep.trained_length), "#d62728",
                    "trained L0 = " + std::to_string(rep.trained_length)});
  }
  if (rep.factor > 1.0 && rep.trained_length > 0) {
    refs.push_back({rep.covered_length, "#ff7f0e", "L0 x factor = " + num(rep.covered_length)});
  }
  refs.push_back({static_cast<double>(rep.target_length), "#2ca02c",
                  "target = " + std::to_string(rep.target_length)});
  double last_label_y = -100;
  for (const auto& r : refs) {
    const double y = Y(r.v);
    s << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + pw << "\" y2=\"" << y
      << "\" stroke=\"" << r.color << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";
    double ly = y + 4;
    if (std::abs(ly - last_label_y) < 14) ly = last_label_y - 14;
    s << "<text x=\"" << left + pw + 6 << "\" y=\"" << ly << "\" fill=\"" << r.color << "\">"
      << xml_escape(r.label) << "</text>\n";
    last_label_y = ly;
  }
  // Series.
  const auto series = [&](bool after, const char* color, double radius) {
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (const auto& p : rep.pairs) {
      if (!turns(p)) continue;
      s << X(static_cast<double>(p.pair)) << ","
        << Y(after ? p.wavelength_after : p.wavelength_before) << " ";
    }
    s << "\"/>\n";
    for (const auto& p : rep.pairs) {
      if (!turns(p)) continue;
      s << "<circle cx=\"" << X(static_cast<double>(p.pair)) << "\" cy=\""
        << Y(after ? p.wavelength_after : p.wavelength_before) << "\" r=\"" << radius
        << "\" fill=\"" << color << "\"/>\n";
    }
  };
  series(false, "#999999", 2.5);
  series(true, "#1f77b4", 2.5);
  // Status strip.
  const double strip_y = top + ph + 24;
  const double cell = std::max(2.0, pw / std::max(1.0, n) - 1.0);
  for (const auto& p : rep.pairs) {
    const char* col = p.range == posenc::RopePairRange::kWithinTraining            ? "#2ca02c"
                      : p.range == posenc::RopePairRange::kExtrapolatedSeenPhases ? "#f2c300"
                      : p.range == posenc::RopePairRange::kNotJudged             ? "#999999"
                                                                                   : "#d62728";
    s << "<rect x=\"" << X(static_cast<double>(p.pair)) - cell / 2 << "\" y=\"" << strip_y
      << "\" width=\"" << cell << "\" height=\"10\" fill=\"" << col << "\"/>\n";
  }
  // Legend.
  const double lx = left + pw + 6;
  double ly = top + ph - 110;
  const auto legend = [&](const char* color, const std::string& text, bool box) {
    if (box) {
      s << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"12\" height=\"10\" fill=\""
        << color << "\"/>\n";
    } else {
      s << "<line x1=\"" << lx << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 14 << "\" y2=\""
        << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    }
    s << "<text x=\"" << lx + 18 << "\" y=\"" << ly << "\">" << xml_escape(text) << "</text>\n";
    ly += 16;
  };
  legend("#999999", "before scaling", false);
  legend("#1f77b4", "after scaling", false);
  legend("#2ca02c", "within training", true);
  legend("#f2c300", "beyond, phases seen", true);
  legend("#d62728", "beyond, UNSEEN", true);
  s << "<text x=\"" << left << "\" y=\"" << strip_y + 24 << "\" fill=\"#444\">strip: angles at "
    << "the target vs. pre-training (" << rep.unseen_pairs << " of " << rep.pairs.size()
    << " pairs unseen)</text>\n";
  s << "</svg>\n";
  return s.str();
}

/// GGUF files start with the magic "GGUF" (ggml docs/gguf.md).
bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) == "GGUF";
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  posenc::HfConfigOptions opts;
  opts.layout = args.layout;
  posenc::HfModelConfig c;
  try {
    if (is_gguf(args.config)) {
      posenc::GgufConfigOptions gopts;
      gopts.layout = args.layout;
      c = posenc::load_gguf_config(args.config, gopts);
    } else {
      c = posenc::load_hf_config(args.config, opts);
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "rope-inspect: " << e.what() << "\n";
    return 1;
  }
  std::int64_t length = args.length;
  if (length == 0) length = c.max_position_embeddings > 0 ? c.max_position_embeddings : 131072;

  // Which layers slide, by HF's rules (posenc::hf_layer_is_sliding).
  std::vector<Eigen::Index> sliding_layers;
  for (Eigen::Index i = 0; i < c.num_hidden_layers; ++i) {
    if (posenc::hf_layer_is_sliding(c, i)) sliding_layers.push_back(i);
  }
  const bool all_slide = c.num_hidden_layers > 0 &&
                         static_cast<Eigen::Index>(sliding_layers.size()) == c.num_hidden_layers;
  // Llama-4: every layer that rotates attends within chunks of attention_chunk_size, so no
  // RoPE layer sees a distance of C or more, whatever the context (its NoPE layers see all).
  std::vector<Eigen::Index> chunked_layers;
  bool rope_layers_chunked = c.attention_chunk_size > 0 && !c.layer_types.empty();
  for (std::size_t i = 0; i < c.layer_types.size(); ++i) {
    const bool rope = c.layer_uses_rope.empty() || c.layer_uses_rope[i];
    const bool chunked = c.layer_types[i] == "chunked_attention";
    if (chunked) chunked_layers.push_back(static_cast<Eigen::Index>(i));
    if (rope && !chunked) rope_layers_chunked = false;
  }

  std::vector<posenc::RopeLengthReport> reports;
  if (c.scheme == posenc::HfPositionScheme::kRope) {
    for (const auto& lr : c.layer_ropes) {
      // A layer-type entry is judged with the window when its layers slide: typed
      // sliding_attention, or "all" when every layer slides (Mistral, Phi-3). An untyped model
      // whose layers alternate (Gemma-2) keeps one report for both kinds, without the window.
      const bool windowed =
          lr.layer_type == "sliding_attention" || (lr.layer_type == "all" && all_slide);
      const bool chunked = lr.layer_type == "chunked_attention" ||
                           (lr.layer_type == "all" && rope_layers_chunked);
      // Dual chunk attention (vLLM, Qwen2.5-1M) rotates no distance beyond chunk_size.
      const std::int64_t dca_window = c.dual_chunk ? c.dual_chunk->chunk_size + 1 : 0;
      reports.push_back(posenc::analyze_rope_length(
          lr.params, length,
          chunked ? c.attention_chunk_size
                  : windowed ? c.sliding_window : dca_window));
      if (c.dual_chunk && !chunked && !windowed && c.dual_chunk->chunk_size < length) {
        reports.back().warnings.push_back(
            "judged as vLLM runs it: dual chunk attention rotates no distance beyond "
            "chunk_size = " + std::to_string(c.dual_chunk->chunk_size) +
            "; transformers ignores dual_chunk_attention_config and rotates every distance");
      }
      if (chunked && c.attention_chunk_size < length) {
        reports.back().warnings.push_back(
            "its RoPE layers attend within chunks of attention_chunk_size = " +
            std::to_string(c.attention_chunk_size) + " (Llama-4); its NoPE layers see every "
            "distance without rotating");
      }
      if (!windowed && lr.layer_type == "all" && c.sliding_window > 0 &&
          c.sliding_window < length) {
        reports.back().warnings.push_back(
            "the config sets sliding_window = " + std::to_string(c.sliding_window) +
            " without layer_types: layers that slide see distances below it only (not assumed "
            "here)");
      }
    }
  }
  std::vector<std::string> alibi_warnings;
  if (c.scheme == posenc::HfPositionScheme::kAlibi && c.max_position_embeddings > 0 &&
      length > c.max_position_embeddings) {
    alibi_warnings.push_back("target length " + std::to_string(length) +
                             " exceeds the configured length " +
                             std::to_string(c.max_position_embeddings) +
                             ": ALiBi computes any distance, but biases beyond training were "
                             "never seen (Press et al. report extrapolation, not a guarantee)");
  }

  if (args.json) {
    nlohmann::json j;
    j["source"] = c.source;
    j["model_type"] = c.model_type;
    j["architectures"] = c.architectures;
    j["scheme"] = std::string(posenc::to_string(c.scheme));
    j["target_length"] = length;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.num_key_value_heads;
    if (c.sliding_num_key_value_heads > 0) {
      j["sliding_num_attention_heads"] = c.sliding_num_attention_heads;
      j["sliding_num_key_value_heads"] = c.sliding_num_key_value_heads;
    }
    if (!c.layer_num_attention_heads.empty()) {
      j["layer_num_attention_heads"] = c.layer_num_attention_heads;
      j["layer_num_key_value_heads"] = c.layer_num_key_value_heads;
    }
    if (!c.layer_kv_source.empty()) j["layer_kv_source"] = c.layer_kv_source;
    j["attention_head_dim"] = c.attention_head_dim;
    j["softmax_scale"] = c.softmax_scale;
    j["layer_types_per_layer"] = c.layer_types;
    j["layer_uses_rope"] = c.layer_uses_rope;
    j["sliding_window"] = c.sliding_window;
    j["mask"] = std::string(posenc::to_string(c.mask));
    j["sliding_layers"] = sliding_layers;
    j["attention_chunk_size"] = c.attention_chunk_size;
    j["chunked_layers"] = chunked_layers;
    if (c.attention_temperature) {
      const auto& t = *c.attention_temperature;
      j["attention_temperature"] = {{"form", std::string(posenc::to_string(t.form))},
                                    {"floor_scale", t.floor_scale},
                                    {"attn_scale", t.attn_scale},
                                    {"temperature_len", t.temperature_len}};
    }
    j["attn_logit_softcapping"] = c.attn_logit_softcapping;
    if (c.mrope) {
      j["mrope"] = {{"section_thw", c.mrope->section},
                    {"layout", std::string(posenc::to_string(c.mrope->layout))}};
    }
    if (c.dual_chunk) {
      j["dual_chunk_attention"] = {
          {"chunk_size", c.dual_chunk->chunk_size},
          {"local_size", c.dual_chunk->local_size},
          {"original_max_position_embeddings", c.dual_chunk->original_max_position_embeddings},
          {"length_scale_at_target", posenc::dual_chunk_scaling_factor(length, *c.dual_chunk)}};
    }
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t i = 0; i < reports.size(); ++i) {
      layers.push_back(layer_json(c, c.layer_ropes[i], reports[i]));
    }
    j["layers"] = std::move(layers);
    if (c.absolute) {
      const posenc::HfAbsolutePositions& a = *c.absolute;
      nlohmann::json ja = {{"kind", std::string(posenc::to_string(a.kind))},
                           {"position_offset", c.absolute_position_offset}};
      if (a.sinusoidal) {
        ja["layout"] = std::string(posenc::to_string(a.sinusoidal->layout));
        ja["base"] = a.sinusoidal->base;
      }
      if (a.kind == posenc::HfAbsoluteKind::kLearnedGrid ||
          a.kind == posenc::HfAbsoluteKind::kSincosGrid) {
        ja["grid_h"] = a.grid_h;
        ja["grid_w"] = a.grid_w;
        ja["leading_rows"] = a.leading_rows;
        ja["embed_dim"] = a.embed_dim;
      }
      if (a.kind == posenc::HfAbsoluteKind::kSincosGrid) {
        ja["decoder_embed_dim"] = a.decoder_embed_dim;
      }
      if (a.encoder_sinusoidal) {
        ja["encoder_layout"] = std::string(posenc::to_string(a.encoder_sinusoidal->layout));
        ja["encoder_base"] = a.encoder_sinusoidal->base;
      }
      if (a.encoder_max_positions > 0) ja["encoder_max_positions"] = a.encoder_max_positions;
      j["absolute"] = std::move(ja);
    }
    if (c.relative_bias_2d) {
      const posenc::HfRelativeBias2d& rb = *c.relative_bias_2d;
      j["relative_bias_2d"] = {{"window_h", rb.window.window_h},
                               {"window_w", rb.window.window_w},
                               {"class_token", rb.window.class_token},
                               {"table_rows", posenc::relative_bias_2d_table_rows(rb.window)},
                               {"shared_table", rb.shared_table},
                               {"per_layer_tables", rb.per_layer_tables},
                               {"per_layer_mlp", rb.per_layer_mlp}};
    }
    if (c.decomposed_rel_pos) {
      const posenc::HfDecomposedRelPos& rp = *c.decomposed_rel_pos;
      std::vector<Eigen::Index> global;
      for (std::size_t i = 0; i < rp.global_layers.size(); ++i) {
        if (rp.global_layers[i]) global.push_back(static_cast<Eigen::Index>(i));
      }
      j["decomposed_rel_pos"] = {{"grid_h", rp.grid_h},
                                 {"grid_w", rp.grid_w},
                                 {"window_size", rp.window_size},
                                 {"global_layers", global},
                                 {"global_table_rows", 2 * rp.grid_h - 1},
                                 {"window_table_rows",
                                  rp.window_size > 0 ? 2 * rp.window_size - 1 : 0}};
    }
    if (c.feature_map) {
      const posenc::HfFeatureMapPositions& fm = *c.feature_map;
      nlohmann::json jf = {{"kind", std::string(posenc::to_string(fm.kind))},
                           {"embed_dim", fm.embed_dim}};
      if (fm.kind == posenc::HfFeatureMapKind::kSincosGrid) {
        jf["temperature"] = fm.temperature;
        jf["levels"] = fm.levels;
      } else {
        jf["num_pos_feats"] = fm.sine.num_pos_feats;
        jf["order"] = std::string(posenc::to_string(fm.sine.order));
      }
      if (fm.kind == posenc::HfFeatureMapKind::kSine) {
        jf["temperature_height"] = fm.sine.temperature_height;
        jf["temperature_width"] = fm.sine.temperature_width;
        jf["offset"] = fm.sine.offset;
        jf["eps"] = fm.sine.eps;
        jf["scale"] = fm.sine.scale;
      }
      if (fm.kind == posenc::HfFeatureMapKind::kLearned) jf["learned_rows"] = fm.learned_rows;
      j["feature_map"] = std::move(jf);
    }
    if (c.swin) {
      nlohmann::json stages = nlohmann::json::array();
      for (const posenc::HfSwinStage& st : c.swin->stages) {
        stages.push_back({{"depth", st.depth},
                          {"hidden_size", st.hidden_size},
                          {"num_heads", st.num_heads},
                          {"height", st.block.height},
                          {"width", st.block.width},
                          {"window", st.block.window},
                          {"shifted_window", st.shifted_block.window},
                          {"shift", st.shifted_block.shift},
                          {"num_windows", posenc::swin_num_windows(st.shifted_block)},
                          {"table_window", st.table_window},
                          {"pretrained_window", st.pretrained_window}});
      }
      j["swin"] = {{"rule", c.swin->rule == posenc::SwinWindowRule::kSwinV2 ? "swinv2" : "swin"},
                   {"window_size", c.swin->window_size},
                   {"stages", std::move(stages)}};
    }
    if (c.scheme == posenc::HfPositionScheme::kRelativeBias) {
      j["relative_attention_num_buckets"] = c.relative_attention_num_buckets;
      j["relative_attention_max_distance"] = c.relative_attention_max_distance;
    }
    if (c.scheme == posenc::HfPositionScheme::kAlibi) {
      j["alibi_slopes"] = c.alibi_slopes;
      j["alibi_max_bias"] = c.alibi_max_bias;
      j["warnings"] = alibi_warnings;
    }
    j["notes"] = c.notes;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "rope-inspect " << c.source << " at length " << length << "\n";
    std::cout << "model_type           " << (c.model_type.empty() ? "(none)" : c.model_type);
    if (!c.architectures.empty()) std::cout << "  (" << c.architectures.front() << ")";
    std::cout << "\nposition scheme      " << posenc::to_string(c.scheme) << "\n";
    if (c.num_attention_heads > 0) {
      std::cout << "heads                " << c.num_attention_heads << " query, "
                << c.num_key_value_heads << " key/value";
      if (c.sliding_num_key_value_heads > 0) {
        std::cout << "; sliding layers " << c.sliding_num_attention_heads << " query, "
                  << c.sliding_num_key_value_heads << " key/value";
      }
      std::cout << "\n";
      if (!c.layer_num_attention_heads.empty()) {
        std::cout << "heads per layer     ";  // query/kv, 0/0 = no attention on that layer
        for (std::size_t i = 0; i < c.layer_num_attention_heads.size(); ++i) {
          std::cout << " " << c.layer_num_attention_heads[i] << "/"
                    << c.layer_num_key_value_heads[i];
        }
        std::cout << "  (query/key-value)\n";
      }
    }
    if (c.softmax_scale > 0) {
      std::cout << "softmax scale        " << num(c.softmax_scale) << "  (q.k width "
                << c.attention_head_dim << ")\n";
    }
    if (c.scheme == posenc::HfPositionScheme::kAlibi) {
      std::cout << "alibi max bias       " << num(c.alibi_max_bias) << "\nalibi slopes        ";
      for (double sl : c.alibi_slopes) std::cout << " " << num(sl);
      std::cout << "\naccepted length      "
                << (c.max_position_embeddings > 0 ? std::to_string(c.max_position_embeddings)
                                                  : std::string("not given"))
                << "\n\nwarnings\n";
      if (alibi_warnings.empty()) std::cout << "  (none)\n";
      for (const auto& w : alibi_warnings) std::cout << "  - " << w << "\n";
    } else if (c.scheme == posenc::HfPositionScheme::kAbsolute) {
      std::cout << "no RoPE or ALiBi: " << absolute_summary(c) << "\n";
    } else if (c.feature_map) {
      const posenc::HfFeatureMapPositions& fm = *c.feature_map;
      std::cout << "feature map          ";
      if (fm.kind == posenc::HfFeatureMapKind::kSincosGrid) {
        std::cout << "fixed [row | column] sin-cos table, " << fm.embed_dim
                  << " channels, temperature " << num(fm.temperature) << ", levels";
        for (const Eigen::Index l : fm.levels) std::cout << " " << l;
        std::cout << " (sincos_grid_rt_detr)\n";
      } else if (fm.kind == posenc::HfFeatureMapKind::kLearned) {
        std::cout << "learned row / column tables of " << fm.learned_rows << " x "
                  << fm.sine.num_pos_feats << ", [column | row] (learned_embedding_2d)\n";
      } else {
        std::cout << "sine of the padded map, 2 x " << fm.sine.num_pos_feats
                  << " channels [y | x], temperature " << num(fm.sine.temperature_height);
        if (fm.sine.temperature_width != fm.sine.temperature_height) {
          std::cout << " / " << num(fm.sine.temperature_width);
        }
        if (fm.sine.offset != 0.0) std::cout << ", counts less " << num(fm.sine.offset);
        std::cout << " (sine_embedding_2d)\n";
      }
    } else if (c.decomposed_rel_pos) {
      const posenc::HfDecomposedRelPos& rp = *c.decomposed_rel_pos;
      std::cout << "decomposed rel pos   global over " << rp.grid_h << " x " << rp.grid_w
                << " patches on layers";
      for (std::size_t i = 0; i < rp.global_layers.size(); ++i) {
        if (rp.global_layers[i]) std::cout << " " << i;
      }
      std::cout << " (tables of " << 2 * rp.grid_h - 1 << " rows)";
      if (rp.window_size > 0) {
        std::cout << ", " << rp.window_size << " x " << rp.window_size
                  << " windows on the others (tables of " << 2 * rp.window_size - 1 << " rows)";
      }
      std::cout << " (decomposed_rel_pos_bias)\n";
      if (c.absolute) std::cout << "also                 " << absolute_summary(c) << "\n";
    } else if (c.swin) {
      std::cout << "shifted windows      " << c.swin->stages.size() << " stages, window_size "
                << c.swin->window_size << ", every second block shifted; bias "
                << (c.relative_bias_2d->per_layer_mlp
                        ? "from each layer's MLP (continuous_position_bias_table)"
                        : "from each layer's table (swin_window_bias)")
                << "\n";
      for (std::size_t i = 0; i < c.swin->stages.size(); ++i) {
        const posenc::HfSwinStage& st = c.swin->stages[i];
        std::cout << "  stage " << i << "            " << st.depth << " blocks, " << st.num_heads
                  << " heads of " << st.hidden_size / st.num_heads << ", " << st.block.height
                  << " x " << st.block.width << " patches, " << st.block.window << " x "
                  << st.block.window << " windows (" << posenc::swin_num_windows(st.block)
                  << "), shift " << st.shifted_block.shift << ", tables of "
                  << (2 * st.table_window - 1) * (2 * st.table_window - 1) << " rows";
        if (st.pretrained_window > 0) std::cout << " (pretrained " << st.pretrained_window << ")";
        std::cout << "\n";
      }
    } else if (c.relative_bias_2d) {
      const posenc::HfRelativeBias2d& rb = *c.relative_bias_2d;
      std::cout << "2-D relative bias    " << rb.window.window_h << " x " << rb.window.window_w
                << " patch window" << (rb.window.class_token ? " after a class token" : "")
                << ", tables of " << posenc::relative_bias_2d_table_rows(rb.window) << " rows: "
                << (rb.shared_table && rb.per_layer_tables ? "shared + per layer (summed)"
                    : rb.shared_table                      ? "one shared"
                                                           : "one per layer")
                << " (relative_position_bias_2d)\n";
      if (c.absolute) std::cout << "also                 " << absolute_summary(c) << "\n";
    } else if (c.scheme == posenc::HfPositionScheme::kRelativeBias) {
      std::cout << "relative buckets     " << c.relative_attention_num_buckets
                << " up to distance " << c.relative_attention_max_distance
                << " (farther keys share the last bucket of their side)\n";
    }
    if (!c.layer_types.empty()) {
      std::cout << "layer types          " << c.layer_types.size() << " layers:";
      for (const auto& lr : c.layer_ropes) std::cout << " " << lr.num_layers << " " << lr.layer_type;
      std::cout << "\n";
    }
    if (c.mask == posenc::MaskMode::kBidirectional) {
      std::cout << "attention mask       bidirectional (an encoder: every key on both sides)\n";
    }
    if (!sliding_layers.empty()) {
      std::cout << "sliding window       " << c.sliding_window << " on " << sliding_layers.size()
                << " of " << c.num_hidden_layers << " layers\n";
    }
    if (!chunked_layers.empty()) {
      std::cout << "chunked attention    " << c.attention_chunk_size << " on "
                << chunked_layers.size() << " of " << c.layer_types.size() << " layers\n";
    }
    if (c.attention_temperature) {
      const auto& t = *c.attention_temperature;
      std::cout << "query temperature    ";
      switch (t.form) {
        case posenc::TemperatureForm::kLlama4:
          std::cout << "1 + " << num(t.attn_scale) << " ln(1 + floor((pos + 1) / "
                    << num(t.floor_scale) << ")) on the NoPE layers";
          break;
        case posenc::TemperatureForm::kMistral3:
          std::cout << "1 + " << num(t.attn_scale) << " ln(1 + floor(pos / " << num(t.floor_scale)
                    << ")) on every layer";
          break;
        case posenc::TemperatureForm::kXai:
          std::cout << "log2(pos) / log2(" << t.temperature_len << ") past " << t.temperature_len
                    << " on every layer";
          break;
      }
      std::cout << ", " << num(posenc::attention_temperature(length - 1, t))
                << " at the target's last position\n";
    }
    if (c.mrope) {
      std::cout << "M-RoPE sections      (t, h, w) = (" << c.mrope->section[0] << ", "
                << c.mrope->section[1] << ", " << c.mrope->section[2] << ") pairs, "
                << posenc::to_string(c.mrope->layout) << "\n";
    }
    if (c.dual_chunk) {
      std::cout << "dual chunk attention chunk_size " << c.dual_chunk->chunk_size << ", local_size "
                << c.dual_chunk->local_size << " (vLLM); length scale "
                << num(posenc::dual_chunk_scaling_factor(length, *c.dual_chunk))
                << " on keys and queries at the target\n";
    }
    if (c.attn_logit_softcapping > 0) {
      std::cout << "logit soft cap       " << num(c.attn_logit_softcapping) << "\n";
    }
    if (!c.layer_uses_rope.empty()) {
      const auto nope = std::count(c.layer_uses_rope.begin(), c.layer_uses_rope.end(), false);
      std::cout << "layers without RoPE  " << nope << " of " << c.layer_uses_rope.size()
                << " (NoPE: no positional rotation at all)\n";
    }
    for (std::size_t i = 0; i < reports.size(); ++i) {
      print_layer(std::cout, c, c.layer_ropes[i], reports[i]);
    }
    std::cout << "\nnotes\n";
    if (c.notes.empty()) std::cout << "  (none)\n";
    for (const auto& n : c.notes) std::cout << "  - " << n << "\n";
  }

  if (!args.svg.empty()) {
    if (reports.empty()) {
      std::cerr << "rope-inspect: --svg needs a RoPE model; " << c.source << " uses "
                << posenc::to_string(c.scheme) << "\n";
      return 1;
    }
    std::size_t main_index = 0;
    for (std::size_t i = 0; i < c.layer_ropes.size(); ++i) {
      if (c.layer_ropes[i].layer_type == "full_attention") main_index = i;
    }
    std::ofstream f(args.svg, std::ios::binary);
    f << make_svg(c, c.layer_ropes[main_index], reports[main_index]);
    if (!f) {
      std::cerr << "rope-inspect: cannot write " << args.svg << "\n";
      return 1;
    }
    if (!args.json) std::cout << "\nwrote " << args.svg << "\n";
  }
  return 0;
}
