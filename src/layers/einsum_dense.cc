// EinsumDense (Keras 3's keras.layers.EinsumDense): y = activation(einsum(equation, x, kernel) + bias). Keras's
// equation forms: "ab,bc->ac", "...b,bc->...c" (the "..." on the left of the input and the output) and
// "ab...,bc->ac..." (on their right); the "..." axes get letters of their own here, so that every equation is three
// letter strings over whole tensors. systolic runs what a dense layer runs: each letter of the input is either kept
// in the output (free: the batch among them) or summed with the kernel (contracted), each letter of the kernel is
// contracted or a new axis of the output; the input is moved to (free..., contracted...) and the kernel to
// (contracted..., new...) where they are not so already (ops::transpose), one matrix product (ops::dense_forward),
// the result moved to the output's order. A letter of the input, the kernel and the output together (a batched
// product) or of the input alone (a sum) is refused by name.
//
// Weights as Keras makes them: the kernel's shape is its letters' sizes, made as the (contracted, new) matrix it is so
// that its fans are EinsumDense's (Keras 3.15 gives the variance-scaling initializers the kernel's input and output
// axes), then viewed in that shape; the bias's shape runs over the output's letters from the first of bias_axes on
// (1 where a letter is not one of them, and 1 for "..." axes on the right). A bias over exactly the new axes, last in
// the output, is the product's own bias; any other is added by broadcasting (ops::broadcast_forward).
#include <systolic/layers.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "layers/config.h"
#include "layers/permutation.h"
#include "layers/saved.h"

namespace systolic::layers {

namespace {

using PartialShape = std::vector<std::optional<std::int64_t>>;

// The equation as written: its three parts and where its "..." is.
struct Written {
  enum Elision { none, left, right };
  std::string input, kernel, output;
  Elision elision = none;
};

Written parse_equation(const std::string& layer, const std::string& equation) {
  static const std::regex plain("([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)"),
      on_left(R"(\.\.\.([a-zA-Z]+),([a-zA-Z]+)->\.\.\.([a-zA-Z]+))"),
      on_right(R"(([a-zA-Z]{2,})\.\.\.,([a-zA-Z]+)->([a-zA-Z]+)\.\.\.)");
  std::smatch m;
  Written w;
  if (std::regex_match(equation, m, plain))
    w.elision = Written::none;
  else if (std::regex_match(equation, m, on_left))
    w.elision = Written::left;
  else if (std::regex_match(equation, m, on_right))
    w.elision = Written::right;
  else
    fail(
        "layer '{}' (EinsumDense): invalid einsum equation '{}': equations must be in the form [X],[Y]->[Z], "
        "...[X],[Y]->...[Z], or [X]...,[Y]->[Z]...",
        layer, equation);
  w.input = m[1];
  w.kernel = m[2];
  w.output = m[3];
  for (const std::string* part : {&w.input, &w.kernel, &w.output})
    for (std::size_t i = 0; i < part->size(); ++i)
      if (part->find((*part)[i], i + 1) != std::string::npos)
        fail("layer '{}' (EinsumDense): equation '{}' names the letter '{}' twice in '{}'", layer, equation,
             (*part)[i], *part);
  return w;
}

// What the layer computes for one input shape: the letters over whole tensors, the sizes, and the moves around the
// one matrix product. Shapes with the batch axis hold 0 there (moved_x and product put the call's in).
struct Plan {
  Shape kernel_shape, bias_shape, output_shape;  // output_shape without the batch axis
  bool has_bias = false;
  std::vector<int> perm_x, perm_k, perm_out;  // x -> (free, contracted); kernel -> (contracted, new);
                                              // (free, new) -> the output's order
  std::vector<int> inverse_x, inverse_k, inverse_out;  // their inverses, for backward
  bool x_moved = false, k_moved = false, out_moved = false;
  bool product_bias = false;  // the bias is the product's own (over the new axes, last in the output)
  std::int64_t free_rest = 1, contracted = 1, added = 1;  // sizes: free axes but the batch's, contracted, new
  std::vector<std::int64_t> x_dims, product_dims;  // x as (free..., contracted...), the product's result
  Shape moved_x(std::int64_t n) const { return with_batch(x_dims, n); }
  Shape product(std::int64_t n) const { return with_batch(product_dims, n); }
  Shape moved_kernel() const {
    std::vector<std::int64_t> d;
    for (int a : perm_k) d.push_back(kernel_shape[a]);
    return Shape(d);
  }
  static Shape with_batch(std::vector<std::int64_t> d, std::int64_t n) {
    d[0] = n;
    return Shape(d);
  }
};

class EinsumDenseLayer final : public Layer {
 public:
  EinsumDenseLayer(std::string equation, PartialShape output_shape, const EinsumDenseOptions& o)
      : Layer("EinsumDense", o.name, activation_from_name(o.activation)),
        equation_(std::move(equation)),
        partial_(std::move(output_shape)),
        o_(o),
        written_(parse_equation(name(), equation_)) {
    for (const auto& d : partial_)
      SYSTOLIC_CHECK(!d || *d > 0, "layer '{}' (EinsumDense): output_shape must hold positive sizes or None",
                     name());
    if (o.bias_axes)
      for (char ch : *o.bias_axes)
        SYSTOLIC_CHECK(written_.output.find(ch) != std::string::npos,
                       "layer '{}' (EinsumDense): bias dimension '{}' was requested, but is not part of the "
                       "output spec '{}'",
                       name(), ch, written_.output);
    set_activity_regularizer(o.activity_regularizer);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return plan(in[0]).output_shape; }

  // Keras 3's configs (tf.keras's EinsumDense was experimental, its files are not written).
  bool keras3_only() const override { return true; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["output_shape"] = partial_json();
    c["equation"] = equation_;
    c["activation"] = o_.activation;
    c["bias_axes"] = o_.bias_axes ? json(*o_.bias_axes) : json(nullptr);
    write_weight_settings(c, o_, activity_regularizer());
    c["quantization_config"] = nullptr;
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    plan_ = plan(in[0]);
    Weight& k = add_weight("kernel", {plan_.contracted, plan_.added}, o_.kernel_initializer, true,
                           {o_.kernel_regularizer, o_.kernel_constraint});
    k.value = k.value.reshape(plan_.kernel_shape);
    if (k.grad.defined()) k.grad = k.grad.reshape(plan_.kernel_shape);
    if (plan_.has_bias)
      add_weight("bias", plan_.bias_shape, o_.bias_initializer, true,
                 {o_.bias_regularizer, o_.bias_constraint});
  }

  void forward(LayerCall& c) override {
    const Plan& p = plan_;
    const Tensor& x = c.inputs[0];
    const std::int64_t n = x.dim(0), M = n * p.free_rest;
    Tensor x2 = x;
    if (p.x_moved) {
      x2 = slot(c, kX, p.moved_x(n), x);
      ops::transpose(x, x2, p.perm_x);
    }
    Tensor k2 = kernel();
    if (p.k_moved) {
      k2 = slot(c, kKernel, p.moved_kernel(), x);
      ops::transpose(kernel(), k2, p.perm_k);
    }
    const bool added_bias = p.has_bias && !p.product_bias;
    const bool direct = !p.out_moved && !added_bias;
    Tensor y = direct ? c.output : slot(c, kProduct, p.product(n), x);
    Tensor y2 = y.reshape({M, p.added});
    ops::dense_forward(x2.reshape({M, p.contracted}), k2.reshape({p.contracted, p.added}),
                       p.product_bias ? flat(weights()[1].value) : Tensor(), y2);
    if (direct) return;
    if (!added_bias) {
      ops::transpose(y, c.output, p.perm_out);
      return;
    }
    Tensor before = y.reshape(c.output.shape());
    if (p.out_moved) {
      before = slot(c, kBeforeBias, c.output.shape(), x);
      ops::transpose(y, before, p.perm_out);
    }
    ops::broadcast_forward(ops::BinaryKind::add, before, weights()[1].operand(), c.output);
  }

  void backward(LayerCall& c) override {
    const Plan& p = plan_;
    const Tensor& x = c.inputs[0];
    const std::int64_t n = x.dim(0), M = n * p.free_rest;
    const Tensor& dy = c.doutput;
    Tensor db;
    if (p.has_bias && weights()[1].grad.defined()) {
      Weight& b = weights()[1];
      if (p.product_bias) {
        db = flat(b.grad);
      } else {  // summed in the data's dtype (bfloat16 under a mixed policy), added to the float32 gradient
        Tensor sum = slot(c, kBiasGrad, b.grad.shape(), dy), none;
        ops::broadcast_backward(ops::BinaryKind::add, dy, b.operand(), dy, none, sum);
        add_weight_gradient(c, kBiasGradWide, kSlots, sum, b);
      }
    }
    Tensor dy2 = dy;
    if (p.out_moved) {
      dy2 = slot(c, kProductGrad, p.product(n), x);
      ops::transpose(dy, dy2, p.inverse_out);
    }
    Tensor dx = c.dinputs.empty() ? Tensor() : c.dinputs[0], dx2;
    if (dx.defined()) dx2 = (p.x_moved ? slot(c, kXGrad, p.moved_x(n), x) : dx).reshape({M, p.contracted});
    Weight& k = weights()[0];
    Tensor dk2;
    if (k.grad.defined()) {
      if (p.k_moved) {
        dk2 = slot(c, kKernelGrad, p.moved_kernel(), k.grad);
        ops::fill(dk2, 0.0);
      } else {
        dk2 = k.grad;
      }
      dk2 = dk2.reshape({p.contracted, p.added});
    }
    const Tensor x2 = p.x_moved ? c.saved[kX] : x;
    const Tensor k2 = p.k_moved ? c.saved[kKernel] : kernel();
    ops::dense_backward(x2.reshape({M, p.contracted}), k2.reshape({p.contracted, p.added}),
                        dy2.reshape({M, p.added}), dx2, dk2, db);
    if (dx.defined() && p.x_moved) ops::transpose(c.saved[kXGrad], dx, p.inverse_x);
    if (k.grad.defined() && p.k_moved) {
      Tensor back = slot(c, kKernelBack, p.kernel_shape, k.grad);
      ops::transpose(c.saved[kKernelGrad], back, p.inverse_k);
      ops::accumulate(back, k.grad);
    }
  }

 private:
  // c.saved's slots, each made when first wanted (for the call's batch size and dtype).
  enum Slot : std::size_t {
    kX,
    kKernel,
    kProduct,
    kBeforeBias,
    kBiasGrad,
    kBiasGradWide,
    kProductGrad,
    kXGrad,
    kKernelGrad,
    kKernelBack,
    kSlots
  };
  static Tensor slot(LayerCall& c, Slot i, const Shape& s, const Tensor& like) {
    return saved_slot(c, i, kSlots, s, like.dtype(), like.device());
  }
  static Tensor flat(const Tensor& t) { return t.reshape({t.numel()}); }
  const Tensor& kernel() const { return weights()[0].operand(); }

  // The letters over whole tensors, the sizes and the moves for an input of this shape (no batch axis).
  Plan plan(const Shape& in) const {
    const Written& w = written_;
    const int rank = in.rank() + 1;
    const int elided = rank - static_cast<int>(w.input.size());
    auto bad = [&](const std::string& why) { fail_shape("equation '" + equation_ + "': " + why); };
    if (w.elision == Written::none ? elided != 0 : elided < 0)
      bad(fmt::format("the input has {} axes (the batch's included), the equation's input names {}", rank,
                      w.input.size()));
    // Letters of their own for the "..." axes.
    std::string fresh;
    for (char ch = 'A'; ch <= 'z' && static_cast<int>(fresh.size()) < elided; ++ch)
      if (std::isalpha(static_cast<unsigned char>(ch)) && equation_.find(ch) == std::string::npos)
        fresh += ch;
    Plan p;
    // The letters over every axis, the batch's included (input[0], output[0]).
    const std::string& kernel = w.kernel;
    const std::string input = w.elision == Written::right ? w.input + fresh : fresh + w.input;
    const std::string output = w.elision == Written::right ? w.output + fresh : fresh + w.output;
    // The full output shape as Keras makes it: the batch, the "..." axes, output_shape.
    std::vector<std::optional<std::int64_t>> full{std::nullopt};
    std::vector<std::int64_t> sizes{0};
    for (int i = 0; i < in.rank(); ++i) sizes.push_back(in[i]);
    if (w.elision == Written::left)
      for (int i = 1; i < elided; ++i) full.push_back(sizes[static_cast<std::size_t>(i)]);
    for (const auto& d : partial_) full.push_back(d);
    if (w.elision == Written::right)
      for (int i = rank - elided; i < rank; ++i) full.push_back(sizes[static_cast<std::size_t>(i)]);
    if (full.size() != output.size())
      bad(fmt::format("output_shape {} gives {} axes after the batch's, the equation's output has {}",
                      partial_json().dump(), full.size() - 1, output.size() - 1));
    if (input[0] != output[0])
      bad("the first axis of the input and of the output (the batch) must be one letter");
    auto in_pos = [&](char ch) { return input.find(ch); };
    auto k_pos = [&](char ch) { return kernel.find(ch); };
    auto out_pos = [&](char ch) { return output.find(ch); };
    constexpr auto npos = std::string::npos;
    for (char ch : input) {
      const bool k = k_pos(ch) != npos, o = out_pos(ch) != npos;
      if (k && o)
        bad(fmt::format(
            "the letter '{}' is in the input, the kernel and the output: a batched product, which "
            "systolic does not run",
            ch));
      if (!k && !o)
        bad(fmt::format(
            "the letter '{}' of the input is in neither the kernel nor the output: a sum over it, "
            "which systolic does not run",
            ch));
    }
    for (char ch : output)
      if (in_pos(ch) == npos && k_pos(ch) == npos)
        bad(fmt::format("dimension '{}' of the output is in neither the input nor the kernel", ch));
    // Sizes of the output's axes: the input's where it has the letter (output_shape, when it gives one, must
    // agree), else output_shape's.
    std::vector<std::int64_t> out_sizes;
    for (std::size_t i = 1; i < output.size(); ++i) {
      const char ch = output[i];
      if (const std::size_t at = in_pos(ch); at != npos) {
        if (full[i] && *full[i] != sizes[at])
          bad(
              fmt::format("input shape and output shape do not match at shared dimension '{}': input {}, "
                          "output {}",
                          ch, sizes[at], *full[i]));
        out_sizes.push_back(sizes[at]);
      } else {
        if (!full[i])
          bad(fmt::format("output_shape must give the size of '{}', which the input has not", ch));
        out_sizes.push_back(*full[i]);
      }
    }
    p.output_shape = Shape(out_sizes);
    // The kernel: contracted letters take the input's sizes, new ones the output's.
    std::vector<std::int64_t> kdims;
    std::vector<int> contracted_k, added_k;
    for (std::size_t i = 0; i < kernel.size(); ++i) {
      const char ch = kernel[i];
      if (const std::size_t at = in_pos(ch); at != npos) {
        kdims.push_back(sizes[at]);
        contracted_k.push_back(static_cast<int>(i));
        p.contracted *= sizes[at];
      } else if (const std::size_t o = out_pos(ch); o != npos) {
        kdims.push_back(out_sizes[o - 1]);
        added_k.push_back(static_cast<int>(i));
        p.added *= out_sizes[o - 1];
      } else {
        bad(fmt::format("the kernel's letter '{}' is in neither the input nor the output", ch));
      }
    }
    p.kernel_shape = Shape(kdims);
    // x -> (free in the input's order, contracted in the kernel's order); kernel -> (contracted, new).
    std::string layout;  // the product's letters: free, then new
    for (std::size_t i = 0; i < input.size(); ++i)
      if (out_pos(input[i]) != npos) {
        p.perm_x.push_back(static_cast<int>(i));
        layout += input[i];
        p.product_dims.push_back(sizes[i]);
        if (i > 0) p.free_rest *= sizes[i];
      }
    for (int a : contracted_k)
      p.perm_x.push_back(static_cast<int>(in_pos(kernel[static_cast<std::size_t>(a)])));
    for (int a : p.perm_x) p.x_dims.push_back(sizes[static_cast<std::size_t>(a)]);
    p.perm_k = contracted_k;
    p.perm_k.insert(p.perm_k.end(), added_k.begin(), added_k.end());
    for (int a : added_k) {
      layout += kernel[static_cast<std::size_t>(a)];
      p.product_dims.push_back(kdims[static_cast<std::size_t>(a)]);
    }
    for (char ch : output) p.perm_out.push_back(static_cast<int>(layout.find(ch)));
    p.x_moved = !is_identity_permutation(p.perm_x);
    p.k_moved = !is_identity_permutation(p.perm_k);
    p.out_moved = !is_identity_permutation(p.perm_out);
    p.inverse_x = inverse_permutation(p.perm_x);
    p.inverse_k = inverse_permutation(p.perm_k);
    p.inverse_out = inverse_permutation(p.perm_out);
    // The bias: Keras's shape over the written output's letters from the first of bias_axes on.
    if (o_.bias_axes && !o_.bias_axes->empty()) {
      p.has_bias = true;
      std::size_t first = npos;
      for (char ch : *o_.bias_axes) first = std::min(first, w.output.find(ch));
      std::vector<std::int64_t> b;
      const std::size_t offset = w.elision == Written::left ? static_cast<std::size_t>(elided) : 0;
      for (std::size_t i = first; i < w.output.size(); ++i) {
        const bool biased = o_.bias_axes->find(w.output[i]) != npos;
        if (biased && offset + i == 0) bad("bias_axes name the batch axis");
        if (biased && !full[offset + i])  // Keras takes the bias's sizes from output_shape alone
          bad(fmt::format("bias_axes name '{}', whose size output_shape leaves None", w.output[i]));
        b.push_back(biased ? out_sizes[offset + i - 1] : 1);
      }
      if (w.elision == Written::right)
        for (int i = 0; i < elided; ++i) b.push_back(1);
      p.bias_shape = Shape(b);
      // The product's own bias: over exactly the new axes, which end the output in the kernel's order.
      std::vector<std::int64_t> added_dims;
      for (int a : added_k) added_dims.push_back(kdims[static_cast<std::size_t>(a)]);
      p.product_bias = !p.out_moved && b == added_dims && p.added > 0;
    }
    return p;
  }
  // output_shape as Keras writes it: a list, null where the input gives the size.
  json partial_json() const {
    json s = json::array();
    for (const auto& d : partial_) s.push_back(d ? json(*d) : json(nullptr));
    return s;
  }

  std::string equation_;
  PartialShape partial_;
  EinsumDenseOptions o_;
  Written written_;
  Plan plan_;
};

}  // namespace

std::shared_ptr<Layer> einsum_dense_from_config(ConfigReader& r) {
  for (const char* k : {"equation", "output_shape"})
    if (!r.has(k)) r.fail_option(k, "missing");
  const std::string equation = r.get_string("equation", "");
  const json& s = r.get_raw("output_shape");
  PartialShape shape;
  auto size = [&](const json& d) -> std::optional<std::int64_t> {
    if (d.is_null()) return std::nullopt;
    if (!d.is_number_integer() || d.get<std::int64_t>() <= 0)
      r.fail_option("output_shape", "expected positive ints or None, got " + s.dump());
    return d.get<std::int64_t>();
  };
  if (s.is_array()) {
    for (const json& d : s) shape.push_back(size(d));
  } else {
    shape.push_back(size(s));
  }
  EinsumDenseOptions o;
  o.activation = r.get_activation("activation", "linear");
  if (r.has("bias_axes")) {
    const json& b = r.get_raw("bias_axes");
    if (!b.is_null() && !b.is_string()) r.fail_option("bias_axes", "expected a string of letters or None");
    if (b.is_string()) o.bias_axes = b.get<std::string>();
  }
  read_weight_settings(r, o);
  r.require_null("quantization_config");
  r.require_null("lora_rank");
  r.ignore("lora_alpha");
  o.name = r.name();
  return std::make_shared<EinsumDenseLayer>(equation, shape, o);
}

LayerRef EinsumDense(const std::string& equation, const PartialShape& output_shape,
                     const EinsumDenseOptions& options) {
  return LayerRef(std::make_shared<EinsumDenseLayer>(equation, output_shape, options));
}

}  // namespace systolic::layers
