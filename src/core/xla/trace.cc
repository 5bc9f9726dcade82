// Arrays, traces and recorded programs (trace.h).
#include "core/xla/trace.h"

#include <fmt/format.h>
#include <systolic/error.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <unordered_map>

#include "core/tensor_internals.h"

namespace systolic::xla {

namespace {

thread_local Trace* t_current = nullptr;

// Compiled programs by (platform, replicas, text): a program is compiled once per process. Threads that want the
// same program at once (the replicas' eager ops) wait for the one compiling it.
std::mutex g_cache_mutex;
std::unordered_map<std::string, std::shared_future<std::shared_ptr<Executable>>>& cache() {
  static auto* c = new std::unordered_map<std::string, std::shared_future<std::shared_ptr<Executable>>>;
  return *c;
}

CompileStats g_stats;

std::shared_ptr<Executable> compiled(Platform platform, int replicas, const std::string& text, int outputs) {
  std::string key = fmt::format("{}/{}/", platform_name(platform), replicas) + text;
  std::promise<std::shared_ptr<Executable>> promise;
  std::shared_future<std::shared_ptr<Executable>> pending;
  {
    std::lock_guard lock(g_cache_mutex);
    auto it = cache().find(key);
    if (it != cache().end()) {
      ++g_stats.hits;
      pending = it->second;
    } else {
      cache().emplace(key, promise.get_future().share());
    }
  }
  if (pending.valid())
    return pending.get();  // compiled, or being compiled by another thread (its error rethrown)
  auto t0 = std::chrono::steady_clock::now();
  try {
    auto exe = std::make_shared<Executable>(Runtime::get(platform), text, replicas, outputs);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    promise.set_value(exe);
    std::lock_guard lock(g_cache_mutex);
    ++g_stats.compiles;
    g_stats.seconds += seconds;
    return exe;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard lock(g_cache_mutex);
    cache().erase(key);  // a later call tries again
    throw;
  }
}

std::size_t elem_bytes(DType t) {
  return dtype_size(t);
}

}  // namespace

CompileStats compile_stats() {
  std::lock_guard lock(g_cache_mutex);
  return g_stats;
}

// ---- Array --------------------------------------------------------------------------------------------------------

Array::Array(Platform platform, int device, DType dtype, std::int64_t numel)
    : platform_(platform), device_(device), dtype_(dtype), numel_(numel) {}

Array::~Array() {
  if (trace_) trace_->forget(this);
}

Buffer& Array::materialized() {
  if (!buffer_) {
    std::vector<char> zeros(static_cast<std::size_t>(numel_) * elem_bytes(dtype_), 0);
    buffer_ = Buffer::from_host(Runtime::get(platform_), zeros.data(), dtype_, {numel_}, device_);
  }
  return *buffer_;
}

void Array::read_bytes(std::size_t byte_offset, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  SYSTOLIC_CHECK(
      !trace_ || !trace_->wrote(*this),
      "xla: a tensor written by the program being traced cannot be read on the host until it runs");
  const std::size_t total = static_cast<std::size_t>(numel_) * elem_bytes(dtype_);
  SYSTOLIC_CHECK(byte_offset + bytes <= total, "xla: read of {} bytes at {} past an array of {}", bytes,
                 byte_offset, total);
  if (byte_offset == 0 && bytes == total) return materialized().to_host(dst, bytes);
  std::vector<char> host(total);
  materialized().to_host(host.data(), total);
  std::memcpy(dst, host.data() + byte_offset, bytes);
}

void Array::write_bytes(std::size_t byte_offset, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const std::size_t total = static_cast<std::size_t>(numel_) * elem_bytes(dtype_);
  SYSTOLIC_CHECK(byte_offset + bytes <= total, "xla: write of {} bytes at {} past an array of {}", bytes,
                 byte_offset, total);
  SYSTOLIC_CHECK(!trace_, "xla: internal: a host write into an array the current trace holds");
  if (byte_offset == 0 && bytes == total) {
    buffer_ = Buffer::from_host(Runtime::get(platform_), src, dtype_, {numel_}, device_);
    return;
  }
  std::vector<char> host(total);
  materialized().to_host(host.data(), total);
  std::memcpy(host.data() + byte_offset, src, bytes);
  buffer_ = Buffer::from_host(Runtime::get(platform_), host.data(), dtype_, {numel_}, device_);
}

ArrayView array_of(const Tensor& t) {
  const auto& storage = TensorInternals::storage(t);
  SYSTOLIC_CHECK(storage && storage->xla_array(), "xla: an XLA op was given a tensor on {}",
                 t.device().str());
  return {storage->xla_array(),
          static_cast<std::int64_t>(TensorInternals::byte_offset(t) / dtype_size(t.dtype()))};
}

// ---- Trace --------------------------------------------------------------------------------------------------------

Trace::Trace(int replicas, int replica) : replicas_(replicas), replica_(replica), outer_(t_current) {
  SYSTOLIC_CHECK(replicas >= 1 && replica >= 0 && replica < replicas, "xla: replica {} of a program for {}",
                 replica, replicas);
  t_current = this;
}

Trace::~Trace() {
  for (auto& [array, st] : states_) array->trace_ = nullptr;
  t_current = outer_;
}

Trace* Trace::current() {
  return t_current;
}

Trace::State& Trace::state(const std::shared_ptr<Array>& array) {
  if (!placed_) {
    platform_ = array->platform();
    device_ = array->device();
    placed_ = true;
  }
  SYSTOLIC_CHECK(array->platform() == platform_ && array->device() == device_,
                 "xla: one program reads arrays of xla:{}:{} and xla:{}:{}", platform_name(platform_),
                 device_, platform_name(array->platform()), array->device());
  SYSTOLIC_CHECK(!array->trace_ || array->trace_ == this, "xla: an array is held by another trace");
  auto [it, added] = states_.try_emplace(array.get());
  if (added) array->trace_ = this;
  return it->second;
}

void Trace::forget(Array* array) {
  states_.erase(array);
}

bool Trace::wrote(const Array& array) const {
  auto it = states_.find(const_cast<Array*>(&array));
  return it != states_.end() && it->second.written;
}

Value Trace::all_reduce_sum(const Value& v) {
  if (replicas_ == 1) return v;
  std::string groups;
  for (int r = 0; r < replicas_; ++r) groups += (r ? ", " : "") + std::to_string(r);
  return b_.op("stablehlo.all_reduce", {v}, v.type,
               fmt::format("replica_groups = dense<[[{}]]> : tensor<1x{}xi64>", groups, replicas_),
               b_.binary_region("stablehlo.add", v.type.elem));
}

Value Trace::replica_id() {
  return b_.op("stablehlo.replica_id", {}, Type{Elem::u32, {}});
}

Value Trace::read(const std::shared_ptr<Array>& array, std::int64_t offset,
                  const std::vector<std::int64_t>& dims) {
  Type want{elem_of(array->dtype()), dims};
  if (want.numel() == 0) return b_.constant(0.0, want);
  State& st = state(array);
  if (st.value.empty()) {  // first use, before any write: an argument
    st.argument = static_cast<int>(args_.size());
    st.value = "%arg" + std::to_string(st.argument);
    args_.push_back(array);
    arg_types_.push_back(array->type());
  }
  Value whole{st.value, array->type()};
  Value part = b_.slice(whole, {offset}, {offset + want.numel()});
  return b_.reshape(part, dims);
}

void Trace::write(const std::shared_ptr<Array>& array, std::int64_t offset, const Value& v) {
  SYSTOLIC_CHECK(v.type.elem == elem_of(array->dtype()), "xla: a value of {} written into an array of {}",
                 v.type.str(), dtype_name(array->dtype()));
  const std::int64_t n = v.type.numel();
  if (n == 0) return;
  SYSTOLIC_CHECK(offset >= 0 && offset + n <= array->numel(),
                 "xla: a write of {} elements at {} past an array of {}", n, offset, array->numel());
  Value flat = b_.reshape(v, {n});
  State& st = state(array);
  if (n < array->numel()) {
    Value whole = st.value.empty() ? read(array, 0, {array->numel()}) : Value{st.value, array->type()};
    flat = b_.dynamic_update_slice(whole, flat, std::vector<std::int64_t>{offset});
  }
  State& s2 = state(array);  // read() may have added the state
  s2.value = flat.name;
  if (!s2.written) {
    s2.written = true;
    s2.order = writes_++;
  }
}

Value Trace::read(const Tensor& t) {
  ArrayView a = array_of(t);
  return read(a.array, a.offset, t.shape().dims());
}

void Trace::write(const Tensor& t, const Value& v) {
  SYSTOLIC_CHECK(v.type.numel() == t.numel(), "xla: a value of {} written into a tensor of shape {}",
                 v.type.str(), t.shape().str());
  ArrayView a = array_of(t);
  write(a.array, a.offset, v);
}

void Trace::write_host(const std::shared_ptr<Array>& array, std::int64_t offset, const void* src,
                       std::int64_t count) {
  auto constant = std::make_shared<Array>(array->platform(), array->device(), array->dtype(), count);
  constant->buffer_ =
      Buffer::from_host(Runtime::get(array->platform()), src, array->dtype(), {count}, array->device());
  constants_.push_back(constant);
  write(array, offset, read(constant, 0, {count}));
}

std::shared_ptr<Recorded> Trace::finish() {
  SYSTOLIC_CHECK(replicas_ == 1 || !placed_ || device_ == replica_,
                 "xla: replica {} of an SPMD program traced on the arrays of device {}", replica_, device_);
  auto rec = std::make_shared<Recorded>();
  rec->platform_ = platform_;
  rec->replicas_ = replicas_;
  rec->device_ = device_;
  rec->args_ = args_;
  rec->constants_ = constants_;
  // Results: the arrays written and still alive, in the order of their first write (for a whole step, not the
  // scratch ones).
  std::vector<std::pair<std::int64_t, Array*>> written;
  for (auto& [array, st] : states_)
    if (st.written && !(drop_scratch_ && array->scratch())) written.emplace_back(st.order, array);
  std::sort(written.begin(), written.end());
  std::vector<std::string> result_values;
  // An array the program reads and writes (weights, optimizer slots, the step's totals) is donated: its argument
  // aliases its result, so XLA updates the buffer in place instead of writing a new one.
  std::vector<int> aliases(arg_types_.size(), -1);
  for (auto& [order, array] : written) {
    State& st = states_[array];
    if (st.argument >= 0)
      aliases[static_cast<std::size_t>(st.argument)] = static_cast<int>(result_values.size());
    rec->result_types_.push_back(array->type());
    result_values.push_back(st.value);
    rec->results_.push_back(array->weak_from_this());
  }
  std::string sig, ret_types, ret_values;
  for (std::size_t i = 0; i < arg_types_.size(); ++i)
    sig += fmt::format("{}%arg{}: {}{}", i ? ", " : "", i, arg_types_[i].str(),
                       aliases[i] >= 0 ? fmt::format(" {{tf.aliasing_output = {} : i32}}", aliases[i]) : "");
  for (std::size_t i = 0; i < result_values.size(); ++i) {
    ret_types += (i ? ", " : "") + rec->result_types_[i].str();
    ret_values += (i ? ", " : "") + result_values[i];
  }
  rec->text_ = fmt::format(
      "module @systolic attributes {{mhlo.num_replicas = {} : i32, mhlo.num_partitions = 1 : i32}} {{\n"
      "  func.func public @main({}) -> ({}) {{\n{}    \"func.return\"({}) : ({}) -> ()\n  }}\n}}\n",
      replicas_, sig, ret_types, b_.body(), ret_values, ret_types);
  if (!rec->results_.empty() && placed_)
    // Replica r of an SPMD program traces on device r; a one-device program runs where its arrays are
    // (Executable::execute picks the device).
    rec->exe_ = compiled(platform_, replicas_, rec->text_, static_cast<int>(rec->results_.size()));
  for (auto& [array, st] : states_) array->trace_ = nullptr;
  states_.clear();
  return rec;
}

// ---- Recorded -----------------------------------------------------------------------------------------------------

bool Recorded::current() const {
  for (auto& w : args_)
    if (w.expired()) return false;
  for (auto& w : results_)
    if (w.expired()) return false;
  return true;
}

void Recorded::check_one_program(const std::vector<Recorded*>& programs) {
  const std::string& a = programs[0]->text_;
  for (std::size_t r = 1; r < programs.size(); ++r) {
    const std::string& b = programs[r]->text_;
    if (b == a) continue;
    std::size_t at = 0;
    while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
    std::size_t begin = at == 0 ? 0 : a.rfind('\n', at - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    std::size_t end = a.find('\n', at);
    if (end == std::string::npos) end = a.size();
    fail(
        "xla: replica {} traced another program than replica 0 (an SPMD step must be one program): the first "
        "difference is in \"{}\"",
        r, a.substr(begin, std::min<std::size_t>(end - begin, 200)));
  }
}

bool Recorded::run_replicas(const std::vector<Recorded*>& programs) {
  SYSTOLIC_CHECK(!programs.empty(), "xla: internal: no program to run");
  const Recorded& first = *programs[0];
  if (!first.exe_) return true;  // nothing written: nothing to run
  SYSTOLIC_CHECK(static_cast<int>(programs.size()) == first.replicas_,
                 "xla: a program for {} replicas run with {} argument lists", first.replicas_,
                 programs.size());
  for (auto* p : programs)
    if (p->exe_ != first.exe_)
      check_one_program(programs);  // one text is one executable: names the difference
  std::vector<std::vector<std::shared_ptr<Array>>> args(programs.size()), results(programs.size());
  std::vector<std::vector<Buffer*>> lists(programs.size());
  for (std::size_t r = 0; r < programs.size(); ++r) {
    for (auto& w : programs[r]->args_) {
      auto a = w.lock();
      if (!a) return false;
      args[r].push_back(a);
    }
    for (auto& w : programs[r]->results_) {
      auto a = w.lock();
      if (!a) return false;
      results[r].push_back(a);
    }
    for (auto& a : args[r]) lists[r].push_back(&a->materialized());
  }
  std::vector<std::vector<std::int64_t>> dims;
  std::vector<DType> dtypes;
  for (auto& t : first.result_types_) {
    dims.push_back(t.dims);
    dtypes.push_back(dtype_of(t.elem));
  }
  auto out = first.exe_->execute(lists, dims, dtypes, first.device_);
  for (std::size_t r = 0; r < programs.size(); ++r)
    for (std::size_t i = 0; i < results[r].size(); ++i) results[r][i]->set_buffer(out[r][i]);
  return true;
}

// ---- eager ops, copies ----------------------------------------------------------------------------------------------

void traced(const std::function<void()>& emit) {
  if (Trace::current()) return emit();
  std::shared_ptr<Recorded> rec;
  {
    Trace trace;
    emit();
    rec = trace.finish();
  }
  SYSTOLIC_CHECK(rec->run(), "xla: internal: an eager op's arrays went away while it ran");
}

void copy(const Tensor& dst, const Tensor& src) {
  const std::size_t bytes = dst.nbytes();
  if (bytes == 0) return;
  Trace* trace = Trace::current();
  if (src.device().is_xla() && dst.device().is_xla()) {
    traced([&] {
      Trace& t = *Trace::current();
      t.write(dst, t.read(src));
    });
    return;
  }
  if (dst.device().is_xla()) {  // from the host (a CPU tensor; a GPU's goes through the host)
    Tensor host = src.device().is_cpu() ? src : src.to(Device::cpu());
    ArrayView a = array_of(dst);
    if (trace)
      trace->write_host(a.array, a.offset, host.raw_data(), dst.numel());
    else
      a.array->write_bytes(static_cast<std::size_t>(a.offset) * dtype_size(dst.dtype()), host.raw_data(),
                           bytes);
    return;
  }
  ArrayView a = array_of(src);  // to the host
  if (dst.device().is_cpu()) {
    a.array->read_bytes(static_cast<std::size_t>(a.offset) * dtype_size(src.dtype()),
                        const_cast<Tensor&>(dst).raw_data(), bytes);
    return;
  }
  Tensor host(src.shape(), src.dtype());
  a.array->read_bytes(static_cast<std::size_t>(a.offset) * dtype_size(src.dtype()), host.raw_data(), bytes);
  const_cast<Tensor&>(dst).copy_from(host);
}

}  // namespace systolic::xla
