// A backend is a table with one entry per op of SYSTOLIC_OPS (include/systolic/ops.h): the function that runs
// it and the data dtypes it runs it on. The entry points (ops.cc) check every call once, then ask the table of
// the tensors' device. Both are generated from the list:
//
//   namespace systolic::ops::cpu {
//   SYSTOLIC_DECLARE_BACKEND_OPS()   // void conv2d_forward(...); extern const DTypes conv2d_forward_dtypes; ...
//   }
//
// declares, in a backend's namespace, what its files define for every op: the function (same parameters as the
// entry point; called only with checked arguments) and the dtypes it takes (for ops::supports; an op the
// backend cannot run has no dtypes and a function that is never called). SYSTOLIC_DEFINE_BACKEND(name) in one
// file of the backend builds its table from them.
#pragma once

#include <systolic/ops.h>

#include <initializer_list>

namespace systolic::ops {

// A set of dtypes.
class DTypes {
 public:
  constexpr DTypes() = default;
  constexpr DTypes(std::initializer_list<DType> dtypes) {
    for (DType t : dtypes) bits_ |= bit(t);
  }
  constexpr bool contains(DType t) const { return (bits_ & bit(t)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr DTypes with(DType t) const {
    DTypes d = *this;
    d.bits_ |= bit(t);
    return d;
  }

 private:
  static constexpr unsigned bit(DType t) { return 1u << static_cast<unsigned>(t); }
  unsigned bits_ = 0;
};

inline constexpr DTypes kAllDTypes{DType::float32, DType::float64, DType::bfloat16, DType::uint8,
                                   DType::int32};

struct Backend {
  const char* name;
#define SYSTOLIC_BACKEND_ENTRY(name, params, args) \
  void(*name) params;                              \
  DTypes name##_dtypes;
  SYSTOLIC_OPS(SYSTOLIC_BACKEND_ENTRY)
#undef SYSTOLIC_BACKEND_ENTRY

  // The dtypes this backend runs `op` on.
  DTypes dtypes(Op op) const;
};

// The backend that runs tensors on `device`; Error when this build cannot use the device.
const Backend& backend_for(Device device);

}  // namespace systolic::ops

#define SYSTOLIC_DECLARE_BACKEND_OP(name, params, args) \
  void name params;                                     \
  extern const ::systolic::ops::DTypes name##_dtypes;
#define SYSTOLIC_DECLARE_BACKEND_OPS() SYSTOLIC_OPS(SYSTOLIC_DECLARE_BACKEND_OP)

#define SYSTOLIC_BACKEND_TABLE_ENTRY(name, params, args) .name = &name, .name##_dtypes = name##_dtypes,
// Defines `const Backend& backend()` in the current (backend's) namespace.
#define SYSTOLIC_DEFINE_BACKEND(backend_name)                                                \
  const ::systolic::ops::Backend& backend() {                                                \
    static const ::systolic::ops::Backend table{.name = backend_name,                        \
                                                SYSTOLIC_OPS(SYSTOLIC_BACKEND_TABLE_ENTRY)}; \
    return table;                                                                            \
  }
