// The lines of a gzip file, decompressed block by block (so a multi-GB csv.gz never sits in
// memory whole), with the SHA-256 of its compressed bytes computed on the way. Internal to the
// loaders.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace adgnn::detail {

class GzipLines {
 public:
  // Opens `path`; a missing or unreadable file throws InputError naming it.
  explicit GzipLines(const std::string& path);
  ~GzipLines();
  GzipLines(const GzipLines&) = delete;
  GzipLines& operator=(const GzipLines&) = delete;

  // The next line without its LF / CRLF, valid until the next call; false at the end. Corrupt,
  // truncated or empty files throw InputError ("<path>: corrupt gzip data (...)", "truncated gzip
  // data", "empty file"), as gunzip does. Concatenated gzip members read as one stream.
  bool next(std::string_view& line);
  int64_t lineno() const { return lineno_; }
  // SHA-256 of the whole compressed file (reads, and checks, whatever next() has not reached).
  std::string sha256_hex();

 private:
  bool inflate_more();  // appends decompressed bytes to text_; false at the end of the data

  struct State;
  std::unique_ptr<State> s_;
  std::string path_, text_;
  size_t pos_ = 0;
  int64_t lineno_ = 0;
};

}  // namespace adgnn::detail
