// The GGUF container reader (posenc/gguf.hpp) against files laid out byte by byte by
// tests/support/gguf_writer.hpp from the format description.

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "posenc/gguf.hpp"
#include "support/gguf_writer.hpp"

using posenc::GgufType;
using posenc_test::GgufWriter;

namespace {

GgufWriter every_type_file(bool big_endian) {
  GgufWriter w(big_endian);
  w.str("general.architecture", "llama")
      .raw("t.u8", GgufWriter::kU8, {0xfe})
      .raw("t.i8", GgufWriter::kI8, {0x80})
      .raw("t.u16", GgufWriter::kU16, big_endian ? std::vector<unsigned char>{0xab, 0xcd}
                                                 : std::vector<unsigned char>{0xcd, 0xab})
      .raw("t.i16", GgufWriter::kI16, {0xff, 0xff})
      .u32("t.u32", 4000000000u)
      .i32("t.i32", -123456789)
      .u64("t.u64", 0xfedcba9876543210ull)
      .f32("t.f32", 0.1f)
      .f64("t.f64", -2.5e-300)
      .boolean("t.true", true)
      .boolean("t.false", false)
      .str("t.str", std::string("a\0b", 3))
      .i32_array("t.i32s", {16, -24, 24, 0})
      .f32_array("t.f32s", {1.5f, -0.25f})
      .bool_array("t.bools", {true, false, true})
      .str_array("t.strs", {"", "<s>", "x"});
  return w;
}

void check_every_type(const posenc::GgufMetadata& m) {
  CHECK(m.version == 3);
  CHECK(m.metadata.size() == 17);
  CHECK(m.metadata[0].first == "general.architecture");
  CHECK(m.get_string("general.architecture") == std::string("llama"));
  CHECK(m.get_int("t.u8") == 254);
  CHECK(m.get_int("t.i8") == -128);
  CHECK(m.get_int("t.u16") == 0xabcd);
  CHECK(m.get_int("t.i16") == -1);
  CHECK(m.get_int("t.u32") == 4000000000LL);
  CHECK(m.get_int("t.i32") == -123456789);
  CHECK(std::get<std::uint64_t>(m.find("t.u64")->values[0]) == 0xfedcba9876543210ull);
  CHECK(m.find("t.u64")->type == GgufType::kUint64);
  CHECK(m.get_float("t.f32") == static_cast<double>(0.1f));  // exactly the stored float
  CHECK(m.get_float("t.f64") == -2.5e-300);
  CHECK(m.get_float("t.u32") == 4000000000.0);  // integers are numbers too
  CHECK(m.get_bool("t.true") == true);
  CHECK(m.get_bool("t.false") == false);
  CHECK(m.get_string("t.str") == std::string("a\0b", 3));
  CHECK(m.get_int_array("t.i32s") == std::vector<std::int64_t>{16, -24, 24, 0});
  CHECK(m.get_float_array("t.i32s") == std::vector<double>{16, -24, 24, 0});
  CHECK(m.get_float_array("t.f32s") == std::vector<double>{1.5, -0.25});
  CHECK(m.get_bool_array("t.bools") == std::vector<bool>{true, false, true});
  const posenc::GgufValue* strs = m.find("t.strs");
  REQUIRE(strs != nullptr);
  CHECK(strs->type == GgufType::kArray);
  CHECK(strs->element_type == GgufType::kString);
  REQUIRE(strs->values.size() == 3);
  CHECK(std::get<std::string>(strs->values[1]) == "<s>");
  CHECK_FALSE(m.get_int("absent").has_value());
  CHECK_FALSE(m.get_float_array("absent").has_value());
}

std::string temp_path(const std::string& name) {
  return (std::string(P_tmpdir) + "/posenc_test_gguf_" + name);
}

void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("gguf: every value type round-trips, little- and big-endian", "[gguf]") {
  for (bool be : {false, true}) {
    INFO("big_endian = " << be);
    const auto bytes = every_type_file(be).bytes();
    const posenc::GgufMetadata m = posenc::parse_gguf(bytes.data(), bytes.size(), "every.gguf");
    CHECK(m.big_endian == be);
    CHECK(m.source == "every.gguf");
    check_every_type(m);
    CHECK(m.tensors.empty());
    CHECK(m.data_offset % 32 == 0);
    CHECK(m.data_offset >= bytes.size() - 31);
  }
}

TEST_CASE("gguf: version 2 files read as version 3", "[gguf]") {
  GgufWriter w(false, 2);
  w.u32("llama.context_length", 4096);
  const auto bytes = w.bytes();
  const auto m = posenc::parse_gguf(bytes.data(), bytes.size());
  CHECK(m.version == 2);
  CHECK(m.get_int("llama.context_length") == 4096);
}

TEST_CASE("gguf: the tensor directory, the data offset and F32 / F16 / BF16 values", "[gguf]") {
  for (bool be : {false, true}) {
    for (std::uint32_t alignment : {32u, 64u}) {
      INFO("big_endian = " << be << ", alignment " << alignment);
      GgufWriter w(be);
      w.str("general.architecture", "llama");
      if (alignment != 32) w.u32("general.alignment", alignment);
      // Bit patterns by hand: F16 0x3c00 = 1, 0xc000 = -2, 0x3555 = 0.333251953125,
      // 0x0001 = 2^-24 (the smallest denormal); BF16 0x3f80 = 1, 0xc0a0 = -5, 0x0001 = 2^-133.
      w.tensor("rope_freqs.weight", {3}, posenc::kGgmlTypeF32, w.f32_bytes({1.0f, 0.25f, 8.0f}))
          .tensor("blk.0.attn_q.weight", {4, 2}, posenc::kGgmlTypeF16,
                  w.u16_bytes({0x3c00, 0xc000, 0x3555, 0x0001, 0, 0, 0, 0x8000}))
          .tensor("t.bf16", {3}, posenc::kGgmlTypeBF16, w.u16_bytes({0x3f80, 0xc0a0, 0x0001}))
          .tensor("t.q4", {32}, 2, std::vector<unsigned char>(18, 0));
      const auto bytes = w.bytes(alignment);
      const auto m = posenc::parse_gguf(bytes.data(), bytes.size());
      CHECK(m.alignment == alignment);
      CHECK(m.data_offset % alignment == 0);
      REQUIRE(m.tensors.size() == 4);
      const posenc::GgufTensorInfo* q = m.find_tensor("blk.0.attn_q.weight");
      REQUIRE(q != nullptr);
      CHECK(q->shape == std::vector<std::int64_t>{4, 2});
      CHECK(q->num_elements() == 8);
      CHECK(q->ggml_type == posenc::kGgmlTypeF16);
      CHECK(q->offset == alignment);  // 12 bytes of rope_freqs, padded
      CHECK(m.find_tensor("absent") == nullptr);

      CHECK(posenc::gguf_tensor_as_float(m, "rope_freqs.weight", bytes.data(), bytes.size()) ==
            std::vector<float>{1.0f, 0.25f, 8.0f});
      CHECK(posenc::gguf_tensor_as_float(m, "blk.0.attn_q.weight", bytes.data(), bytes.size()) ==
            std::vector<float>{1.0f, -2.0f, 0.333251953125f, 0x1p-24f, 0, 0, 0, -0.0f});
      const auto bf = posenc::gguf_tensor_as_float(m, "t.bf16", bytes.data(), bytes.size());
      CHECK(bf == std::vector<float>{1.0f, -5.0f, 0x1p-133f});

      const std::string path = temp_path(std::string(be ? "be" : "le") + std::to_string(alignment));
      write_file(path, bytes);
      const auto from_file = posenc::load_gguf(path);
      CHECK(from_file.source == path);
      CHECK(from_file.data_offset == m.data_offset);
      CHECK(from_file.file_size == bytes.size());
      CHECK(posenc::read_gguf_tensor(from_file, "t.bf16", path) == bf);
      CHECK(posenc::read_gguf_tensor(from_file, "rope_freqs.weight", path) ==
            std::vector<float>{1.0f, 0.25f, 8.0f});
      REQUIRE_THROWS_AS(posenc::read_gguf_tensor(from_file, "t.q4", path), std::invalid_argument);
      REQUIRE_THROWS_WITH(posenc::read_gguf_tensor(from_file, "t.q4", path),
                          Catch::Contains("\"t.q4\" has ggml_type 2") &&
                              Catch::Contains("only F32 (0), F16 (1) and BF16 (30)"));
      REQUIRE_THROWS_WITH(posenc::read_gguf_tensor(from_file, "nope", path),
                          Catch::Contains("no tensor \"nope\""));
      std::remove(path.c_str());
    }
  }
}

TEST_CASE("gguf: a file read from disk equals the same bytes parsed in memory", "[gguf]") {
  const auto bytes = every_type_file(false).bytes();
  const std::string path = temp_path("every");
  write_file(path, bytes);
  const auto m = posenc::load_gguf(path);
  check_every_type(m);
  std::remove(path.c_str());
  REQUIRE_THROWS_AS(posenc::load_gguf(path), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::load_gguf(path), Catch::Contains("cannot open the file"));
}

TEST_CASE("gguf: every truncation of a valid file is refused, none crashes", "[gguf]") {
  GgufWriter w = every_type_file(false);
  w.tensor("rope_freqs.weight", {2}, posenc::kGgmlTypeF32, w.f32_bytes({1.0f, 2.0f}));
  const auto bytes = w.bytes();
  const auto full = posenc::parse_gguf(bytes.data(), bytes.size());
  // A cut inside the header throws; from the end of the tensor directory on (the padding and
  // the data) the header parses, and reading the tensor refuses until all 8 bytes are there.
  std::size_t first_parsed = bytes.size();
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    INFO("cut at " << cut);
    try {
      const auto m = posenc::parse_gguf(bytes.data(), cut);
      first_parsed = std::min(first_parsed, cut);
      CHECK(m.data_offset == full.data_offset);
      if (cut < full.data_offset + 8) {
        REQUIRE_THROWS_WITH(posenc::gguf_tensor_as_float(m, "rope_freqs.weight", bytes.data(), cut),
                            Catch::Contains("runs past the end of the file"));
      } else {
        CHECK(posenc::gguf_tensor_as_float(m, "rope_freqs.weight", bytes.data(), cut) ==
              std::vector<float>{1.0f, 2.0f});
      }
    } catch (const std::invalid_argument& e) {
      CHECK(cut < first_parsed);  // no failure after a success
      CHECK(std::string(e.what()).find("posenc::load_gguf: <memory>: ") == 0);
    }
  }
  // The directory ends within the alignment before the data (the padding is < 32 bytes).
  CHECK(first_parsed <= full.data_offset);
  CHECK(first_parsed + 32 > full.data_offset);
}

TEST_CASE("gguf: malformed headers name what is wrong", "[gguf]") {
  const auto refuse = [](const std::vector<unsigned char>& bytes, const std::string& what) {
    INFO(what);
    REQUIRE_THROWS_AS(posenc::parse_gguf(bytes.data(), bytes.size(), "bad.gguf"),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc::parse_gguf(bytes.data(), bytes.size(), "bad.gguf"),
                        Catch::StartsWith("posenc::load_gguf: bad.gguf: ") && Catch::Contains(what));
  };
  std::vector<unsigned char> ggml{'G', 'G', 'M', 'L', 3, 0, 0, 0};
  refuse(ggml, "not a GGUF file");
  refuse(GgufWriter(false, 1).bytes(), "version 1");
  refuse(GgufWriter(false, 4).bytes(), "GGUF version 4 is not supported (2 and 3 are)");

  GgufWriter w;
  w.u32("a", 1).u32("a", 2);
  refuse(w.bytes(), "key \"a\" appears twice");

  GgufWriter b;
  b.raw("flag", GgufWriter::kBool, {2});
  refuse(b.bytes(), "a bool holds 2");

  GgufWriter t;
  t.raw("x", 13, {0, 0, 0, 0});
  refuse(t.bytes(), "value type 13 is not a GGUF type");

  // An array claiming 2^40 u32 elements in a file of a hundred bytes: refused before any
  // allocation.
  GgufWriter huge;
  std::vector<unsigned char> arr;
  huge.put(arr, GgufWriter::kU32, 4);
  huge.put(arr, std::uint64_t{1} << 40, 8);
  huge.raw("tokenizer.ggml.token_type", GgufWriter::kArray, arr);
  refuse(huge.bytes(), "truncated: key 0's array of 1099511627776 needs 1099511627776 x 4 bytes");

  GgufWriter al;
  al.u32("general.alignment", 48);
  refuse(al.bytes(48), "key \"general.alignment\" = 48 must be a power of two");
  GgufWriter al64;
  al64.u64("general.alignment", 64);
  refuse(al64.bytes(64), "key \"general.alignment\" must be a u32, got u64");

  GgufWriter dims;
  dims.tensor("t", {1, 1, 1, 1, 1}, 0, std::vector<unsigned char>(4));
  refuse(dims.bytes(), "tensor \"t\" has 5 dimensions (1..4 allowed)");
  GgufWriter twice;
  twice.tensor("t", {1}, 0, std::vector<unsigned char>(4))
      .tensor("t", {1}, 0, std::vector<unsigned char>(4));
  refuse(twice.bytes(), "tensor \"t\" appears twice");
  GgufWriter overflow;
  overflow.tensor("t", {std::uint64_t{1} << 40, std::uint64_t{1} << 40}, 0, {});
  refuse(overflow.bytes(), "tensor \"t\": ne[1] = 1099511627776 overflows the element count");
  // After an empty dimension the count is 0 whatever follows, but each ne must fit in int64
  // (a fuzzer's find: the overflow test divided by the zero count).
  GgufWriter empty_then_huge;
  empty_then_huge.tensor("t", {0, std::uint64_t{1} << 63}, 0, {});
  refuse(empty_then_huge.bytes(), "tensor \"t\": ne[1] = 9223372036854775808 overflows the element count");
  GgufWriter empty;
  empty.tensor("t", {0, 5}, 0, {});
  const auto eb = empty.bytes();
  CHECK(posenc::parse_gguf(eb.data(), eb.size()).tensors.at(0).num_elements() == 0);

  // A misaligned offset: patch the writer's first tensor offset (the file's last 8 header bytes
  // before the padding) to 4.
  GgufWriter mis;
  mis.tensor("t", {1}, 0, std::vector<unsigned char>(4));
  auto mbytes = mis.bytes();
  const std::size_t off_pos = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 8 + 4;  // magic .. type
  mbytes[off_pos] = 4;
  refuse(mbytes, "tensor \"t\": offset 4 is not a multiple of the alignment 32");
}

TEST_CASE("gguf: typed look-ups refuse a key of another type, naming it", "[gguf]") {
  const auto bytes = every_type_file(false).bytes();
  const auto m = posenc::parse_gguf(bytes.data(), bytes.size(), "m.gguf");
  const auto refuse = [](auto&& f, const std::string& what) {
    INFO(what);
    REQUIRE_THROWS_AS(f(), std::invalid_argument);
    REQUIRE_THROWS_WITH(f(), Catch::StartsWith("posenc::load_gguf: m.gguf: key ") &&
                                 Catch::Contains(what));
  };
  refuse([&] { return m.get_int("t.f32"); }, "\"t.f32\" must be an integer, got f32");
  refuse([&] { return m.get_int("t.u64"); }, "\"t.u64\" = 18364758544493064720 is out of the int64 range");
  refuse([&] { return m.get_float("t.str"); }, "\"t.str\" must be a number, got string");
  refuse([&] { return m.get_bool("t.u8"); }, "\"t.u8\" must be a bool, got u8");
  refuse([&] { return m.get_string("t.true"); }, "\"t.true\" must be a string, got bool");
  refuse([&] { return m.get_int_array("t.f32s"); },
         "\"t.f32s\" must be an array of integers, got array of f32");
  refuse([&] { return m.get_float_array("t.u32"); }, "\"t.u32\" must be an array of numbers, got u32");
  refuse([&] { return m.get_bool_array("t.strs"); },
         "\"t.strs\" must be an array of bools, got array of string");
}

TEST_CASE("gguf: arrays of arrays keep their count and the keys after them read", "[gguf]") {
  GgufWriter w;
  std::vector<unsigned char> nested;
  w.put(nested, GgufWriter::kArray, 4);  // element type: array
  w.put(nested, 2, 8);                   // two inner arrays
  w.put(nested, GgufWriter::kString, 4);
  w.put(nested, 1, 8);
  w.put_str(nested, "ab");
  w.put(nested, GgufWriter::kU16, 4);
  w.put(nested, 3, 8);
  for (int i = 0; i < 3; ++i) w.put(nested, 7, 2);
  w.raw("nested", GgufWriter::kArray, nested).u32("after", 9);
  const auto bytes = w.bytes();
  const auto m = posenc::parse_gguf(bytes.data(), bytes.size());
  const posenc::GgufValue* v = m.find("nested");
  REQUIRE(v != nullptr);
  CHECK(v->element_type == GgufType::kArray);
  CHECK(v->count == 2);
  CHECK(v->values.empty());
  CHECK(m.get_int("after") == 9);
}

TEST_CASE("gguf: arrays past max_array_elements keep their count and are skipped", "[gguf]") {
  GgufWriter w;
  w.str_array("tokenizer.ggml.tokens", {"<s>", "</s>", "hello"})
      .f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.5f})
      .i32_array("llama.rope.dimension_sections", {1, 2})
      .u32("after", 7);
  const auto bytes = w.bytes();
  posenc::GgufReadOptions options;
  options.max_array_elements = 2;
  const std::string path = temp_path("skip");
  write_file(path, bytes);
  for (const auto& m : {posenc::parse_gguf(bytes.data(), bytes.size(), "s.gguf", options),
                        posenc::load_gguf(path, options)}) {
    const posenc::GgufValue* tokens = m.find("tokenizer.ggml.tokens");
    REQUIRE(tokens != nullptr);
    CHECK(tokens->count == 3);
    CHECK(tokens->element_type == GgufType::kString);
    CHECK(tokens->values.empty());
    CHECK(m.find("tokenizer.ggml.scores")->values.empty());
    CHECK(m.get_int_array("llama.rope.dimension_sections") == std::vector<std::int64_t>{1, 2});
    CHECK(m.get_int("after") == 7);
    REQUIRE_THROWS_AS(m.get_float_array("tokenizer.ggml.scores"), std::invalid_argument);
    REQUIRE_THROWS_WITH(m.get_float_array("tokenizer.ggml.scores"),
                        Catch::Contains("key \"tokenizer.ggml.scores\" holds 3 elements that were not kept"));
  }
  std::remove(path.c_str());
  // Skipping checks lengths as reading does: a string running past the end is refused.
  auto cut = bytes;
  cut.resize(4 + 4 + 8 + 8 + 8 + 21 + 4 + 4 + 8 + 8 + 3 + 8 + 2);  // inside "hello"
  REQUIRE_THROWS_WITH(posenc::parse_gguf(cut.data(), cut.size(), "cut.gguf", options),
                      Catch::Contains("truncated"));
}

TEST_CASE("gguf: limits hold at their boundaries", "[gguf]") {
  // A u64 up to INT64_MAX is an int64; one more is not. A bool is not an integer.
  GgufWriter w;
  w.u64("max", 0x7fffffffffffffffull).u64("over", 0x8000000000000000ull).boolean("flag", true);
  const auto bytes = w.bytes();
  const auto m = posenc::parse_gguf(bytes.data(), bytes.size(), "m.gguf");
  CHECK(m.get_int("max") == std::numeric_limits<std::int64_t>::max());
  REQUIRE_THROWS_WITH(m.get_int("over"), Catch::Contains("out of the int64 range"));
  REQUIRE_THROWS_AS(m.get_int("flag"), std::invalid_argument);
  REQUIRE_THROWS_WITH(m.get_int("flag"), Catch::Contains("\"flag\" must be an integer, got bool"));

  // Arrays of arrays: 8 levels nested inside a key's array are read past, a 9th is refused.
  const auto nested = [](int levels) {
    GgufWriter n;
    std::vector<unsigned char> payload;
    for (int l = 0; l < levels; ++l) {
      n.put(payload, GgufWriter::kArray, 4);
      n.put(payload, 1, 8);
    }
    n.put(payload, GgufWriter::kU8, 4);
    n.put(payload, 1, 8);
    payload.push_back(7);
    n.raw("deep", GgufWriter::kArray, payload).u32("after", 5);
    return n.bytes();
  };
  const auto ok = nested(8);
  CHECK(posenc::parse_gguf(ok.data(), ok.size()).get_int("after") == 5);
  const auto deep = nested(9);
  REQUIRE_THROWS_WITH(posenc::parse_gguf(deep.data(), deep.size()),
                      Catch::Contains("arrays nested deeper than 8"));

  // general.alignment 0 is not a power of two: refused, not a division by zero.
  GgufWriter zero;
  zero.u32("general.alignment", 0);
  const auto zb = zero.bytes();
  REQUIRE_THROWS_WITH(posenc::parse_gguf(zb.data(), zb.size()),
                      Catch::Contains("\"general.alignment\" = 0 must be a power of two"));

  // Alignment 1: the data section starts right after the header, with no padding (the padding
  // is the distance to the next multiple, 0 when the header already ends on one).
  GgufWriter one;
  one.u32("general.alignment", 1);
  const auto ob = one.bytes(1);
  const auto om = posenc::parse_gguf(ob.data(), ob.size());
  CHECK(om.alignment == 1);
  CHECK(om.data_offset == ob.size());

  // A tensor whose (aligned) offset lies past the end of the file is refused, not read.
  GgufWriter far;
  far.tensor("t", {1}, posenc::kGgmlTypeF32, far.f32_bytes({1.0f}));
  auto fb = far.bytes();
  const std::size_t off_pos = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 8 + 4;  // magic .. type
  fb[off_pos + 2] = 0x10;  // offset 1 MiB, a multiple of 32
  const auto fm = posenc::parse_gguf(fb.data(), fb.size());
  REQUIRE(fm.tensors.at(0).offset == 0x100000u);
  REQUIRE_THROWS_WITH(posenc::gguf_tensor_as_float(fm, "t", fb.data(), fb.size()),
                      Catch::Contains("runs past the end of the file"));
}
