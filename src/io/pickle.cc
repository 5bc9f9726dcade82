// The pickle machine of pickle.h: Python's opcodes (Lib/pickletools.py documents them) over an arena of values.
#include "io/pickle.h"

#include <systolic/error.h>

#include <array>
#include <cstring>
#include <string_view>
#include <unordered_map>

namespace systolic::io::pickle {

namespace {

// The callables a numpy object array's pickle names (Keras's datasets/npz_utils.py allows exactly these).
constexpr std::array<std::string_view, 4> kAllowedGlobals = {"numpy.ndarray", "numpy.dtype",
                                                             "numpy.core.multiarray._reconstruct",
                                                             "numpy._core.multiarray._reconstruct"};

class Machine {
 public:
  Machine(const void* data, std::size_t size, const std::string& name)
      : p_(static_cast<const unsigned char*>(data)), size_(size), name_(name) {}

  Pickle run() {
    for (;;) {
      const std::size_t at = pos_;
      const unsigned char op = byte();
      switch (op) {
        case 0x80:
          byte();
          break;  // PROTO
        case 0x95:
          take(8);
          break;  // FRAME: its length is only a hint
        case '.':
          return finish(at);  // STOP
        case '(':
          marks_.push_back(stack_.size());
          break;
        case '0':
          pop(at);
          break;
        case '1':
          pop_mark(at);
          break;
        case '2':
          push_index(top(at));
          break;
        case 'J':
          push_int(std::int32_t(le(4)));
          break;
        case 'K':
          push_int(byte());
          break;
        case 'M':
          push_int(std::int64_t(le(2)));
          break;
        case 0x8a:
          push_long(byte(), at);
          break;
        case 0x8b:
          push_long(length(4, at), at);
          break;
        case 'I':
          push_text_int(line(), at);
          break;
        case 'L':
          push_text_int(line(), at);
          break;
        case 'N':
          push(Value{});
          break;
        case 0x88:
          push_bool(true);
          break;
        case 0x89:
          push_bool(false);
          break;
        case 'G': {
          std::uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = bits << 8 | byte();
          Value v{.kind = Value::Kind::floating};
          std::memcpy(&v.floating, &bits, 8);
          push(std::move(v));
          break;
        }
        case 'U':
          push_text(Value::Kind::string, byte());
          break;
        case 'T':
          push_text(Value::Kind::string, length(4, at));
          break;
        case 0x8c:
          push_text(Value::Kind::string, byte());
          break;
        case 'X':
          push_text(Value::Kind::string, length(4, at));
          break;
        case 0x8d:
          push_text(Value::Kind::string, length(8, at));
          break;
        case 'C':
          push_text(Value::Kind::bytes, byte());
          break;
        case 'B':
          push_text(Value::Kind::bytes, length(4, at));
          break;
        case 0x8e:
          push_text(Value::Kind::bytes, length(8, at));
          break;
        case 0x96:
          push_text(Value::Kind::bytes, length(8, at));
          break;
        case ']':
          push(Value{.kind = Value::Kind::list});
          break;
        case ')':
          push(Value{.kind = Value::Kind::tuple});
          break;
        case '}':
          push(Value{.kind = Value::Kind::dict});
          break;
        case 'l':
          push_marked(Value::Kind::list, at);
          break;
        case 't':
          push_marked(Value::Kind::tuple, at);
          break;
        case 'd':
          push_marked(Value::Kind::dict, at);
          break;
        case 0x85:
          push_tuple(1, at);
          break;
        case 0x86:
          push_tuple(2, at);
          break;
        case 0x87:
          push_tuple(3, at);
          break;
        case 'a': {
          std::uint32_t item = pop(at);
          append(top(at), {item}, Value::Kind::list, at);
          break;
        }
        case 'e': {
          const std::uint32_t list = below_mark(at);  // before pop_mark: the arguments' order is unspecified
          append(list, pop_mark(at), Value::Kind::list, at);
          break;
        }
        case 's': {
          std::uint32_t value = pop(at), key = pop(at);
          append(top(at), {key, value}, Value::Kind::dict, at);
          break;
        }
        case 'u': {
          std::uint32_t dict = below_mark(at);
          std::vector<std::uint32_t> items = pop_mark(at);
          if (items.size() % 2) bad(at, "SETITEMS with an odd number of items");
          append(dict, items, Value::Kind::dict, at);
          break;
        }
        case 'c': {
          std::string module = line(), name = line();
          push_global(module + "." + name, at);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          std::uint32_t name = pop(at), module = pop(at);
          if (values_[name].kind != Value::Kind::string || values_[module].kind != Value::Kind::string)
            bad(at, "STACK_GLOBAL without two strings");
          push_global(values_[module].text + "." + values_[name].text, at);
          break;
        }
        case 'R':     // REDUCE
        case 0x81: {  // NEWOBJ
          std::uint32_t args = pop(at), callable = pop(at);
          if (values_[callable].kind != Value::Kind::global)
            bad(at, "a call of something that is not a global");
          if (values_[args].kind != Value::Kind::tuple) bad(at, "a call whose arguments are not a tuple");
          push(Value{.kind = Value::Kind::call, .items = {callable, args}});
          break;
        }
        case 'b': {  // BUILD
          std::uint32_t state = pop(at);
          Value& object = values_[top(at)];
          if (object.kind != Value::Kind::call || object.items.size() != 2)
            bad(at, "BUILD on something that is not a new object");
          object.items.push_back(state);
          break;
        }
        case 'p':
          memo_[std::uint32_t(text_number(line(), at))] = top(at);
          break;
        case 'q':
          memo_[byte()] = top(at);
          break;
        case 'r':
          memo_[std::uint32_t(le(4))] = top(at);
          break;
        case 0x94:
          memo_[std::uint32_t(memo_.size())] = top(at);
          break;
        case 'g':
          get(std::uint64_t(text_number(line(), at)), at);
          break;
        case 'h':
          get(byte(), at);
          break;
        case 'j':
          get(le(4), at);
          break;
        default:
          bad(at, fmt::format("opcode 0x{:02x} is not one numpy's pickles use", int(op)));
      }
    }
  }

 private:
  [[noreturn]] void bad(std::size_t at, const std::string& what) const {
    fail("{}: corrupt pickle at byte {}: {}", name_, at, what);
  }
  unsigned char byte() {
    if (pos_ >= size_) fail("{}: truncated pickle (no STOP after {} bytes)", name_, size_);
    return p_[pos_++];
  }
  const unsigned char* take(std::size_t n) {
    if (n > size_ - pos_)
      fail("{}: truncated pickle ({} bytes wanted at byte {}, {} left)", name_, n, pos_, size_ - pos_);
    const unsigned char* q = p_ + pos_;
    pos_ += n;
    return q;
  }
  std::uint64_t le(int n) {
    const unsigned char* q = take(std::size_t(n));
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | q[i];
    return v;
  }
  std::size_t length(int n, std::size_t at) {
    std::uint64_t v = le(n);
    if (n == 4 && (v & 0x80000000u)) bad(at, "a negative length");
    if (v > size_) bad(at, fmt::format("a length of {} bytes in a pickle of {}", v, size_));
    return std::size_t(v);
  }
  std::string line() {
    std::size_t start = pos_;
    while (byte() != '\n') {
    }
    return std::string(reinterpret_cast<const char*>(p_ + start), pos_ - 1 - start);
  }
  std::int64_t text_number(std::string s, std::size_t at) {
    if (!s.empty() && s.back() == 'L') s.pop_back();
    if (s.empty() || s.size() > 18) bad(at, fmt::format("'{}' is not a number this reader takes", s));
    std::size_t i = s[0] == '-' ? 1 : 0;
    if (i == s.size()) bad(at, "'-' is not a number");
    std::int64_t v = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') bad(at, fmt::format("'{}' is not a number", s));
      v = v * 10 + (s[i] - '0');
    }
    return s[0] == '-' ? -v : v;
  }

  std::uint32_t push(Value v) {
    values_.push_back(std::move(v));
    std::uint32_t i = std::uint32_t(values_.size() - 1);
    stack_.push_back(i);
    return i;
  }
  void push_index(std::uint32_t i) { stack_.push_back(i); }
  void push_int(std::int64_t v) { push(Value{.kind = Value::Kind::integer, .integer = v}); }
  void push_bool(bool v) { push(Value{.kind = Value::Kind::boolean, .integer = v}); }
  void push_long(std::size_t n, std::size_t at) {
    if (n > 8) bad(at, fmt::format("an integer of {} bytes (this reader takes 8 at most)", n));
    const unsigned char* q = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = v << 8 | q[i];
    if (n > 0 && n < 8 && (q[n - 1] & 0x80)) v |= ~std::uint64_t(0) << (8 * n);  // sign extension
    push_int(std::int64_t(v));
  }
  void push_text_int(const std::string& s, std::size_t at) {
    if (s == "00" || s == "01") return push_bool(s == "01");
    push_int(text_number(s, at));
  }
  void push_text(Value::Kind kind, std::size_t n) {
    const unsigned char* q = take(n);
    push(Value{.kind = kind, .text = std::string(reinterpret_cast<const char*>(q), n)});
  }
  void push_global(const std::string& name, std::size_t at) {
    bool allowed = false;
    for (auto g : kAllowedGlobals) allowed = allowed || g == name;
    if (!allowed)
      fail(
          "{}: the pickle names {} (at byte {}): refused, only numpy's array reconstruction may be named "
          "(numpy.ndarray, numpy.dtype, multiarray._reconstruct)",
          name_, name, at);
    push(Value{.kind = Value::Kind::global, .text = name});
  }
  void push_marked(Value::Kind kind, std::size_t at) {
    std::vector<std::uint32_t> items = pop_mark(at);
    if (kind == Value::Kind::dict && items.size() % 2) bad(at, "DICT with an odd number of items");
    push(Value{.kind = kind, .items = std::move(items)});
  }
  void push_tuple(std::size_t n, std::size_t at) {
    if (stack_.size() < floor() + n) bad(at, "stack underflow");
    std::vector<std::uint32_t> items(stack_.end() - std::ptrdiff_t(n), stack_.end());
    stack_.resize(stack_.size() - n);
    push(Value{.kind = Value::Kind::tuple, .items = std::move(items)});
  }
  void append(std::uint32_t to, const std::vector<std::uint32_t>& items, Value::Kind kind, std::size_t at) {
    Value& target = values_[to];
    if (target.kind != kind)
      bad(at, kind == Value::Kind::list ? "APPEND to something that is not a list"
                                        : "SETITEM on something that is not a dict");
    target.items.insert(target.items.end(), items.begin(), items.end());
  }
  void get(std::uint64_t key, std::size_t at) {
    auto it = memo_.find(std::uint32_t(key));
    if (key > 0xffffffffu || it == memo_.end()) bad(at, fmt::format("memo key {} was never stored", key));
    push_index(it->second);
  }

  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::uint32_t top(std::size_t at) const {
    if (stack_.size() <= floor()) bad(at, "stack underflow");
    return stack_.back();
  }
  std::uint32_t pop(std::size_t at) {
    std::uint32_t v = top(at);
    stack_.pop_back();
    return v;
  }
  std::vector<std::uint32_t> pop_mark(std::size_t at) {
    if (marks_.empty()) bad(at, "no MARK to pop to");
    std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<std::uint32_t> items(stack_.begin() + std::ptrdiff_t(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  std::uint32_t below_mark(std::size_t at) const {
    if (marks_.empty()) bad(at, "no MARK");
    if (marks_.back() == 0 || (marks_.size() > 1 && marks_.back() <= marks_[marks_.size() - 2]))
      bad(at, "nothing below the MARK");
    return stack_[marks_.back() - 1];
  }
  Pickle finish(std::size_t at) {
    if (!marks_.empty()) bad(at, "STOP with an open MARK");
    if (stack_.size() != 1) bad(at, fmt::format("STOP with {} values on the stack, not 1", stack_.size()));
    return Pickle{std::move(values_), stack_.back()};
  }

  const unsigned char* p_;
  std::size_t size_, pos_ = 0;
  const std::string& name_;
  std::vector<Value> values_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, std::uint32_t> memo_;
};

}  // namespace

Pickle parse(const void* data, std::size_t size, const std::string& name) {
  return Machine(data, size, name).run();
}

}  // namespace systolic::io::pickle
