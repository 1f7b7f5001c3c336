// Learned absolute positions and their hard length limit (seed article §3.1).
//
//   h_i = e_i + P[i],  P: [max_positions, d] trained with the model
//
// Seed example: e0 = [0.2, 0.1], e1 = [0.7, 0.3], p0 = [0.0, 0.4], p1 = [0.5, 0.1]
//   -> h0 = [0.2, 0.5], h1 = [1.2, 0.4].
// expect: h0 = [0.2, 0.5]  h1 = [1.2, 0.4]
// expect: embeddings unchanged after the throw: yes
// A position >= max_positions has no row: posenc throws std::out_of_range and writes nothing.
// Extending the table makes room, but the new rows are untrained.
//
// Vision encoders resample a 2-D grid of learned positions instead (PyTorch's bicubic
// interpolate, Keys' cubic A = -0.75: W(0.25) = 0.87890625, W(0.75) = 0.26171875,
// W(1.25) = -0.10546875, W(1.75) = -0.03515625). A 1 x 2 grid [0, 1] to 1 x 4 samples
// x = -0.25, 0.25, 0.75, 1.25 with the taps clamped to the grid: W(1.25) = -0.1055,
// W(0.75) + W(1.75) = 0.2266, W(0.25) + W(1.25) = 0.7734, W(0.25) + W(0.75) + W(1.75) = 1.1055.
// expect: bicubic 1x2 -> 1x4: [-0.1055, 0.2266, 0.7734, 1.1055]

#include <cstdio>
#include <string>
#include <stdexcept>
#include <vector>

#include <posenc/learned.hpp>
#include <posenc/learned_grid.hpp>

int main() {
  std::vector<float> emb{0.2f, 0.1f, 0.7f, 0.3f};  // [batch 1, seq 2, d 2]
  const std::vector<float> weights{0.0f, 0.4f, 0.5f, 0.1f};  // [max_positions 2, d 2]
  const auto table = posenc::LearnedPositionTable<float>::view(
      posenc::ConstTensorView<float, 2>(weights.data(), 2, 2));

  const std::vector<std::int64_t> ids{0, 1};
  table.add_inplace(posenc::TensorView<float, 3>(emb.data(), 1, 2, 2),
                    posenc::PositionIdsView(ids.data(), 1, 2));
  std::printf("h0 = [%.1f, %.1f]  h1 = [%.1f, %.1f]\n", emb[0], emb[1], emb[2], emb[3]);

  // Position 2 is past the table of 2 rows.
  const std::vector<std::int64_t> too_far{1, 2};
  const auto before = emb;
  try {
    table.add_inplace(posenc::TensorView<float, 3>(emb.data(), 1, 2, 2),
                      posenc::PositionIdsView(too_far.data(), 1, 2));
  } catch (const std::out_of_range& e) {
    std::printf("out_of_range: %s\n", e.what());
  }
  std::printf("embeddings unchanged after the throw: %s\n", emb == before ? "yes" : "no");

  // Extend to 4 rows: rows 2 and 3 exist now, but they were never trained.
  const auto longer = table.extend(4, posenc::LearnedExtendInit::kRepeatLast);
  std::vector<float> looked_up(4);
  longer.lookup(posenc::PositionIdsView(too_far.data(), 1, 2),
                posenc::TensorView<float, 3>(looked_up.data(), 1, 2, 2));
  std::printf("extended table (policy %s): P[1] = [%.1f, %.1f], P[2] = [%.1f, %.1f] (untrained copy)\n",
              std::string(posenc::to_string(posenc::LearnedExtendInit::kRepeatLast)).c_str(),
              looked_up[0], looked_up[1], looked_up[2], looked_up[3]);

  const std::vector<float> grid{0.0f, 1.0f};  // [1 x 2 cells, d 1]
  std::vector<float> resized(4);
  posenc::resize_learned_grid<float>(posenc::ConstTensorView<float, 2>(grid.data(), 2, 1), 1, 2,
                                     posenc::TensorView<float, 2>(resized.data(), 4, 1), 1, 4);
  std::printf("bicubic 1x2 -> 1x4: [%.4f, %.4f, %.4f, %.4f]\n", resized[0], resized[1], resized[2],
              resized[3]);
  return 0;
}
