// Keras's TextVectorization in "int" mode (include/systolic/text.h), after keras/src/layers/preprocessing/
// text_vectorization.py and index_lookup.py.
#include <systolic/error.h>
#include <systolic/text.h>

#include <algorithm>
#include <string_view>

#include "io/files.h"

namespace systolic {

namespace {

constexpr std::string_view kPunctuation = R"(!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)";

bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// The UTF-8 sequences of `s`, one per code point; a byte that starts no valid sequence becomes U+FFFD.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len > 1) {  // overlong forms, surrogates and code points above U+10FFFF are invalid too
      std::uint32_t cp = c & (0x7f >> len);
      for (std::size_t k = 1; k < len; ++k) cp = cp << 6 | (p[i + k] & 0x3f);
      static constexpr std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    }
    if (ok) {
      out.emplace_back(s, i, len);
      i += len;
    } else {
      out.emplace_back("\xef\xbf\xbd");
      i += 1;
    }
  }
  return out;
}

}  // namespace

TextVectorization::TextVectorization(TextVectorizationOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  SYSTOLIC_CHECK(
      o.standardize.empty() || o.standardize == "lower_and_strip_punctuation" || o.standardize == "lower" ||
          o.standardize == "strip_punctuation",
      "TextVectorization: standardize \"{}\" is not one of \"lower_and_strip_punctuation\", \"lower\", "
      "\"strip_punctuation\" or \"\" (none)",
      o.standardize);
  SYSTOLIC_CHECK(o.split.empty() || o.split == "whitespace" || o.split == "character",
                 "TextVectorization: split \"{}\" is not one of \"whitespace\", \"character\" or \"\" (none)",
                 o.split);
  SYSTOLIC_CHECK(
      o.max_tokens == 0 || o.max_tokens > 1,
      "TextVectorization: max_tokens must be greater than 1 (it counts \"\" and \"[UNK]\"), received {}",
      o.max_tokens);
  SYSTOLIC_CHECK(o.output_sequence_length >= 0, "TextVectorization: output_sequence_length {} is negative",
                 o.output_sequence_length);
  SYSTOLIC_CHECK(o.vocabulary.empty() || o.vocabulary_file.empty(),
                 "TextVectorization: give a vocabulary or a vocabulary_file, not both");
  if (!o.vocabulary.empty()) set_vocabulary(o.vocabulary);
  if (!o.vocabulary_file.empty()) load_vocabulary(o.vocabulary_file);
}

std::vector<std::string> TextVectorization::tokens(const std::string& text) const {
  std::string s = text;
  const std::string& how = options_.standardize;
  if (how == "lower" || how == "lower_and_strip_punctuation")
    for (char& c : s)
      if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  if (how == "strip_punctuation" || how == "lower_and_strip_punctuation")
    std::erase_if(s, [](char c) { return kPunctuation.find(c) != std::string_view::npos; });
  if (options_.split == "character") return code_points(s);
  if (options_.split.empty()) return {s};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    while (i < s.size() && ascii_space(s[i])) ++i;
    std::size_t j = i;
    while (j < s.size() && !ascii_space(s[j])) ++j;
    if (j > i) out.emplace_back(s, i, j - i);
    i = j;
  }
  return out;
}

void TextVectorization::adapt(const std::vector<std::string>& texts) {
  std::unordered_map<std::string, std::int64_t> counts;
  for (const auto& t : texts)
    for (auto& token : tokens(t)) ++counts[token];
  counts.erase("");  // Keras removes the mask and OOV tokens from its counts
  counts.erase("[UNK]");
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  // np.lexsort((tokens, counts))[::-1]: by count, then by token bytes, both descending.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first > b.first;
  });
  if (options_.max_tokens > 0 && std::int64_t(sorted.size()) > options_.max_tokens - 2)
    sorted.resize(std::size_t(options_.max_tokens - 2));
  vocabulary_.clear();
  index_.clear();
  for (auto& [token, count] : sorted) {
    index_[token] = std::int32_t(vocabulary_.size() + 2);
    vocabulary_.push_back(token);
  }
}

void TextVectorization::set_vocabulary(const std::vector<std::string>& vocabulary) {
  SYSTOLIC_CHECK(!vocabulary.empty(), "TextVectorization: cannot set an empty vocabulary");
  std::size_t first = vocabulary.size() >= 2 && vocabulary[0].empty() && vocabulary[1] == "[UNK]" ? 2 : 0;
  std::vector<std::string> tokens(vocabulary.begin() + std::ptrdiff_t(first), vocabulary.end());
  SYSTOLIC_CHECK(
      options_.max_tokens == 0 || std::int64_t(tokens.size()) + 2 <= options_.max_tokens,
      "TextVectorization: attempted to set a vocabulary larger than the maximum vocab size: {} tokens "
      "and \"\" and \"[UNK]\" against max_tokens {}",
      tokens.size(), options_.max_tokens);
  std::unordered_map<std::string, std::int32_t> index;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    SYSTOLIC_CHECK(
        !tokens[i].empty(),
        "TextVectorization: found the reserved mask token \"\" at vocabulary index {}: the vocabulary "
        "need not include \"\" and \"[UNK]\"; give them only at its start, in that order",
        i + first);
    SYSTOLIC_CHECK(index.emplace(tokens[i], std::int32_t(i + 2)).second,
                   "TextVectorization: the vocabulary repeats the term \"{}\" (index {}); uniquify it",
                   tokens[i], i + first);
  }
  vocabulary_ = std::move(tokens);
  index_ = std::move(index);
}

void TextVectorization::load_vocabulary(const std::string& path) {
  std::vector<char> bytes = io::read_file(path);
  std::string text(bytes.begin(), bytes.end());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<std::string> lines;
  for (std::size_t i = 0;;) {
    std::size_t j = text.find('\n', i);
    lines.push_back(text.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  try {
    set_vocabulary(lines);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

void TextVectorization::save_vocabulary(const std::string& path) const {
  std::string text;
  for (const auto& token : vocabulary_) {
    SYSTOLIC_CHECK(token.find('\n') == std::string::npos,
                   "TextVectorization: the token \"{}\" holds a newline and cannot be saved one per line",
                   token);
    text += token + "\n";
  }
  io::write_file_atomic(path, text.data(), text.size());
}

std::vector<std::string> TextVectorization::get_vocabulary() const {
  std::vector<std::string> v = {"", "[UNK]"};
  v.insert(v.end(), vocabulary_.begin(), vocabulary_.end());
  return v;
}

std::int64_t TextVectorization::vocabulary_size() const {
  return std::int64_t(vocabulary_.size()) + 2;
}

std::vector<std::int32_t> TextVectorization::ids(const std::string& text) const {
  std::vector<std::int32_t> out;
  for (auto& token : tokens(text)) {
    auto it = index_.find(token);
    out.push_back(it == index_.end() ? (token.empty() ? 0 : 1) : it->second);
  }
  return out;
}

Tensor TextVectorization::operator()(const std::vector<std::string>& texts) const {
  std::vector<std::vector<std::int32_t>> rows;
  std::int64_t longest = 0;
  for (const auto& t : texts) {
    rows.push_back(ids(t));
    longest = std::max(longest, std::int64_t(rows.back().size()));
  }
  const std::int64_t len = options_.output_sequence_length > 0 ? options_.output_sequence_length : longest;
  Tensor out = Tensor::zeros(Shape({std::int64_t(texts.size()), len}), DType::int32);
  std::int32_t* o = out.data<std::int32_t>();
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::copy_n(rows[i].begin(), std::min<std::int64_t>(len, std::int64_t(rows[i].size())),
                o + std::int64_t(i) * len);
  return out;
}

}  // namespace systolic
