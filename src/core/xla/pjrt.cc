// The PJRT runtime (pjrt.h): plugin loading, the client, buffers, compile and execute through the C API.
#include "core/xla/pjrt.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <glob.h>
#include <systolic/error.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "pjrt_c_api.h"

namespace systolic::xla {

namespace {

namespace fs = std::filesystem;

// The functions this host calls; a plugin of an older minor version whose function table ends before one of them
// is refused by name.
// clang-format off
#define SYSTOLIC_PJRT_FUNCTIONS(X) \
  X(PJRT_Error_Destroy) \
  X(PJRT_Error_Message) \
  X(PJRT_Plugin_Initialize) \
  X(PJRT_Event_Destroy) \
  X(PJRT_Event_Await) \
  X(PJRT_Client_Create) \
  X(PJRT_Client_PlatformName) \
  X(PJRT_Client_PlatformVersion) \
  X(PJRT_Client_AddressableDevices) \
  X(PJRT_Client_Compile) \
  X(PJRT_Client_BufferFromHostBuffer) \
  X(PJRT_DeviceDescription_Kind) \
  X(PJRT_Device_GetDescription) \
  X(PJRT_LoadedExecutable_Destroy) \
  X(PJRT_LoadedExecutable_Execute) \
  X(PJRT_Buffer_Destroy) \
  X(PJRT_Buffer_IsDeleted) \
  X(PJRT_Buffer_ToHostBuffer)
// clang-format on

template <class T>
T make_args(std::size_t size) {
  T a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = size;
  return a;
}
#define ARGS(T) make_args<T>(T##_STRUCT_SIZE)

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

// Python package folders where pip puts plugins (virtual environments, the user's, the system's).
std::vector<std::string> site_packages() {
  std::vector<std::string> roots;
  if (auto v = env("VIRTUAL_ENV"); !v.empty()) roots.push_back(v + "/lib/python3*/site-packages");
  if (auto h = env("HOME"); !h.empty()) roots.push_back(h + "/.local/lib/python3*/site-packages");
  for (const char* r : {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                        "/usr/lib/python3/dist-packages", "/opt/*/lib/python3*/site-packages",
                        "/opt/*/.venv/lib/python3*/site-packages"})
    roots.emplace_back(r);
  std::vector<std::string> out;
  for (auto& r : roots)
    for (auto& p : glob_paths(r)) out.push_back(p);
  return out;
}

std::string systolic_home() {
  if (auto h = env("SYSTOLIC_HOME"); !h.empty()) return h;
  if (auto h = env("HOME"); !h.empty()) return h + "/.systolic";
  return ".systolic";
}

// What a PluginCall announces if the plugin aborts: a message made before the call (a signal handler may not
// format), and the handler that writes it.
std::atomic<const std::string*> g_abort_message{nullptr};
std::once_flag g_handler_once;
struct sigaction g_previous_abort {};

void on_abort(int sig) {
  const std::string* m = g_abort_message.load();
  if (m) {
    ssize_t ignored = ::write(2, m->data(), m->size());
    (void)ignored;
  }
  ::sigaction(SIGABRT, &g_previous_abort, nullptr);
  ::raise(sig);
}

PJRT_Buffer_Type pjrt_type(DType t) {
  switch (t) {
    case DType::float32:
      return PJRT_Buffer_Type_F32;
    case DType::float64:
      return PJRT_Buffer_Type_F64;
    case DType::bfloat16:
      return PJRT_Buffer_Type_BF16;
    case DType::uint8:
      return PJRT_Buffer_Type_U8;
    case DType::int32:
      return PJRT_Buffer_Type_S32;
  }
  fail("xla: dtype {} has no PJRT buffer type", dtype_name(t));
}

void put_varint(std::string& s, std::uint64_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
void put_field(std::string& s, int field, const std::string& bytes) {  // a length-delimited field
  put_varint(s, static_cast<std::uint64_t>(field) << 3 | 2);
  put_varint(s, bytes.size());
  s += bytes;
}
void put_int(std::string& s, int field, std::uint64_t v) {
  put_varint(s, static_cast<std::uint64_t>(field) << 3);
  put_varint(s, v);
}

}  // namespace

const char* platform_name(Platform p) {
  switch (p) {
    case Platform::cpu:
      return "cpu";
    case Platform::cuda:
      return "cuda";
    case Platform::tpu:
      return "tpu";
  }
  return "?";
}

std::vector<std::string> plugin_candidates(Platform p) {
  std::vector<std::string> out;
  auto add_site = [&](const char* rel) {
    for (auto& s : site_packages())
      for (auto& f : glob_paths(s + "/" + rel)) out.push_back(f);
  };
  switch (p) {
    case Platform::cpu:
      out.push_back(systolic_home() + "/plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");  // scripts/setup puts it here
      add_site("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
      break;
    case Platform::tpu:
      if (auto t = env("TPU_LIBRARY_PATH"); !t.empty()) out.push_back(t);  // as JAX reads it
      add_site("libtpu/libtpu.so");
      out.emplace_back("/usr/lib/libtpu.so");
      out.emplace_back("/lib/libtpu.so");
      break;
    case Platform::cuda:
      add_site("jax_plugins/xla_cuda13/xla_cuda_plugin.so");
      add_site("jax_plugins/xla_cuda12/xla_cuda_plugin.so");
      break;
  }
  return out;
}

// ---- Runtime ------------------------------------------------------------------------------------------------------

namespace {

std::mutex g_runtimes_mutex;
std::map<Platform, std::unique_ptr<Runtime>>& runtimes() {
  static auto* m = new std::map<Platform, std::unique_ptr<Runtime>>;  // never destroyed: plugins outlive exit
  return *m;
}

std::string find_plugin(Platform p) {
  if (auto path = env("SYSTOLIC_PJRT_PLUGIN"); !path.empty()) {
    if (!fs::exists(path)) fail("xla: SYSTOLIC_PJRT_PLUGIN={}: no such file", path);
    return path;
  }
  auto candidates = plugin_candidates(p);
  for (auto& c : candidates)
    if (fs::exists(c)) return c;
  std::string hint = p == Platform::cpu   ? "scripts/setup fetches the CPU plugin (PyPI: xla-cpu-pjrt)"
                     : p == Platform::tpu ? "pip install libtpu (on a TPU VM)"
                                          : "pip install jax-cuda13-pjrt";
  fail("xla:{}: no PJRT plugin found (set SYSTOLIC_PJRT_PLUGIN=PATH, or {}; looked in {})", platform_name(p),
       hint,
       candidates.empty() ? std::string("no known place")
                          : candidates.front() + " and Python's site-packages");
}

// ---- the key-value store's callbacks ---------------------------------------------------------------------------

std::mutex g_store_mutex;
// Made on first use: src/distribute installs its factory while the library's statics are being initialised.
std::function<std::shared_ptr<KeyValueStore>()>& factory_slot() {
  static auto* f = new std::function<std::shared_ptr<KeyValueStore>()>;
  return *f;
}

std::function<std::shared_ptr<KeyValueStore>()> store_factory() {
  std::lock_guard lock(g_store_mutex);
  return factory_slot();
}

// A callback never lets an exception reach the plugin: it becomes the plugin's PJRT_Error.
PJRT_Error* callback_failed(PJRT_CallbackError* make_error, PJRT_Error_Code code, const std::string& why) {
  return (*make_error)(code, why.data(), why.size());
}

PJRT_Error* kv_get(PJRT_KeyValueGetCallback_Args* a) {
  try {
    std::string value =
        static_cast<KeyValueStore*>(a->user_arg)->get(std::string(a->key, a->key_size), a->timeout_in_ms);
    char* out = new char[value.size() + 1];
    std::memcpy(out, value.data(), value.size());
    a->value = out;
    a->value_size = value.size();
    a->value_deleter_callback = [](char* v) { delete[] v; };
    return nullptr;
  } catch (const std::exception& e) {
    return callback_failed(a->callback_error, PJRT_Error_Code_DEADLINE_EXCEEDED, e.what());
  }
}

PJRT_Error* kv_put(PJRT_KeyValuePutCallback_Args* a) {
  try {
    static_cast<KeyValueStore*>(a->user_arg)
        ->put(std::string(a->key, a->key_size), std::string(a->value, a->value_size));
    return nullptr;
  } catch (const std::exception& e) {
    return callback_failed(a->callback_error, PJRT_Error_Code_INTERNAL, e.what());
  }
}

// What the tests give the callbacks for PJRT_CallbackError: a message kept here, a non-null marker returned.
thread_local std::string t_callback_error;
PJRT_Error* test_callback_error(PJRT_Error_Code, const char* message, size_t size) {
  t_callback_error.assign(message, size);
  return reinterpret_cast<PJRT_Error*>(&t_callback_error);
}

}  // namespace

void set_key_value_store_factory(std::function<std::shared_ptr<KeyValueStore>()> factory) {
  std::lock_guard lock(g_store_mutex);
  factory_slot() = std::move(factory);
}

std::string key_value_get_through_pjrt(KeyValueStore& store, const std::string& key, int timeout_ms) {
  PJRT_CallbackError make_error = &test_callback_error;
  auto a = ARGS(PJRT_KeyValueGetCallback_Args);
  a.key = key.data();
  a.key_size = key.size();
  a.timeout_in_ms = timeout_ms;
  a.callback_error = &make_error;
  a.user_arg = &store;
  if (kv_get(&a)) fail("{}", t_callback_error);
  std::string value(a.value, a.value_size);
  a.value_deleter_callback(a.value);
  return value;
}

void key_value_put_through_pjrt(KeyValueStore& store, const std::string& key, const std::string& value) {
  PJRT_CallbackError make_error = &test_callback_error;
  auto a = ARGS(PJRT_KeyValuePutCallback_Args);
  a.key = key.data();
  a.key_size = key.size();
  a.value = value.data();
  a.value_size = value.size();
  a.callback_error = &make_error;
  a.user_arg = &store;
  if (kv_put(&a)) fail("{}", t_callback_error);
}

Runtime& Runtime::get(Platform p) {
  std::lock_guard lock(g_runtimes_mutex);
  auto& slot = runtimes()[p];
  if (!slot) slot.reset(new Runtime(p));
  return *slot;
}

bool Runtime::available(Platform p, std::string* why) {
  try {
    get(p);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

Runtime::Runtime(Platform p) : platform_(p) {
  info_.path = find_plugin(p);
  // XLA's plugins log INFO lines to stderr on every client they make ("cpu_device_count set via create_options",
  // absl's "All log messages before absl::InitializeLog()"): keep their warnings and errors only, unless the user
  // set the level (TensorFlow's variable, which XLA reads).
  ::setenv("TF_CPP_MIN_LOG_LEVEL", "1", /*overwrite=*/0);
  void* handle = ::dlopen(info_.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail("xla: {}: cannot load the PJRT plugin: {}", info_.path, ::dlerror());
  using GetApi = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApi>(::dlsym(handle, "GetPjrtApi"));
  if (!get_api) fail("xla: {}: not a PJRT plugin (it exports no GetPjrtApi)", info_.path);
  api_ = get_api();
  if (!api_) fail("xla: {}: GetPjrtApi returned nothing", info_.path);
  info_.api_major = api_->pjrt_api_version.major_version;
  info_.api_minor = api_->pjrt_api_version.minor_version;
  if (info_.api_major != PJRT_API_MAJOR)
    fail("xla: {}: the plugin speaks PJRT C API {}.{}; systolic speaks {}.x (built against {}.{})",
         info_.path, info_.api_major, info_.api_minor, PJRT_API_MAJOR, PJRT_API_MAJOR, PJRT_API_MINOR);
#define SYSTOLIC_PJRT_HAS(name)                                                                \
  if (api_->struct_size < offsetof(PJRT_Api, name) + sizeof(api_->name) || !api_->name)        \
    fail("xla: {}: the plugin (PJRT C API {}.{}) has no {}, which systolic needs", info_.path, \
         info_.api_major, info_.api_minor, #name);
  SYSTOLIC_PJRT_FUNCTIONS(SYSTOLIC_PJRT_HAS)
#undef SYSTOLIC_PJRT_HAS
  {
    PluginCall call(*this, "PJRT_Plugin_Initialize");
    auto a = ARGS(PJRT_Plugin_Initialize_Args);
    check(api_->PJRT_Plugin_Initialize(&a), "PJRT_Plugin_Initialize");
  }
  std::vector<PJRT_NamedValue> options;
  std::string count_name = "cpu_device_count";
  std::int64_t cpu_devices = 8;
  if (auto n = env("SYSTOLIC_XLA_CPU_DEVICES"); !n.empty()) {
    char* end = nullptr;
    long v = std::strtol(n.c_str(), &end, 10);
    if (*end || v < 1 || v > 1024) fail("SYSTOLIC_XLA_CPU_DEVICES={}: not a device count (1 to 1024)", n);
    cpu_devices = v;
  }
  if (p == Platform::cpu) {
    auto nv = ARGS(PJRT_NamedValue);
    nv.name = count_name.c_str();
    nv.name_size = count_name.size();
    nv.type = PJRT_NamedValue_kInt64;
    nv.int64_value = cpu_devices;
    nv.value_size = 1;
    options.push_back(nv);
  }
  {
    PluginCall call(*this, "PJRT_Client_Create");
    auto a = ARGS(PJRT_Client_Create_Args);
    a.create_options = options.data();
    a.num_options = options.size();
    if (auto factory = store_factory()) store_ = factory();
    if (store_) {  // for a multi-host client (the CPU plugin has no such mode and ignores them)
      a.kv_get_callback = &kv_get;
      a.kv_get_user_arg = store_.get();
      a.kv_put_callback = &kv_put;
      a.kv_put_user_arg = store_.get();
    }
    check(api_->PJRT_Client_Create(&a), "PJRT_Client_Create");
    client_ = a.client;
  }
  auto pn = ARGS(PJRT_Client_PlatformName_Args);
  pn.client = client_;
  check(api_->PJRT_Client_PlatformName(&pn), "PJRT_Client_PlatformName");
  info_.platform.assign(pn.platform_name, pn.platform_name_size);
  auto pv = ARGS(PJRT_Client_PlatformVersion_Args);
  pv.client = client_;
  check(api_->PJRT_Client_PlatformVersion(&pv), "PJRT_Client_PlatformVersion");
  info_.platform_version.assign(pv.platform_version, pv.platform_version_size);
  // libtpu names its platform "tpu", the CUDA plugin "cuda" (or "gpu"), the CPU one "cpu".
  std::string want = platform_name(p);
  bool matches = info_.platform == want || (p == Platform::cuda && info_.platform == "gpu");
  if (!matches)
    fail(
        "xla:{}: {} is a plugin for platform '{}' (SYSTOLIC_PJRT_PLUGIN names the plugin of any xla device: "
        "use "
        "--device xla:{})",
        want, info_.path, info_.platform, info_.platform);
  auto ad = ARGS(PJRT_Client_AddressableDevices_Args);
  ad.client = client_;
  check(api_->PJRT_Client_AddressableDevices(&ad), "PJRT_Client_AddressableDevices");
  devices_.assign(ad.addressable_devices, ad.addressable_devices + ad.num_addressable_devices);
  if (devices_.empty()) fail("xla: {}: the plugin has no addressable devices", info_.path);
  for (auto* d : devices_) {
    auto gd = ARGS(PJRT_Device_GetDescription_Args);
    gd.device = d;
    check(api_->PJRT_Device_GetDescription(&gd), "PJRT_Device_GetDescription");
    auto k = ARGS(PJRT_DeviceDescription_Kind_Args);
    k.device_description = gd.device_description;
    check(api_->PJRT_DeviceDescription_Kind(&k), "PJRT_DeviceDescription_Kind");
    info_.device_kinds.emplace_back(k.device_kind, k.device_kind_size);
  }
}

PJRT_Device* Runtime::device(int index) const {
  SYSTOLIC_CHECK(index >= 0 && index < device_count(), "xla:{}: no device {} (the plugin has {})",
                 info_.platform, index, device_count());
  return devices_[static_cast<std::size_t>(index)];
}

void Runtime::check(void* error, const char* what) const {
  if (!error) return;
  auto* e = static_cast<PJRT_Error*>(error);
  auto m = ARGS(PJRT_Error_Message_Args);
  m.error = e;
  api_->PJRT_Error_Message(&m);
  std::string message(m.message, m.message_size);
  auto d = ARGS(PJRT_Error_Destroy_Args);
  d.error = e;
  api_->PJRT_Error_Destroy(&d);
  fail("xla ({}): {} failed: {}", info_.path, what, message);
}

// ---- PluginCall ---------------------------------------------------------------------------------------------------

namespace {
thread_local std::vector<std::unique_ptr<std::string>> t_messages;
}

PluginCall::PluginCall(const Runtime& runtime, const char* what) : saved_what_(what), saved_plugin_(nullptr) {
  std::call_once(g_handler_once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_abort;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGABRT, &sa, &g_previous_abort);
  });
  t_messages.push_back(std::make_unique<std::string>(fmt::format(
      "\nsystolic: error: the PJRT plugin {} aborted the process during {} (its own message, if any, "
      "is above): a plugin's CHECK failure, which it does not report as an error\n",
      runtime.info().path.empty() ? "(loading)" : runtime.info().path, what)));
  saved_plugin_ = g_abort_message.exchange(t_messages.back().get());
}

PluginCall::~PluginCall() {
  g_abort_message.store(saved_plugin_);
  t_messages.pop_back();
  (void)saved_what_;
}

// ---- Buffer -------------------------------------------------------------------------------------------------------

Buffer::Buffer(Runtime& runtime, PJRT_Buffer* buffer, DType dtype, std::vector<std::int64_t> dims, int device)
    : runtime_(runtime), buffer_(buffer), dtype_(dtype), dims_(std::move(dims)), device_(device) {}

Buffer::~Buffer() {
  if (!buffer_) return;
  auto a = ARGS(PJRT_Buffer_Destroy_Args);
  a.buffer = buffer_;
  if (PJRT_Error* e = runtime_.api()->PJRT_Buffer_Destroy(&a)) {
    auto d = ARGS(PJRT_Error_Destroy_Args);
    d.error = e;
    runtime_.api()->PJRT_Error_Destroy(&d);
  }
}

std::int64_t Buffer::numel() const {
  std::int64_t n = 1;
  for (auto d : dims_) n *= d;
  return n;
}

namespace {
void await(Runtime& rt, PJRT_Event* event, const char* what) {
  if (!event) return;
  auto a = ARGS(PJRT_Event_Await_Args);
  a.event = event;
  PJRT_Error* e = rt.api()->PJRT_Event_Await(&a);
  auto d = ARGS(PJRT_Event_Destroy_Args);
  d.event = event;
  rt.api()->PJRT_Event_Destroy(&d);
  rt.check(e, what);
}
}  // namespace

std::shared_ptr<Buffer> Buffer::from_host(Runtime& runtime, const void* data, DType dtype,
                                          std::vector<std::int64_t> dims, int device) {
  PluginCall call(runtime, "PJRT_Client_BufferFromHostBuffer");
  auto a = ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  a.client = runtime.client();
  a.data = data;
  a.type = pjrt_type(dtype);
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  a.device = runtime.device(device);
  runtime.check(runtime.api()->PJRT_Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer");
  await(runtime, a.done_with_host_buffer, "copying to the device");
  return std::make_shared<Buffer>(runtime, a.buffer, dtype, std::move(dims), device);
}

bool Buffer::deleted() const {
  auto a = ARGS(PJRT_Buffer_IsDeleted_Args);
  a.buffer = buffer_;
  runtime_.check(runtime_.api()->PJRT_Buffer_IsDeleted(&a), "PJRT_Buffer_IsDeleted");
  return a.is_deleted;
}

void Buffer::to_host(void* data, std::size_t bytes) const {
  PluginCall call(runtime_, "PJRT_Buffer_ToHostBuffer");
  auto a = ARGS(PJRT_Buffer_ToHostBuffer_Args);
  a.src = buffer_;
  a.dst = data;
  a.dst_size = bytes;
  runtime_.check(runtime_.api()->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  await(runtime_, a.event, "copying to the host");
}

// ---- Executable ---------------------------------------------------------------------------------------------------

std::string compile_options(int replicas) {
  std::string build;
  put_int(build, 4, static_cast<std::uint64_t>(replicas));  // num_replicas
  put_int(build, 5, 1);                                     // num_partitions
  if (replicas > 1) {
    std::string ids;
    for (int i = 0; i < replicas; ++i) put_varint(ids, static_cast<std::uint64_t>(i));
    std::string devices;
    put_field(devices, 1, ids);  // replica_device_ids, packed
    std::string assignment;
    put_int(assignment, 1, static_cast<std::uint64_t>(replicas));  // replica_count
    put_int(assignment, 2, 1);                                     // computation_count
    put_field(assignment, 3, devices);                             // computation_devices
    put_field(build, 9, assignment);                               // device_assignment
  }
  std::string options;
  put_field(options, 3, build);               // executable_build_options
  if (replicas == 1) put_int(options, 4, 1);  // compile_portable_executable
  return options;
}

Executable::Executable(Runtime& runtime, const std::string& stablehlo, int replicas, int outputs)
    : runtime_(runtime), replicas_(replicas), outputs_(outputs) {
  SYSTOLIC_CHECK(replicas >= 1 && replicas <= runtime.device_count(),
                 "xla:{}: a program for {} replicas needs as many devices; the plugin has {}",
                 runtime.info().platform, replicas, runtime.device_count());
  std::string options = compile_options(replicas);
  auto program = ARGS(PJRT_Program);
  program.code = const_cast<char*>(stablehlo.data());
  program.code_size = stablehlo.size();
  program.format = "mlir";
  program.format_size = 4;
  PluginCall call(runtime, "PJRT_Client_Compile");
  auto a = ARGS(PJRT_Client_Compile_Args);
  a.client = runtime.client();
  a.program = &program;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  runtime.check(runtime.api()->PJRT_Client_Compile(&a), "PJRT_Client_Compile");
  exe_ = a.executable;
}

Executable::~Executable() {
  if (!exe_) return;
  auto a = ARGS(PJRT_LoadedExecutable_Destroy_Args);
  a.executable = exe_;
  if (PJRT_Error* e = runtime_.api()->PJRT_LoadedExecutable_Destroy(&a)) {
    auto d = ARGS(PJRT_Error_Destroy_Args);
    d.error = e;
    runtime_.api()->PJRT_Error_Destroy(&d);
  }
}

std::vector<std::vector<std::shared_ptr<Buffer>>> Executable::execute(
    const std::vector<std::vector<Buffer*>>& args, const std::vector<std::vector<std::int64_t>>& out_dims,
    const std::vector<DType>& out_dtypes, int device) {
  SYSTOLIC_CHECK(static_cast<int>(args.size()) == replicas_, "xla: {} argument lists for {} replicas",
                 args.size(), replicas_);
  SYSTOLIC_CHECK(static_cast<int>(out_dims.size()) == outputs_ && out_dtypes.size() == out_dims.size(),
                 "xla: {} output shapes for {} outputs", out_dims.size(), outputs_);
  const std::size_t nargs = args[0].size();
  // A one-device program runs on the device it is given (compiled once, for any device of the plugin).
  if (replicas_ > 1) device = 0;
  std::vector<std::vector<PJRT_Buffer*>> raw(args.size());
  std::vector<PJRT_Buffer* const*> arg_lists;
  for (std::size_t r = 0; r < args.size(); ++r) {
    SYSTOLIC_CHECK(args[r].size() == nargs, "xla: replica {} has {} arguments, replica 0 {}", r,
                   args[r].size(), nargs);
    for (auto* b : args[r]) {
      SYSTOLIC_CHECK(b && b->device() == device + static_cast<int>(r),
                     "xla: argument {} of replica {} is on device {}, not on the replica's (xla:{}:{})",
                     raw[r].size(), r, b ? b->device() : -1, runtime_.info().platform,
                     device + static_cast<int>(r));
      raw[r].push_back(b->get());
    }
    arg_lists.push_back(raw[r].data());
  }
  std::vector<std::vector<PJRT_Buffer*>> outs(args.size(), std::vector<PJRT_Buffer*>(out_dims.size()));
  std::vector<PJRT_Buffer**> out_lists;
  for (auto& o : outs) out_lists.push_back(o.data());
  std::vector<PJRT_Event*> done(args.size(), nullptr);
  auto options = ARGS(PJRT_ExecuteOptions);
  PluginCall call(runtime_, "PJRT_LoadedExecutable_Execute");
  auto a = ARGS(PJRT_LoadedExecutable_Execute_Args);
  a.executable = exe_;
  a.options = &options;
  a.argument_lists = arg_lists.data();
  a.num_devices = args.size();
  a.num_args = nargs;
  a.output_lists = out_lists.data();
  a.device_complete_events = done.data();
  // A portable (one-device) program names its device at each run.
  if (replicas_ == 1) a.execute_device = runtime_.device(device);
  runtime_.check(runtime_.api()->PJRT_LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");
  for (auto* ev : done) await(runtime_, ev, "running a program");
  std::vector<std::vector<std::shared_ptr<Buffer>>> result(args.size());
  for (std::size_t r = 0; r < args.size(); ++r)
    for (std::size_t i = 0; i < out_dims.size(); ++i)
      result[r].push_back(std::make_shared<Buffer>(runtime_, outs[r][i], out_dtypes[i], out_dims[i],
                                                   device + static_cast<int>(r)));
  return result;
}

}  // namespace systolic::xla
