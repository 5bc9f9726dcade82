// The one way from a runtime DType to the C++ type of its elements: visit_dtype calls a generic lambda with a
// type tag, and the lambda names the type (`using T = typename decltype(tag)::type;`). Host code of every layer
// uses it (tensors, the CPU loops, the input pipeline, the CUDA entries); the CUDA launchers, which take an
// ops::cuda::Element, reach it through visit_element (ops/cuda/kernels.cuh).
//
//   visit_dtype(t, f)                    f(TypeTag<T>{}) with t's storage type T, for every dtype;
//   visit_dtype<float, double>(t, f)     the same, instantiated for the listed types only; another dtype is an
//                                        Error naming it (a bug of the caller: the op tables say which dtypes
//                                        reach a backend);
//   visit_dtype<float>(t, f, otherwise)  ... and `otherwise(t)` for another dtype (it returns what f returns, or
//                                        throws its own Error).
//
// Storage types: float32 float, float64 double, bfloat16 systolic::bfloat16 (the CUDA files name it
// __nv_bfloat16: kernels.cuh), uint8 std::uint8_t, int32 std::int32_t. A tag is a type, never a value, so the
// types need no constructor usable here.
#pragma once

#include <systolic/dtype.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace systolic {

template <class T>
struct TypeTag {
  using type = T;
};

// The dtype whose elements are stored as T.
template <class T>
inline constexpr DType dtype_v = T::no_dtype_for_this_type;
template <>
inline constexpr DType dtype_v<float> = DType::float32;
template <>
inline constexpr DType dtype_v<double> = DType::float64;
template <>
inline constexpr DType dtype_v<bfloat16> = DType::bfloat16;
template <>
inline constexpr DType dtype_v<std::uint8_t> = DType::uint8;
template <>
inline constexpr DType dtype_v<std::int32_t> = DType::int32;

namespace detail {

// Error: "dtype <name> is not handled here" (dtype.cc).
[[noreturn]] void unhandled_dtype(DType t);

// The first of Ts (float when none: every dtype).
template <class... Ts>
struct FirstType {
  using type = float;
};
template <class T, class... Ts>
struct FirstType<T, Ts...> {
  using type = T;
};

template <class F, class Otherwise, class T, class... Rest>
decltype(auto) visit_dtype_among(DType t, F& f, Otherwise& otherwise) {
  if (t == dtype_v<T>) return f(TypeTag<T>{});
  if constexpr (sizeof...(Rest) > 0)
    return visit_dtype_among<F, Otherwise, Rest...>(t, f, otherwise);
  else
    return otherwise(t);
}

}  // namespace detail

template <class... Ts, class F, class Otherwise>
decltype(auto) visit_dtype(DType t, F&& f, Otherwise&& otherwise) {
  if constexpr (sizeof...(Ts) == 0)
    return detail::visit_dtype_among<F, Otherwise, float, double, bfloat16, std::uint8_t, std::int32_t>(
        t, f, otherwise);
  else
    return detail::visit_dtype_among<F, Otherwise, Ts...>(t, f, otherwise);
}

template <class... Ts, class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  using R = decltype(f(TypeTag<typename detail::FirstType<Ts...>::type>{}));
  auto otherwise = [](DType d) -> R { detail::unhandled_dtype(d); };
  return visit_dtype<Ts...>(t, f, otherwise);
}

// A double as a T, as Tensor::fill and Tensor::from_doubles store it: rounded to nearest for the integer types,
// through float32 for bfloat16.
template <class T>
T value_as(double v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(static_cast<float>(v));
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::nearbyint(v));
  else
    return static_cast<T>(v);
}

}  // namespace systolic
