// Permutations of a tensor's axes as ops::transpose takes them (y.shape[i] = x.shape[perm[i]]), for the layers that
// move axes around an op (Permute, Softmax over other axes, EinsumDense).
#pragma once

#include <cstddef>
#include <vector>

namespace systolic::layers {

// The permutation that undoes perm: transposing by perm, then by this, gives x back.
inline std::vector<int> inverse_permutation(const std::vector<int>& perm) {
  std::vector<int> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  return inverse;
}

// Whether perm leaves every axis where it is (a transpose by it would be a copy).
inline bool is_identity_permutation(const std::vector<int>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

}  // namespace systolic::layers
