// Tracing: how the XLA backend runs ops. A tensor on an xla device lives in an Array (the storage's device memory:
// one flat PJRT buffer of its dtype). While a Trace is current on the thread, ops do not run: they emit StableHLO
// (hlo.h) on the values of the arrays they read, and leave new values for the arrays they write. A trace is
// functional: a read of a tensor slices its array's current value; a write updates the array's value with
// dynamic_update_slice. finish() makes the program: its arguments are the arrays read before the trace wrote
// them (in the order of first use), its results the arrays the trace wrote that are still alive (temporaries freed
// during the trace are simply not results). Running it passes the arguments' buffers and gives the results' arrays
// their new buffers; a Recorded program runs again with whatever the same arrays hold then (the way a CUDA graph
// replays over the same addresses: what changes between steps must live in arrays, never in the trace).
//
// An op called with no trace current is traced alone and run at once (eager: compiled once per distinct program
// text, then taken from a cache). Host copies into and out of arrays run outside traces; a copy from the host into
// an array inside a trace becomes an argument bound to a copy of those bytes, kept by the recording (a constant of
// the program, as a CUDA graph would bake a host copy in).
#pragma once

#include <systolic/tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/xla/hlo.h"
#include "core/xla/pjrt.h"

namespace systolic::xla {

class Trace;

// The device memory of one storage on an xla device.
class Array : public std::enable_shared_from_this<Array> {
 public:
  Array(Platform platform, int device, DType dtype, std::int64_t numel);
  ~Array();
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  Platform platform() const { return platform_; }
  int device() const { return device_; }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return numel_; }
  Type type() const { return {elem_of(dtype_), {numel_}}; }

  // The buffer (zeros the first time, for an array never written: a program reads every argument).
  Buffer& materialized();
  void set_buffer(std::shared_ptr<Buffer> buffer) { buffer_ = std::move(buffer); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  // Whether the array's value matters only inside the program that writes it (a layer's activations and gradients
  // in a recorded step): a program traced with Trace::drop_scratch_results does not return it, so XLA need not
  // write it out, and the array keeps its old buffer. Ops traced alone always return what they write.
  bool scratch() const { return scratch_; }
  void set_scratch(bool scratch) { scratch_ = scratch; }

  // Host copies of `bytes` at `byte_offset` (outside a trace, or of an array the current trace has not written).
  void read_bytes(std::size_t byte_offset, void* dst, std::size_t bytes);
  void write_bytes(std::size_t byte_offset, const void* src, std::size_t bytes);

 private:
  friend class Trace;
  Platform platform_;
  int device_;
  DType dtype_;
  std::int64_t numel_;
  std::shared_ptr<Buffer> buffer_;
  bool scratch_ = false;
  Trace* trace_ = nullptr;  // the trace that holds a value of this array
};

// The array behind a tensor on an xla device (Error for any other tensor), with the tensor's element offset in it.
struct ArrayView {
  std::shared_ptr<Array> array;
  std::int64_t offset = 0;  // elements
};
ArrayView array_of(const Tensor& t);

// A finished trace: the program, what it reads and writes, compiled.
class Recorded {
 public:
  // Runs the program: the arguments' current buffers in, the results' arrays get the outputs. False (and nothing
  // runs) when an array it reads or writes no longer exists: record again.
  bool run() { return run_replicas({this}); }
  // One SPMD program over N devices: programs[r] is replica r's trace of the same step (Trace(N, r), on its own
  // arrays, on device r), and every trace must be the same text (check_one_program). Runs them as one execution of
  // the program with N argument lists. False (and nothing runs) when an array of one of them no longer exists.
  static bool run_replicas(const std::vector<Recorded*>& programs);
  // Error unless the replicas' traces are one program, naming the first line where one differs (whatever made it
  // differ belongs in an array, not in the program).
  static void check_one_program(const std::vector<Recorded*>& programs);
  // Whether every array it reads and writes still exists.
  bool current() const;
  const std::string& text() const { return text_; }
  int arguments() const { return static_cast<int>(args_.size()); }
  int results() const { return static_cast<int>(results_.size()); }

 private:
  friend class Trace;
  std::string text_;
  Platform platform_ = Platform::cpu;
  int replicas_ = 1;
  int device_ = 0;  // a one-device program's device
  std::vector<std::weak_ptr<Array>> args_, results_;
  std::vector<Type> result_types_;
  std::vector<std::shared_ptr<Array>> constants_;  // host bytes copied in during the trace
  std::shared_ptr<Executable> exe_;
};

class Trace {
 public:
  // A trace of one device's program, or of replica `replica`'s copy of an SPMD program over `replicas` devices
  // (each replica traces the step on its own arrays; Recorded::run_replicas runs the copies as one program).
  explicit Trace(int replicas = 1, int replica = 0);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // The trace current on this thread (null when ops run eagerly).
  static Trace* current();

  Builder& builder() { return b_; }
  int replicas() const { return replicas_; }
  int replica() const { return replica_; }

  // The sum of v over every replica of the program (stablehlo.all_reduce over replicas 0..N-1), on each.
  Value all_reduce_sum(const Value& v);
  // This replica's index (stablehlo.replica_id): a ui32 scalar.
  Value replica_id();

  // The value of `dims` elements of `array` from `offset` (flat order), shaped `dims`.
  Value read(const std::shared_ptr<Array>& array, std::int64_t offset, const std::vector<std::int64_t>& dims);
  // Elements [offset, offset + v's size) of `array` become v (v's element type must be the array's).
  void write(const std::shared_ptr<Array>& array, std::int64_t offset, const Value& v);
  // Tensors.
  Value read(const Tensor& t);
  void write(const Tensor& t, const Value& v);
  // Bytes from the host into an array, inside the trace (a constant of the recording).
  void write_host(const std::shared_ptr<Array>& array, std::int64_t offset, const void* src,
                  std::int64_t count);
  // Whether the trace has written the array (its buffer is then not its value).
  bool wrote(const Array& array) const;

  // The program leaves out of its results the scratch arrays it wrote (Array::scratch): for a whole step.
  void drop_scratch_results() { drop_scratch_ = true; }

  // The program (compiled: text -> executable, cached per process). The trace is then empty.
  std::shared_ptr<Recorded> finish();

 private:
  friend class Array;
  struct State {
    std::string value;  // the array's current value in the program
    int argument = -1;  // its index among the arguments, when read before written
    bool written = false;
    std::int64_t order = 0;       // first write
    std::shared_ptr<Array> keep;  // the trace's own arrays (constants) stay alive until finish
  };
  State& state(const std::shared_ptr<Array>& array);
  void forget(Array* array);  // an array freed during the trace

  Builder b_;
  int replicas_, replica_;
  Trace* outer_;
  std::map<Array*, State> states_;
  std::vector<std::weak_ptr<Array>> args_;
  std::vector<Type> arg_types_;
  std::vector<std::shared_ptr<Array>> constants_;
  std::int64_t writes_ = 0;
  bool placed_ = false;
  bool drop_scratch_ = false;
  Platform platform_ = Platform::cpu;
  int device_ = 0;
};

// Runs `emit` in the current trace, or, when none is current, in a trace of its own that runs at once.
void traced(const std::function<void()>& emit);

// How many programs this process compiled, in how many seconds, and how often one came from the cache.
struct CompileStats {
  std::int64_t compiles = 0, hits = 0;
  double seconds = 0;
};
CompileStats compile_stats();

// Copies between tensors when either is on an xla device (Tensor::copy_from); same numel and dtype.
void copy(const Tensor& dst, const Tensor& src);

}  // namespace systolic::xla
