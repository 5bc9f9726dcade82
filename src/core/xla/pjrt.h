// The PJRT runtime of the XLA backend: a PJRT plugin (a shared library exporting GetPjrtApi: the CPU plugin
// xla_cpu_pjrt.so, libtpu.so, xla_cuda_plugin.so) dlopen'ed at run time, its client and devices, device buffers,
// and compiled programs. Nothing links against a plugin; the C API's header is vendored (third_party/pjrt).
//
// Which plugin serves a platform (xla:cpu, xla:cuda, xla:tpu): $SYSTOLIC_PJRT_PLUGIN when set (it must report that
// platform), else the first that exists of the known places (plugin_candidates). One client per platform per
// process, made at first use; the CPU plugin gets $SYSTOLIC_XLA_CPU_DEVICES devices (default 8, the seed's TPU
// v2-8's cores).
//
// Errors: every PJRT_Error becomes a systolic Error naming the plugin and the call. Plugins abort on some bad input
// (CHECK failures) rather than returning an error; while systolic is inside a plugin call, a SIGABRT handler first
// writes one line naming the plugin and the call (the plugin's own message is above it), so such an abort never
// takes the process down unexplained.
#pragma once

#include <systolic/device.h>
#include <systolic/dtype.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_LoadedExecutable;

namespace systolic::xla {

using Platform = XlaPlatform;
const char* platform_name(Platform p);  // "cpu", "cuda", "tpu"

// Where the plugin of a platform is looked for, in order (after $SYSTOLIC_PJRT_PLUGIN).
std::vector<std::string> plugin_candidates(Platform p);

struct PluginInfo {
  std::string path;
  std::string platform;          // the client's platform name ("cpu", "cuda", "tpu")
  std::string platform_version;  // the client's platform version
  int api_major = 0, api_minor = 0;
  std::vector<std::string> device_kinds;  // one per addressable device
};

// A key-value store shared by the processes of a job: how the clients of one plugin in several processes find each
// other (PJRT_Client_Create's kv_get and kv_put callbacks, which PJRT's multi-host mode needs). Thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void put(const std::string& key, const std::string& value) = 0;
  // The value some process put under `key`, waiting for it up to timeout_ms; Error when none came in time.
  virtual std::string get(const std::string& key, int timeout_ms) = 0;
};
// What makes the store of this process when a platform's client is created (null factory, or a null store: no
// callbacks). src/distribute installs one that makes an MPI store under an MPI launcher.
void set_key_value_store_factory(std::function<std::shared_ptr<KeyValueStore>()> factory);
// The C callbacks a client is given, called as a plugin calls them (for tests): a get's value, or the Error the
// callback returned to the plugin.
std::string key_value_get_through_pjrt(KeyValueStore& store, const std::string& key, int timeout_ms);
void key_value_put_through_pjrt(KeyValueStore& store, const std::string& key, const std::string& value);

// The runtime of one platform: its plugin, client and addressable devices.
class Runtime {
 public:
  // The platform's runtime, made at first use; Error (naming what is missing or wrong) when no usable plugin.
  static Runtime& get(Platform p);
  // Whether the platform's plugin can be loaded here; `why` says why not.
  static bool available(Platform p, std::string* why = nullptr);

  const PluginInfo& info() const { return info_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  PJRT_Device* device(int index) const;
  const PJRT_Api* api() const { return api_; }
  PJRT_Client* client() const { return client_; }

  // Throws an Error naming the plugin and `what` when `error` is set (and destroys it).
  void check(void* error, const char* what) const;

 private:
  explicit Runtime(Platform p);
  Platform platform_;
  PluginInfo info_;
  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  std::shared_ptr<KeyValueStore> store_;  // shared with the plugin's clients of other processes, if any
  std::vector<PJRT_Device*> devices_;
};

// While alive, an abort inside the plugin is explained first (one line on stderr naming the plugin and `what`).
class PluginCall {
 public:
  PluginCall(const Runtime& runtime, const char* what);
  ~PluginCall();
  PluginCall(const PluginCall&) = delete;
  PluginCall& operator=(const PluginCall&) = delete;

 private:
  const char* saved_what_;
  const std::string* saved_plugin_;
};

// One array on one device: a PJRT buffer of `dtype` and `dims` (dense, row-major).
class Buffer {
 public:
  Buffer(Runtime& runtime, PJRT_Buffer* buffer, DType dtype, std::vector<std::int64_t> dims, int device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // A copy of host memory (bytes of dtype, row-major) on device `device`.
  static std::shared_ptr<Buffer> from_host(Runtime& runtime, const void* data, DType dtype,
                                           std::vector<std::int64_t> dims, int device);
  // Copies the whole array into host memory (`bytes` must be its size); waits for it.
  void to_host(void* data, std::size_t bytes) const;
  // Whether the plugin deleted it (a buffer donated to a program that ran).
  bool deleted() const;

  PJRT_Buffer* get() const { return buffer_; }
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& dims() const { return dims_; }
  int device() const { return device_; }
  std::int64_t numel() const;

 private:
  Runtime& runtime_;
  PJRT_Buffer* buffer_;
  DType dtype_;
  std::vector<std::int64_t> dims_;
  int device_;
};

// A compiled program: StableHLO text (format "mlir") compiled for `replicas` devices 0 .. replicas-1, or, for one
// device, compiled portable: it runs on the device each execute names.
class Executable {
 public:
  Executable(Runtime& runtime, const std::string& stablehlo, int replicas, int outputs);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  struct Result {
    PJRT_Buffer* buffer;
    DType dtype;
    std::vector<std::int64_t> dims;
  };
  // Runs on its devices (args[r]: replica r's arguments, on device r, in order; a one-device program's on
  // `device`) and waits; returns each replica's outputs as new buffers, of the dims and dtypes the program declares.
  std::vector<std::vector<std::shared_ptr<Buffer>>> execute(
      const std::vector<std::vector<Buffer*>>& args, const std::vector<std::vector<std::int64_t>>& out_dims,
      const std::vector<DType>& out_dtypes, int device = 0);
  int replicas() const { return replicas_; }

 private:
  Runtime& runtime_;
  PJRT_LoadedExecutable* exe_ = nullptr;
  int replicas_;
  int outputs_;
};

// The serialised xla.CompileOptionsProto for `replicas` replicas (devices 0..replicas-1), one partition; one replica
// compiles portable.
std::string compile_options(int replicas);

}  // namespace systolic::xla
