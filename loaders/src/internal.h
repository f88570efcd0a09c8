// Helpers shared by the loader sources; not part of the public interface.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adgnn/loaders.h"

namespace adgnn::detail {

// CSR over `num_nodes` rows from (src, dst) pairs, in input order within each row (stable).
Csr csr_from_edges(int64_t num_nodes, const std::vector<int64_t>& src,
                   const std::vector<int64_t>& dst);

// Splits `text` into lines (LF or CRLF), without the terminators; the last line may lack LF.
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    size_t nl = text_.find('\n', pos_);
    if (nl == std::string_view::npos) nl = text_.size();
    line = text_.substr(pos_, nl - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = nl + 1;
    ++lineno_;
    return true;
  }
  int64_t lineno() const { return lineno_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t lineno_ = 0;
};

// Parses one integer / float token (surrounding spaces allowed); throws InputError naming
// `where` and line `lineno` on anything else.
int64_t parse_int(std::string_view tok, const std::string& where, int64_t lineno);
double parse_double(std::string_view tok, const std::string& where, int64_t lineno);
std::vector<std::string_view> split(std::string_view s, char sep);

bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
std::vector<std::string> list_directory(const std::string& dir);  // names, sorted
std::string join_path(const std::string& a, const std::string& b);
std::string base_name(const std::string& path);

// Hash of several files: sha256 over "<name> <sha256>\n" lines in name order.
std::string combined_sha256(const std::vector<std::pair<std::string, std::string>>& name_hash);

// Loads every "<prefix>_split_0.6_0.2_<i>.npz" in `dir` as split family `family`.
void load_geomgcn_split_files(Graph& g, const std::string& dir, const std::string& prefix,
                              const std::string& family,
                              std::vector<std::pair<std::string, std::string>>* hashes);

// The class count (largest label + 1); a negative label throws InputError naming `where`, but
// kUnlabelled where the format has unlabelled nodes (OGB).
int64_t count_classes(const std::vector<int64_t>& labels, const std::string& where,
                      bool allow_unlabelled = false);

}  // namespace adgnn::detail
