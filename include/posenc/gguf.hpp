#pragma once
/// \file posenc/gguf.hpp
/// The GGUF container (llama.cpp / ggml model files): the metadata key-values and the tensor
/// directory, read without touching the weights, and single F32 / F16 / BF16 tensors read on
/// demand (llama.cpp keeps per-pair RoPE factors as tensors: rope_freqs, rope_factors_long /
/// rope_factors_short). gguf_config.hpp turns the metadata into posenc's RoPE / ALiBi
/// parameters; this header only knows the file format.
///
/// Layout (ggml docs/gguf.md; versions 2 and 3 — version 1 of 2023 had 32-bit counts and is
/// refused):
///
///   u32 magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
///   kv_count     x { string key | u32 value type | value }
///   tensor_count x { string name | u32 n_dims (1..4) | u64 ne[n_dims], innermost first |
///                    u32 ggml_type | u64 offset into the data section }
///   zero padding to general.alignment (u32, default 32) | data section
///
///   string = u64 byte length + bytes (no terminator); array = u32 element type + u64 count +
///   the elements; bool = one byte 0 / 1.
///
/// Every number is little-endian unless the version reads byte-swapped: a file written on a
/// big-endian host (ggml's version 3 allows it) is read with every field, and every tensor
/// value, swapped. The reader assembles numbers from bytes, so the host's own byte order
/// never matters.
///
/// Untrusted input: every length and count is checked against the bytes that remain before
/// anything is allocated, so a damaged or hostile file gives std::invalid_argument
///   "posenc::load_gguf: model.gguf: truncated: key 12 (\"llama.rope.freq_base\") needs 4
///    bytes at offset 1234, the file has 1236"
/// and nothing else (no crash, no huge allocation).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <Eigen/Core>

#include "posenc/error.hpp"

namespace posenc {

/// GGUF metadata value types (gguf.h `enum gguf_type`), with their file ids.
enum class GgufType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

constexpr std::string_view to_string(GgufType type) noexcept {
  switch (type) {
    case GgufType::kUint8: return "u8";
    case GgufType::kInt8: return "i8";
    case GgufType::kUint16: return "u16";
    case GgufType::kInt16: return "i16";
    case GgufType::kUint32: return "u32";
    case GgufType::kInt32: return "i32";
    case GgufType::kFloat32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "u64";
    case GgufType::kInt64: return "i64";
    case GgufType::kFloat64: return "f64";
  }
  return "unknown";
}

/// ggml_type ids of the tensor types read_gguf_tensor converts (ggml.h `enum ggml_type`).
inline constexpr std::uint32_t kGgmlTypeF32 = 0;
inline constexpr std::uint32_t kGgmlTypeF16 = 1;
inline constexpr std::uint32_t kGgmlTypeBF16 = 30;

/// One scalar as stored: unsigned integers as uint64, signed as int64, f32 / f64 as double
/// (exactly), bool, string.
using GgufScalar = std::variant<std::uint64_t, std::int64_t, double, bool, std::string>;

/// One metadata value: a scalar (values.size() == 1) or an array of scalars. Arrays of arrays
/// (allowed by the format, written by no model converter) and arrays longer than
/// GgufReadOptions::max_array_elements keep their count only (values.size() < count).
struct GgufValue {
  GgufType type = GgufType::kUint32;          ///< kArray for arrays
  GgufType element_type = GgufType::kUint32;  ///< arrays: the elements' type
  std::uint64_t count = 1;                    ///< arrays: the element count
  std::vector<GgufScalar> values;             ///< the scalar, or the array's elements
};

/// One entry of the tensor directory.
struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;  ///< ggml's ne[], innermost (contiguous) dimension first
  std::uint32_t ggml_type = 0;
  std::uint64_t offset = 0;  ///< from the start of the data section

  std::int64_t num_elements() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
};

/// How much of the header to keep.
struct GgufReadOptions {
  /// Arrays with more elements keep their type and count only (values stays empty; the bytes
  /// are skipped): the tokenizer's vocabulary, scores and merges (100k+ entries each) are not
  /// needed to read positions. Default: keep everything.
  std::uint64_t max_array_elements = std::numeric_limits<std::uint64_t>::max();
};

/// A GGUF file's header: metadata in file order and the tensor directory.
struct GgufMetadata {
  std::string source;  ///< the path, or the name given to parse_gguf
  std::uint32_t version = 3;
  bool big_endian = false;
  std::uint64_t alignment = 32;    ///< general.alignment
  std::uint64_t data_offset = 0;   ///< where the data section starts in the file
  std::uint64_t file_size = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<GgufTensorInfo> tensors;

  const GgufValue* find(std::string_view key) const {
    for (const auto& kv : metadata) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  }

  const GgufTensorInfo* find_tensor(std::string_view name) const {
    for (const auto& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }

  /// Typed look-ups: nullopt when the key is absent; std::invalid_argument naming the file and
  /// the key when it holds another type (llama.cpp's loader refuses those too).
  /// Any integer type, in the int64 range.
  std::optional<std::int64_t> get_int(std::string_view key) const;
  /// f32 / f64, or an integer (an exporter may write a whole number either way).
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  /// Arrays of integers / of numbers / of bools.
  std::optional<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;
  std::optional<std::vector<bool>> get_bool_array(std::string_view key) const;

  template <typename... Parts>
  [[noreturn]] void fail(std::string_view key, const Parts&... parts) const {
    detail::throw_invalid_argument("load_gguf", source, ": key \"", key, "\" ", parts...);
  }

 private:
  /// The array at key (nullptr when absent), refused unless its elements pass `element_ok`.
  template <typename Pred>
  const GgufValue* find_array(std::string_view key, std::string_view what, Pred element_ok) const {
    const GgufValue* v = find(key);
    if (v != nullptr && (v->type != GgufType::kArray || !element_ok(v->element_type))) {
      const bool array = v->type == GgufType::kArray;
      fail(key, "must be an array of ", what, ", got ", to_string(v->type), array ? " of " : "",
           array ? to_string(v->element_type) : "");
    }
    if (v != nullptr && v->values.size() != v->count) {
      fail(key, "holds ", v->count, " elements that were not kept (GgufReadOptions::",
           "max_array_elements)");
    }
    return v;
  }
};

namespace detail {

inline bool gguf_is_integer(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

inline bool gguf_is_float(GgufType t) {
  return t == GgufType::kFloat32 || t == GgufType::kFloat64;
}

/// Bytes of one scalar of a fixed-size type; 0 for strings and arrays.
inline std::uint64_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 0;
  }
}

/// The fewest bytes an element of type t occupies (a string: its length; an array: its element
/// type and count), for refusing counts the file cannot hold before allocating.
inline std::uint64_t gguf_min_size(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 12;
  return gguf_scalar_size(t);
}

inline std::int64_t gguf_scalar_int(const GgufMetadata& m, std::string_view key,
                                    const GgufScalar& s) {
  if (const auto* u = std::get_if<std::uint64_t>(&s)) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      m.fail(key, "= ", *u, " is out of the int64 range");
    }
    return static_cast<std::int64_t>(*u);
  }
  return std::get<std::int64_t>(s);
}

inline double gguf_scalar_float(const GgufScalar& s) {
  if (const auto* d = std::get_if<double>(&s)) return *d;
  if (const auto* u = std::get_if<std::uint64_t>(&s)) return static_cast<double>(*u);
  return static_cast<double>(std::get<std::int64_t>(s));
}

/// Byte source over memory or a stream, bounded by the file size; numbers are assembled from
/// bytes in the file's order.
class GgufReader {
 public:
  GgufReader(const unsigned char* data, std::uint64_t size, std::string source)
      : data_(data), size_(size), source_(std::move(source)) {}
  GgufReader(std::istream& in, std::uint64_t size, std::string source)
      : in_(&in), size_(size), source_(std::move(source)) {}

  std::uint64_t offset() const noexcept { return pos_; }
  std::uint64_t size() const noexcept { return size_; }
  const std::string& source() const noexcept { return source_; }
  void set_big_endian(bool b) noexcept { big_endian_ = b; }

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw_invalid_argument("load_gguf", source_, ": ", parts...);
  }

  /// Refuses a read of n bytes (or n items of at least `each` bytes) past the end.
  template <typename... What>
  void need(std::uint64_t n, std::uint64_t each, const What&... what) const {
    const std::uint64_t left = size_ - pos_;
    if (each != 0 && n > left / each) {
      fail("truncated: ", what..., " needs ", n, " x ", each, " bytes at offset ", pos_,
           ", the file has ", size_);
    }
  }

  void read_bytes(void* dst, std::uint64_t n) {
    if (n > size_ - pos_) fail("truncated: ", n, " bytes at offset ", pos_, ", the file has ", size_);
    if (in_ != nullptr) {
      in_->read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
      if (static_cast<std::uint64_t>(in_->gcount()) != n) fail("read error at offset ", pos_);
    } else if (n != 0) {
      std::memcpy(dst, data_ + pos_, static_cast<std::size_t>(n));
    }
    pos_ += n;
  }

  template <int Bytes>
  std::uint64_t read_uint() {
    unsigned char b[std::size_t{Bytes}];
    read_bytes(b, Bytes);
    std::uint64_t v = 0;
    for (int i = 0; i < Bytes; ++i) {
      const int k = big_endian_ ? i : Bytes - 1 - i;
      v = (v << 8) | b[k];
    }
    return v;
  }

  std::uint32_t u32() { return static_cast<std::uint32_t>(read_uint<4>()); }
  std::uint64_t u64() { return read_uint<8>(); }

  template <typename... What>
  std::string string(const What&... what) {
    const std::uint64_t n = u64();
    need(n, 1, what...);
    std::string s(static_cast<std::size_t>(n), '\0');
    read_bytes(s.data(), n);
    return s;
  }

  /// Skips n bytes (through the stream's buffer: no seek per string of a skipped array).
  void skip(std::uint64_t n) {
    if (n > size_ - pos_) fail("truncated: ", n, " bytes at offset ", pos_, ", the file has ", size_);
    if (in_ != nullptr) {
      in_->ignore(static_cast<std::streamsize>(n));
      if (static_cast<std::uint64_t>(in_->gcount()) != n) fail("read error at offset ", pos_);
    }
    pos_ += n;
  }

 private:
  const unsigned char* data_ = nullptr;
  std::istream* in_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint64_t pos_ = 0;
  bool big_endian_ = false;
  std::string source_;
};

inline GgufScalar gguf_read_scalar(GgufReader& r, GgufType t, std::uint64_t key_index) {
  const auto sign = [](std::uint64_t v, int bits) {
    const std::uint64_t m = std::uint64_t{1} << (bits - 1);
    return static_cast<std::int64_t>((v ^ m) - m);  // two's complement sign extension
  };
  switch (t) {
    case GgufType::kUint8: return r.read_uint<1>();
    case GgufType::kUint16: return r.read_uint<2>();
    case GgufType::kUint32: return r.read_uint<4>();
    case GgufType::kUint64: return r.read_uint<8>();
    case GgufType::kInt8: return sign(r.read_uint<1>(), 8);
    case GgufType::kInt16: return sign(r.read_uint<2>(), 16);
    case GgufType::kInt32: return sign(r.read_uint<4>(), 32);
    case GgufType::kInt64: return static_cast<std::int64_t>(r.read_uint<8>());
    case GgufType::kFloat32: {
      const auto bits = static_cast<std::uint32_t>(r.read_uint<4>());
      float f;
      std::memcpy(&f, &bits, 4);
      return static_cast<double>(f);
    }
    case GgufType::kFloat64: {
      const std::uint64_t bits = r.read_uint<8>();
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case GgufType::kBool: {
      const std::uint64_t b = r.read_uint<1>();
      if (b > 1) r.fail("key ", key_index, ": a bool holds ", b, " (0 or 1 expected)");
      return b == 1;
    }
    case GgufType::kString: return r.string("key ", key_index, "'s string");
    case GgufType::kArray: break;
  }
  r.fail("key ", key_index, ": scalar type ", static_cast<std::uint32_t>(t), " is not a GGUF type");
}

inline GgufType gguf_read_type(GgufReader& r, std::uint64_t key_index) {
  const std::uint32_t t = r.u32();
  if (t > static_cast<std::uint32_t>(GgufType::kFloat64)) {
    r.fail("key ", key_index, ": value type ", t, " is not a GGUF type (0..12)");
  }
  return static_cast<GgufType>(t);
}

inline void gguf_skip_array(GgufReader& r, std::uint64_t key_index, int depth);

/// Skips n array elements of type et without storing them.
inline void gguf_skip_elements(GgufReader& r, GgufType et, std::uint64_t n,
                               std::uint64_t key_index, int depth) {
  if (et == GgufType::kArray) {
    for (std::uint64_t i = 0; i < n; ++i) gguf_skip_array(r, key_index, depth + 1);
  } else if (et == GgufType::kString) {
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t len = r.u64();
      r.need(len, 1, "key ", key_index, "'s string");
      r.skip(len);
    }
  } else {
    r.skip(n * gguf_scalar_size(et));  // n was checked against the bytes left
  }
}

/// Skips a nested array (its header and elements), depth-limited.
inline void gguf_skip_array(GgufReader& r, std::uint64_t key_index, int depth) {
  if (depth > 8) r.fail("key ", key_index, ": arrays nested deeper than 8");
  const GgufType et = gguf_read_type(r, key_index);
  const std::uint64_t n = r.u64();
  r.need(n, gguf_min_size(et), "key ", key_index, "'s array of ", n);
  gguf_skip_elements(r, et, n, key_index, depth);
}

inline GgufValue gguf_read_value(GgufReader& r, std::uint64_t key_index,
                                 const GgufReadOptions& options) {
  GgufValue v;
  v.type = gguf_read_type(r, key_index);
  if (v.type != GgufType::kArray) {
    v.values.push_back(gguf_read_scalar(r, v.type, key_index));
    return v;
  }
  v.element_type = gguf_read_type(r, key_index);
  v.count = r.u64();
  r.need(v.count, gguf_min_size(v.element_type), "key ", key_index, "'s array of ", v.count);
  if (v.element_type == GgufType::kArray || v.count > options.max_array_elements) {
    gguf_skip_elements(r, v.element_type, v.count, key_index, 0);
    return v;
  }
  v.values.reserve(static_cast<std::size_t>(v.count));
  for (std::uint64_t i = 0; i < v.count; ++i) {
    v.values.push_back(gguf_read_scalar(r, v.element_type, key_index));
  }
  return v;
}

inline GgufMetadata gguf_parse(GgufReader& r, const GgufReadOptions& options) {
  GgufMetadata m;
  m.source = r.source();
  m.file_size = r.size();
  unsigned char magic[4];
  r.read_bytes(magic, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    r.fail("not a GGUF file (the first 4 bytes are not \"GGUF\")");
  }
  std::uint32_t version = r.u32();
  const auto swapped = [](std::uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
  };
  if (version != 2 && version != 3 && (swapped(version) == 2 || swapped(version) == 3)) {
    m.big_endian = true;
    r.set_big_endian(true);
    version = swapped(version);
  }
  if (version == 1) {
    r.fail("GGUF version 1 (32-bit counts, 2023) is not supported: re-convert the model");
  }
  if (version != 2 && version != 3) {
    r.fail("GGUF version ", version, " is not supported (2 and 3 are)");
  }
  m.version = version;
  const std::uint64_t n_tensors = r.u64();
  const std::uint64_t n_kv = r.u64();
  r.need(n_kv, 8 + 4 + 1, "kv_count ", n_kv);
  m.metadata.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("key ", i, "'s name");
    for (const auto& kv : m.metadata) {
      if (kv.first == key) r.fail("key \"", key, "\" appears twice");
    }
    GgufValue value = gguf_read_value(r, i, options);
    m.metadata.emplace_back(std::move(key), std::move(value));
  }
  if (const GgufValue* a = m.find("general.alignment")) {
    if (a->type != GgufType::kUint32) {
      m.fail("general.alignment", "must be a u32, got ", to_string(a->type));
    }
    const std::uint64_t al = std::get<std::uint64_t>(a->values[0]);
    if (al == 0 || (al & (al - 1)) != 0) {
      m.fail("general.alignment", "= ", al, " must be a power of two");
    }
    m.alignment = al;
  }
  r.need(n_tensors, 8 + 4 + 8 + 4 + 8, "tensor_count ", n_tensors);
  m.tensors.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = r.string("tensor ", i, "'s name");
    const std::uint32_t n_dims = r.u32();
    if (n_dims < 1 || n_dims > 4) {
      r.fail("tensor \"", t.name, "\" has ", n_dims, " dimensions (1..4 allowed)");
    }
    std::int64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t ne = r.u64();
      const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      // elements is 0 after an empty dimension: then only ne itself must fit in int64.
      if (ne > limit || (elements != 0 && ne > limit / static_cast<std::uint64_t>(elements))) {
        r.fail("tensor \"", t.name, "\": ne[", d, "] = ", ne, " overflows the element count");
      }
      elements *= static_cast<std::int64_t>(ne);
      t.shape.push_back(static_cast<std::int64_t>(ne));
    }
    t.ggml_type = r.u32();
    t.offset = r.u64();
    if (t.offset % m.alignment != 0) {
      r.fail("tensor \"", t.name, "\": offset ", t.offset, " is not a multiple of the alignment ",
             m.alignment);
    }
    for (const auto& other : m.tensors) {
      if (other.name == t.name) r.fail("tensor \"", t.name, "\" appears twice");
    }
    m.tensors.push_back(std::move(t));
  }
  // The data section starts at the next multiple of the alignment (it may be empty).
  const std::uint64_t end = r.offset();
  m.data_offset = end + (m.alignment - end % m.alignment) % m.alignment;
  return m;
}

/// Elements of the tensor as float; data points at the tensor's first byte.
inline std::vector<float> gguf_tensor_values(const GgufMetadata& m, const GgufTensorInfo& t,
                                             const unsigned char* data) {
  const auto n = static_cast<std::size_t>(t.num_elements());
  std::vector<float> out(n);
  const std::size_t width = t.ggml_type == kGgmlTypeF32 ? 4 : 2;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* p = data + i * width;
    std::uint32_t bits = 0;
    for (std::size_t k = 0; k < width; ++k) {
      bits = (bits << 8) | p[m.big_endian ? k : width - 1 - k];
    }
    if (t.ggml_type == kGgmlTypeF32) {
      std::memcpy(&out[i], &bits, 4);
    } else if (t.ggml_type == kGgmlTypeBF16) {
      bits <<= 16;  // bfloat16 is the high half of a float
      std::memcpy(&out[i], &bits, 4);
    } else {
      out[i] = static_cast<float>(
          Eigen::numext::bit_cast<Eigen::half>(static_cast<std::uint16_t>(bits)));
    }
  }
  return out;
}

/// Byte range of a tensor, validated against a file (or buffer) of file_size bytes.
inline std::pair<std::uint64_t, std::uint64_t> gguf_tensor_range(const GgufMetadata& m,
                                                                 std::string_view name,
                                                                 std::uint64_t file_size,
                                                                 const GgufTensorInfo** info) {
  const GgufTensorInfo* t = m.find_tensor(name);
  if (t == nullptr) throw_invalid_argument("read_gguf_tensor", m.source, ": no tensor \"", name, "\"");
  if (t->ggml_type != kGgmlTypeF32 && t->ggml_type != kGgmlTypeF16 &&
      t->ggml_type != kGgmlTypeBF16) {
    throw_invalid_argument("read_gguf_tensor", m.source, ": tensor \"", name, "\" has ggml_type ",
                           t->ggml_type, "; only F32 (0), F16 (1) and BF16 (30) are read");
  }
  const std::uint64_t width = t->ggml_type == kGgmlTypeF32 ? 4 : 2;
  const auto n = static_cast<std::uint64_t>(t->num_elements());
  const std::uint64_t room = file_size - std::min(file_size, m.data_offset);
  if (t->offset > room || n > (room - t->offset) / width) {
    throw_invalid_argument("read_gguf_tensor", m.source, ": tensor \"", name, "\" (", n,
                           " values at data offset ", t->offset, ") runs past the end of the file (",
                           file_size, " bytes, data section at ", m.data_offset, ")");
  }
  *info = t;
  return {m.data_offset + t->offset, n * width};
}

}  // namespace detail

inline std::optional<std::int64_t> GgufMetadata::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!detail::gguf_is_integer(v->type)) fail(key, "must be an integer, got ", to_string(v->type));
  return detail::gguf_scalar_int(*this, key, v->values[0]);
}

inline std::optional<double> GgufMetadata::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!detail::gguf_is_float(v->type) && !detail::gguf_is_integer(v->type)) {
    fail(key, "must be a number, got ", to_string(v->type));
  }
  return detail::gguf_scalar_float(v->values[0]);
}

inline std::optional<bool> GgufMetadata::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kBool) fail(key, "must be a bool, got ", to_string(v->type));
  return std::get<bool>(v->values[0]);
}

inline std::optional<std::string> GgufMetadata::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kString) fail(key, "must be a string, got ", to_string(v->type));
  return std::get<std::string>(v->values[0]);
}

inline std::optional<std::vector<std::int64_t>> GgufMetadata::get_int_array(
    std::string_view key) const {
  const GgufValue* v = find_array(key, "integers", [](GgufType t) { return detail::gguf_is_integer(t); });
  if (v == nullptr) return std::nullopt;
  std::vector<std::int64_t> out;
  out.reserve(v->values.size());
  for (const GgufScalar& s : v->values) out.push_back(detail::gguf_scalar_int(*this, key, s));
  return out;
}

inline std::optional<std::vector<double>> GgufMetadata::get_float_array(
    std::string_view key) const {
  const GgufValue* v = find_array(key, "numbers", [](GgufType t) {
    return detail::gguf_is_integer(t) || detail::gguf_is_float(t);
  });
  if (v == nullptr) return std::nullopt;
  std::vector<double> out;
  out.reserve(v->values.size());
  for (const GgufScalar& s : v->values) out.push_back(detail::gguf_scalar_float(s));
  return out;
}

inline std::optional<std::vector<bool>> GgufMetadata::get_bool_array(std::string_view key) const {
  const GgufValue* v = find_array(key, "bools", [](GgufType t) { return t == GgufType::kBool; });
  if (v == nullptr) return std::nullopt;
  std::vector<bool> out;
  out.reserve(v->values.size());
  for (const GgufScalar& s : v->values) out.push_back(std::get<bool>(s));
  return out;
}

/// \brief Parses a GGUF header held in memory (the whole file, or at least its header: tensor
/// data is only needed by gguf_tensor_as_float).
/// Throws std::invalid_argument naming `source` for anything malformed.
inline GgufMetadata parse_gguf(const void* bytes, std::size_t size,
                               std::string source = "<memory>",
                               const GgufReadOptions& options = {}) {
  detail::GgufReader r(static_cast<const unsigned char*>(bytes), size, std::move(source));
  return detail::gguf_parse(r, options);
}

/// \brief Reads a GGUF file's header (metadata + tensor directory), not its weights: a
/// 100 GB model costs a few MB of reading (the tokenizer's arrays).
inline GgufMetadata load_gguf(const std::string& path, const GgufReadOptions& options = {}) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) detail::throw_invalid_argument("load_gguf", path, ": cannot open the file");
  const std::streamoff size = in.tellg();
  in.seekg(0);
  if (size < 0 || !in) detail::throw_invalid_argument("load_gguf", path, ": cannot size the file");
  detail::GgufReader r(in, static_cast<std::uint64_t>(size), path);
  return detail::gguf_parse(r, options);
}

/// \brief One F32 / F16 / BF16 tensor of a GGUF held in memory, as floats in ggml's order
/// (ne[0] fastest). `bytes` is the same buffer parse_gguf read, now including the data.
inline std::vector<float> gguf_tensor_as_float(const GgufMetadata& m, std::string_view name,
                                               const void* bytes, std::size_t size) {
  const GgufTensorInfo* t = nullptr;
  const auto range = detail::gguf_tensor_range(m, name, size, &t);
  return detail::gguf_tensor_values(m, *t, static_cast<const unsigned char*>(bytes) + range.first);
}

/// \brief One F32 / F16 / BF16 tensor of a GGUF file, read from disk alone.
inline std::vector<float> read_gguf_tensor(const GgufMetadata& m, std::string_view name,
                                           const std::string& path) {
  const GgufTensorInfo* t = nullptr;
  const auto range = detail::gguf_tensor_range(m, name, m.file_size, &t);
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::throw_invalid_argument("read_gguf_tensor", path, ": cannot open the file");
  in.seekg(static_cast<std::streamoff>(range.first));
  std::vector<unsigned char> buf(static_cast<std::size_t>(range.second));
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  if (!in) detail::throw_invalid_argument("read_gguf_tensor", path, ": read error in tensor \"", name, "\"");
  return detail::gguf_tensor_values(m, *t, buf.data());
}

}  // namespace posenc
