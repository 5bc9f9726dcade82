// The math of doubles on the host and on CUDA devices: the Math policy with which the CPU loops and the CUDA
// kernels evaluate the formulas written once for every backend (loss_math.h, optimizer_math.h). The XLA backend
// evaluates the same formulas with its own policy over expressions (ops/xla/emit.h's Math), which has these static
// functions for its values.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define SYSTOLIC_MATH_HD __host__ __device__ __forceinline__
#else
#define SYSTOLIC_MATH_HD inline
#endif

namespace systolic::ops {

// ops::cast to int32: toward zero; not finite or outside int32's range gives INT32_MIN (x86's cvttsd2si).
SYSTOLIC_MATH_HD int truncate_to_int32(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? static_cast<int>(v) : -2147483647 - 1;
}

struct DoubleMath {
  static SYSTOLIC_MATH_HD double where(bool c, double a, double b) { return c ? a : b; }
  static SYSTOLIC_MATH_HD double like(double value, double) { return value; }  // a constant of x's kind
  static SYSTOLIC_MATH_HD bool eq(double a, double b) { return a == b; }
  static SYSTOLIC_MATH_HD double max(double a, double b) { return a >= b ? a : b; }
  static SYSTOLIC_MATH_HD double clip(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
  }
  static SYSTOLIC_MATH_HD double abs(double x) { return ::fabs(x); }
  static SYSTOLIC_MATH_HD double sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
  static SYSTOLIC_MATH_HD double sqrt(double x) { return ::sqrt(x); }
  static SYSTOLIC_MATH_HD double log(double x) { return ::log(x); }
  static SYSTOLIC_MATH_HD double log1p(double x) { return ::log1p(x); }
  static SYSTOLIC_MATH_HD double exp(double x) { return ::exp(x); }
  static SYSTOLIC_MATH_HD double tanh(double x) { return ::tanh(x); }
  static SYSTOLIC_MATH_HD double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }
  static SYSTOLIC_MATH_HD double pow(double x, double y) { return ::pow(x, y); }
};

}  // namespace systolic::ops
