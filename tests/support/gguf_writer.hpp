#pragma once
// A GGUF writer for the tests, written from the format description (ggml docs/gguf.md) and
// independent of posenc/gguf.hpp: it lays bytes out one by one in the chosen byte order, so a
// file it writes is what ggml's gguf_write would produce for the same keys and tensors.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace posenc_test {

class GgufWriter {
 public:
  // GGUF value type ids (gguf.h).
  enum Type : std::uint32_t {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
    kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
  };

  explicit GgufWriter(bool big_endian = false, std::uint32_t version = 3)
      : be_(big_endian), version_(version) {}

  // --- raw encoders into a byte vector -------------------------------------------------------
  void put(std::vector<unsigned char>& out, std::uint64_t v, int bytes) const {
    for (int i = 0; i < bytes; ++i) {
      const int shift = 8 * (be_ ? bytes - 1 - i : i);
      out.push_back(static_cast<unsigned char>((v >> shift) & 0xff));
    }
  }
  void put_f32(std::vector<unsigned char>& out, float f) const {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    put(out, b, 4);
  }
  void put_f64(std::vector<unsigned char>& out, double d) const {
    std::uint64_t b;
    std::memcpy(&b, &d, 8);
    put(out, b, 8);
  }
  void put_str(std::vector<unsigned char>& out, const std::string& s) const {
    put(out, s.size(), 8);
    out.insert(out.end(), s.begin(), s.end());
  }

  // --- metadata -------------------------------------------------------------------------------
  GgufWriter& u32(const std::string& key, std::uint32_t v) { return scalar(key, kU32, v, 4); }
  GgufWriter& i32(const std::string& key, std::int32_t v) {
    return scalar(key, kI32, static_cast<std::uint32_t>(v), 4);
  }
  GgufWriter& u64(const std::string& key, std::uint64_t v) { return scalar(key, kU64, v, 8); }
  GgufWriter& f32(const std::string& key, float v) {
    head(key, kF32);
    put_f32(kv_, v);
    return *this;
  }
  GgufWriter& f64(const std::string& key, double v) {
    head(key, kF64);
    put_f64(kv_, v);
    return *this;
  }
  GgufWriter& boolean(const std::string& key, bool v) { return scalar(key, kBool, v ? 1 : 0, 1); }
  GgufWriter& str(const std::string& key, const std::string& v) {
    head(key, kString);
    put_str(kv_, v);
    return *this;
  }
  GgufWriter& u32_array(const std::string& key, const std::vector<std::uint32_t>& v) {
    array_head(key, kU32, v.size());
    for (auto x : v) put(kv_, x, 4);
    return *this;
  }
  GgufWriter& i32_array(const std::string& key, const std::vector<std::int32_t>& v) {
    array_head(key, kI32, v.size());
    for (auto x : v) put(kv_, static_cast<std::uint32_t>(x), 4);
    return *this;
  }
  GgufWriter& i64_array(const std::string& key, const std::vector<std::int64_t>& v) {
    array_head(key, kI64, v.size());
    for (auto x : v) put(kv_, static_cast<std::uint64_t>(x), 8);
    return *this;
  }
  GgufWriter& f32_array(const std::string& key, const std::vector<float>& v) {
    array_head(key, kF32, v.size());
    for (auto x : v) put_f32(kv_, x);
    return *this;
  }
  GgufWriter& bool_array(const std::string& key, const std::vector<bool>& v) {
    array_head(key, kBool, v.size());
    for (bool x : v) put(kv_, x ? 1 : 0, 1);
    return *this;
  }
  GgufWriter& str_array(const std::string& key, const std::vector<std::string>& v) {
    array_head(key, kString, v.size());
    for (const auto& x : v) put_str(kv_, x);
    return *this;
  }
  /// A key with an arbitrary type id and pre-encoded value bytes (for malformed files).
  GgufWriter& raw(const std::string& key, std::uint32_t type,
                  const std::vector<unsigned char>& value) {
    head(key, type);
    kv_.insert(kv_.end(), value.begin(), value.end());
    return *this;
  }

  // --- tensors --------------------------------------------------------------------------------
  /// ne: innermost first; data: the tensor's bytes as they go into the file.
  GgufWriter& tensor(const std::string& name, const std::vector<std::uint64_t>& ne,
                     std::uint32_t ggml_type, const std::vector<unsigned char>& data) {
    tensors_.push_back({name, ne, ggml_type, data});
    return *this;
  }
  std::vector<unsigned char> f32_bytes(const std::vector<float>& v) const {
    std::vector<unsigned char> out;
    for (float x : v) put_f32(out, x);
    return out;
  }
  std::vector<unsigned char> u16_bytes(const std::vector<std::uint16_t>& v) const {
    std::vector<unsigned char> out;
    for (auto x : v) put(out, x, 2);
    return out;
  }

  /// The whole file. alignment: the one the data offsets use (general.alignment, if any, must
  /// have been written with the same value).
  std::vector<unsigned char> bytes(std::uint64_t alignment = 32) const {
    std::vector<unsigned char> out{'G', 'G', 'U', 'F'};
    put(out, version_, 4);
    put(out, tensors_.size(), 8);
    put(out, n_kv_, 8);
    out.insert(out.end(), kv_.begin(), kv_.end());
    std::uint64_t offset = 0;
    for (const auto& t : tensors_) {
      put_str(out, t.name);
      put(out, t.ne.size(), 4);
      for (auto n : t.ne) put(out, n, 8);
      put(out, t.type, 4);
      put(out, offset, 8);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    while (out.size() % alignment != 0) out.push_back(0);
    for (const auto& t : tensors_) {
      out.insert(out.end(), t.data.begin(), t.data.end());
      while (out.size() % alignment != 0) out.push_back(0);
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    std::vector<unsigned char> data;
  };

  void head(const std::string& key, std::uint32_t type) {
    put_str(kv_, key);
    put(kv_, type, 4);
    ++n_kv_;
  }
  void array_head(const std::string& key, std::uint32_t type, std::size_t n) {
    head(key, kArray);
    put(kv_, type, 4);
    put(kv_, n, 8);
  }
  GgufWriter& scalar(const std::string& key, std::uint32_t type, std::uint64_t v, int bytes) {
    head(key, type);
    put(kv_, v, bytes);
    return *this;
  }

  bool be_;
  std::uint32_t version_;
  std::uint64_t n_kv_ = 0;
  std::vector<unsigned char> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace posenc_test
