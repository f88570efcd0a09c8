#include "gzip_lines.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <cstring>

#include "adgnn/loaders.h"
#include "fmt/format.h"

namespace adgnn::detail {

struct GzipLines::State {
  std::FILE* file = nullptr;
  z_stream zs{};
  bool zs_open = false, file_done = false, stream_done = false, any_input = false;
  EVP_MD_CTX* md = nullptr;
  std::string in;  // compressed bytes read but not yet inflated
  ~State() {
    if (zs_open) inflateEnd(&zs);
    if (file) std::fclose(file);
    if (md) EVP_MD_CTX_free(md);
  }
};

GzipLines::GzipLines(const std::string& path) : s_(std::make_unique<State>()), path_(path) {
  s_->file = std::fopen(path.c_str(), "rb");
  if (!s_->file) throw InputError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  if (inflateInit2(&s_->zs, 16 + MAX_WBITS) != Z_OK) throw InputError(fmt::format("{}: zlib init failed", path));
  s_->zs_open = true;
  s_->md = EVP_MD_CTX_new();
  if (!s_->md || EVP_DigestInit_ex(s_->md, EVP_sha256(), nullptr) != 1)
    throw InputError(fmt::format("{}: cannot start SHA-256", path));
}

GzipLines::~GzipLines() = default;

bool GzipLines::inflate_more() {
  State& s = *s_;
  if (s.stream_done) return false;
  constexpr size_t kIn = 1 << 20, kOut = 4 << 20;
  const size_t before = text_.size();
  while (text_.size() == before) {
    if (s.zs.avail_in == 0 && !s.file_done) {
      s.in.resize(kIn);
      const size_t got = std::fread(s.in.data(), 1, kIn, s.file);
      if (std::ferror(s.file)) throw InputError(fmt::format("{}: read error", path_));
      if (got < kIn) s.file_done = true;
      s.in.resize(got);
      if (got > 0) {
        s.any_input = true;
        EVP_DigestUpdate(s.md, s.in.data(), got);
      }
      s.zs.next_in = reinterpret_cast<Bytef*>(s.in.data());
      s.zs.avail_in = static_cast<uInt>(got);
    }
    if (!s.any_input) throw InputError(fmt::format("{}: empty file", path_));
    text_.resize(before + kOut);
    s.zs.next_out = reinterpret_cast<Bytef*>(text_.data() + before);
    s.zs.avail_out = static_cast<uInt>(kOut);
    const int rc = inflate(&s.zs, Z_NO_FLUSH);
    text_.resize(before + kOut - s.zs.avail_out);
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are one stream (as gzip(1) reads them).
      if (s.zs.avail_in == 0 && s.file_done) {
        s.stream_done = true;
        break;
      }
      inflateReset(&s.zs);
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR)
      throw InputError(fmt::format("{}: corrupt gzip data ({})", path_, s.zs.msg ? s.zs.msg : "invalid data"));
    if ((rc == Z_BUF_ERROR || rc == Z_OK) && s.zs.avail_in == 0 && s.file_done && text_.size() == before)
      throw InputError(fmt::format("{}: truncated gzip data", path_));
  }
  return text_.size() > before;
}

bool GzipLines::next(std::string_view& line) {
  while (true) {
    const size_t nl = text_.find('\n', pos_);
    if (nl != std::string::npos) {
      line = std::string_view(text_).substr(pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    // No full line left: keep the partial one, decompress more.
    text_.erase(0, pos_);
    pos_ = 0;
    if (!inflate_more()) {
      if (text_.empty()) return false;
      line = std::string_view(text_);  // the last line lacks its LF
      pos_ = text_.size();
      break;
    }
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ++lineno_;
  return true;
}

std::string GzipLines::sha256_hex() {
  while (inflate_more()) text_.clear(), pos_ = 0;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(s_->md, md, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

}  // namespace adgnn::detail
