#!/usr/bin/python3
"""PyTorch parity fixture for the systolic "seed CNN".

Writes tests/fixtures/seed_cnn_parity/{manifest.json,grads.bin}. The C++ test
rebuilds the identical model, weights and batch from the formulas below and
compares its loss, softmax output, gradients, Adam trajectory, BN moving
statistics and inference-mode loss against this fixture.

Run with Debian's PyTorch (python3-torch 1.13):

    /usr/bin/python3 tests/reference/seed_cnn_parity.py [--out DIR]

Model (Keras semantics, NHWC input 32x32x3, 10 classes), layer order:
   1. BatchNormalization (3 channels)
   2. Conv2D(32, 3x3, padding same, relu)
   3. Conv2D(32, 3x3, same, relu)
   4. MaxPooling2D(2x2, stride 2)
   5. Dropout(0.25) -> identity (dropout off in this fixture)
   6. BatchNormalization (32)
   7. Conv2D(64, 3x3, same, relu)
   8. Conv2D(64, 3x3, valid, relu)
   9. MaxPooling2D(2x2)
  10. Dropout -> identity
  11. Flatten, channels_last order: flat = (h*W + w)*C + c  (7*7*64 = 3136)
  12. Dense(512, relu)
  13. Dropout -> identity
  14. Dense(10) + softmax
Total params 1,676,982, of which 70 are non-trainable (BN moving stats).

BatchNormalization (Keras): epsilon 1e-3, momentum 0.99.  Training mode
normalises with the batch mean and the BIASED batch variance; the moving
statistics are updated as  moving = moving*0.99 + batch*0.01  where the batch
variance is also the BIASED one (unlike torch's BatchNorm2d running_var, which
is why the moving statistics are kept by hand here).  Inference mode uses
(x - moving_mean) / sqrt(moving_variance + eps) * gamma + beta.

Loss: sparse categorical cross-entropy from the logits (log_softmax), mean over
the batch.

Weights, Keras order and Keras layouts; weight index k counts every tensor,
non-trainable ones included (20 tensors):
  BN:     gamma (C,), beta (C,), moving_mean (C,), moving_variance (C,)
  Conv2D: kernel (kh, kw, in, out), bias (out,)
  Dense:  kernel (in, out), bias (out,)
  k = 0..3 BN0, 4,5 conv1, 6,7 conv2, 8..11 BN1, 12,13 conv3, 14,15 conv4,
      16,17 dense1, 18,19 dense2.
Values, computed in float64 then cast to float32, for weight index k and flat
row-major element index i in the KERAS layout:
  h = (i * 2654435761 + (k + 1) * 40503) mod 2**32;  u = h / 2**32;  s = 2u - 1
  kernel: s * sqrt(6 / (fan_in + fan_out))
          conv:  fan_in = kh*kw*in, fan_out = kh*kw*out
          dense: fan_in = in,       fan_out = out
  bias:   0.1 * s
  gamma:  1 + 0.1 * s;   beta: 0.1 * s;   moving_mean: 0;   moving_variance: 1
Torch layouts: conv (kh,kw,in,out) -> (out,in,kh,kw); dense (in,out) -> (out,in).

Input batch: N = 8, x of shape (8, 32, 32, 3) NHWC float32; flat NHWC index i:
  h = (i * 2654435761 + 1001 * 40503) mod 2**32;  x = floor(256 * h / 2**32)
  (raw integer pixels 0..255, no scaling).  Labels y[n] = (3*n) % 10.

Recorded (float32 computation, torch.set_num_threads(2), no TF32):
  loss      loss of the first forward (initial weights, training-mode BN)
  probs     softmax output (8 x 10) of that forward
  grads.bin gradients of that loss w.r.t. every TRAINABLE weight (gamma, beta,
            kernels, biases), in Keras layout, concatenated in Keras order;
            raw little-endian float32, no header.  manifest["grads"] gives
            name, shape, offset and count (in float elements) of each.
  adam_losses  10 steps of Keras Adam on the same batch (lr 1e-3, beta_1 0.9,
            beta_2 0.999, epsilon 1e-7), at step t = 1..10:
              a = lr*sqrt(1-beta_2^t)/(1-beta_1^t)
              m += (g-m)*(1-beta_1);  v += (g*g-v)*(1-beta_2)
              w -= a*m/(sqrt(v)+epsilon)
            each step = forward (training-mode BN, updates moving stats),
            loss, backward, update.  The first recorded forward (loss/grads)
            IS step 1's forward: 10 forwards and 10 moving-stat updates in all;
            adam_losses[0] == loss.
  moving    moving_mean / moving_variance of both BN layers after the 10 steps
  final_loss_eval  loss of one more forward at the final weights with BN in
            inference mode (moving stats; does not update them).
Extra manifest keys: "labels"; "torch_version"; "input_sum" (float64 sum of the
input batch) and "weight_sums" (float64 sum of each initial float32 weight
tensor, Keras order), to check the reconstruction; "float64_reference": loss,
adam_losses and final_loss_eval of the same computation in float64.  float32
rounding alone moves the Adam losses by up to ~2e-3 and final_loss_eval by
~7e-3 relative to float64 (Adam normalises tiny gradients to ~lr-sized steps,
so rounding differences get amplified), so the C++ test needs looser tolerances
for those than for loss/probs/grads of the first forward.

Self-checks run by this script: parameter total 1,676,982 with 70
non-trainable; Keras<->torch layout round trip; a few weights/pixels recomputed
with plain Python integers; first forward/backward against torch.nn layers
(and torch's running_var shown to be the UNBIASED variance); loss/probs/grads
against a float64 run; the first Adam step equals lr*g/(|g| + eps/sqrt(1-b2));
the first BN layer's moving stats equal the closed form for 10 updates; the
loss falls over the 10 steps.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

BN_EPS = 1e-3
BN_MOMENTUM = 0.99
N, H, W, C_IN, CLASSES = 8, 32, 32, 3, 10

# (layer name, kind, config)
LAYERS = [
    ("batch_normalization", "bn", 3),
    ("conv2d", "conv", (3, 32, "same")),
    ("conv2d_1", "conv", (32, 32, "same")),
    ("max_pooling2d", "pool", None),
    ("dropout", "dropout", None),
    ("batch_normalization_1", "bn", 32),
    ("conv2d_2", "conv", (32, 64, "same")),
    ("conv2d_3", "conv", (64, 64, "valid")),
    ("max_pooling2d_1", "pool", None),
    ("dropout_1", "dropout", None),
    ("flatten", "flatten", None),
    ("dense", "dense", (3136, 512, True)),
    ("dropout_2", "dropout", None),
    ("dense_1", "dense", (512, 10, False)),
]


def hash_s(k, count):
    """s = 2*u - 1 for weight index k, elements 0..count-1 (float64)."""
    i = np.arange(count, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64((k + 1) * 40503)) % np.uint64(2 ** 32)
    u = h.astype(np.float64) / 2.0 ** 32
    return 2.0 * u - 1.0


def make_input():
    count = N * H * W * C_IN
    i = np.arange(count, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(1001 * 40503)) % np.uint64(2 ** 32)
    x = np.floor(256.0 * h.astype(np.float64) / 2.0 ** 32)
    assert x.min() >= 0 and x.max() <= 255
    return x.astype(np.float32).reshape(N, H, W, C_IN)


def make_weights():
    """List of (keras_name, role, keras_layout_array float32, trainable)."""
    out = []
    k = 0
    for lname, kind, cfg in LAYERS:
        if kind == "bn":
            c = cfg
            s = hash_s(k, c); out.append((lname + "/gamma", "gamma", (1.0 + 0.1 * s).astype(np.float32), True)); k += 1
            s = hash_s(k, c); out.append((lname + "/beta", "beta", (0.1 * s).astype(np.float32), True)); k += 1
            out.append((lname + "/moving_mean", "moving_mean", np.zeros(c, np.float32), False)); k += 1
            out.append((lname + "/moving_variance", "moving_variance", np.ones(c, np.float32), False)); k += 1
        elif kind == "conv":
            cin, cout, _ = cfg
            shape = (3, 3, cin, cout)
            lim = math.sqrt(6.0 / (9 * cin + 9 * cout))
            s = hash_s(k, int(np.prod(shape)))
            out.append((lname + "/kernel", "kernel", (s * lim).astype(np.float32).reshape(shape), True)); k += 1
            s = hash_s(k, cout)
            out.append((lname + "/bias", "bias", (0.1 * s).astype(np.float32), True)); k += 1
        elif kind == "dense":
            fin, fout, _ = cfg
            lim = math.sqrt(6.0 / (fin + fout))
            s = hash_s(k, fin * fout)
            out.append((lname + "/kernel", "kernel", (s * lim).astype(np.float32).reshape(fin, fout), True)); k += 1
            s = hash_s(k, fout)
            out.append((lname + "/bias", "bias", (0.1 * s).astype(np.float32), True)); k += 1
    assert k == 20 and len(out) == 20
    return out


def keras_to_torch(a):
    if a.ndim == 4:  # (kh,kw,in,out) -> (out,in,kh,kw)
        return np.ascontiguousarray(a.transpose(3, 2, 0, 1))
    if a.ndim == 2:  # (in,out) -> (out,in)
        return np.ascontiguousarray(a.T)
    return a


def torch_to_keras(t):
    if t.dim() == 4:
        return t.permute(2, 3, 1, 0).contiguous()
    if t.dim() == 2:
        return t.t().contiguous()
    return t


class SeedCNN:
    """Functional model over a flat list of torch tensors (torch layouts)."""

    def __init__(self, weights, dtype):
        self.names = [w[0] for w in weights]
        self.trainable = [w[3] for w in weights]
        self.tensors = []
        for name, role, arr, tr in weights:
            t = torch.tensor(keras_to_torch(arr), dtype=dtype)
            if tr:
                t.requires_grad_(True)
            self.tensors.append(t)

    def forward(self, x_nhwc, training):
        """Returns logits. In training mode, updates the BN moving stats."""
        x = x_nhwc.permute(0, 3, 1, 2)  # NCHW
        k = 0
        T = self.tensors
        for lname, kind, cfg in LAYERS:
            if kind == "bn":
                gamma, beta, mm, mv = T[k], T[k + 1], T[k + 2], T[k + 3]
                if training:
                    mean = x.mean(dim=(0, 2, 3))
                    var = ((x - mean.view(1, -1, 1, 1)) ** 2).mean(dim=(0, 2, 3))  # biased
                    inv = torch.rsqrt(var + BN_EPS) * gamma
                    x = (x - mean.view(1, -1, 1, 1)) * inv.view(1, -1, 1, 1) + beta.view(1, -1, 1, 1)
                    with torch.no_grad():
                        mm.copy_(mm * BN_MOMENTUM + mean.detach() * (1.0 - BN_MOMENTUM))
                        mv.copy_(mv * BN_MOMENTUM + var.detach() * (1.0 - BN_MOMENTUM))
                else:
                    inv = torch.rsqrt(mv + BN_EPS) * gamma
                    x = (x - mm.view(1, -1, 1, 1)) * inv.view(1, -1, 1, 1) + beta.view(1, -1, 1, 1)
                k += 4
            elif kind == "conv":
                pad = 1 if cfg[2] == "same" else 0
                x = F.relu(F.conv2d(x, T[k], T[k + 1], padding=pad))
                k += 2
            elif kind == "pool":
                x = F.max_pool2d(x, 2, 2)
            elif kind == "dropout":
                pass  # identity in this fixture
            elif kind == "flatten":
                x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # channels_last order
            elif kind == "dense":
                x = F.linear(x, T[k], T[k + 1])
                if cfg[2]:
                    x = F.relu(x)
                k += 2
        assert k == 20
        return x

    def trainable_tensors(self):
        return [t for t, tr in zip(self.tensors, self.trainable) if tr]


def loss_fn(logits, y):
    return F.nll_loss(F.log_softmax(logits, dim=1), y)  # mean over batch


def adam_run(model, x, y, steps, lr=1e-3, b1=0.9, b2=0.999, eps=1e-7):
    params = model.trainable_tensors()
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    losses, first = [], None
    for t in range(1, steps + 1):
        for p in params:
            p.grad = None
        logits = model.forward(x, training=True)
        loss = loss_fn(logits, y)
        loss.backward()
        if t == 1:
            first = (loss.detach().clone(), torch.softmax(logits.detach(), dim=1),
                     [p.grad.detach().clone() for p in params])
            step1_before = [p.detach().clone() for p in params]
        losses.append(loss.item())
        a = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
        with torch.no_grad():
            for p, mi, vi in zip(params, m, v):
                g = p.grad
                mi.add_((g - mi) * (1.0 - b1))
                vi.add_((g * g - vi) * (1.0 - b2))
                p.sub_(a * mi / (torch.sqrt(vi) + eps))
        if t == 1:
            # Self-check: at t=1, m = (1-b1) g and v = (1-b2) g^2, so the step is
            # exactly lr * g / (|g| + eps/sqrt(1-b2)) (about lr*sign(g)).
            for p0, p, g in zip(step1_before, params, first[2]):
                d = (p0 - p.detach()).double()
                g = g.double()
                expect = lr * g / (g.abs() + eps / math.sqrt(1.0 - b2))
                # tolerance: float32 rounding of w (|w| <= ~1.1) and of m, v
                assert torch.allclose(d, expect, rtol=1e-3, atol=3e-7), "adam step 1"
    return losses, first


def spot_check_formulas(weights, x_np):
    """Recompute a few elements with plain Python ints/floats."""
    fans = {4: (27, 288), 16: (3136, 512), 18: (512, 10)}
    for k, i in ((4, 0), (4, 863), (16, 1605631), (18, 5119), (0, 2), (17, 511)):
        h = (i * 2654435761 + (k + 1) * 40503) % 2 ** 32
        s = 2.0 * (h / 2.0 ** 32) - 1.0
        name, role = weights[k][0], weights[k][1]
        if role == "kernel":
            fi, fo = fans[k]
            want = s * math.sqrt(6.0 / (fi + fo))
        elif role == "gamma":
            want = 1.0 + 0.1 * s
        else:
            want = 0.1 * s
        got = weights[k][2].reshape(-1)[i]
        assert got == np.float32(want), (name, i, got, want)
    for i in (0, 1, 12345, 24575):
        h = (i * 2654435761 + 1001 * 40503) % 2 ** 32
        assert x_np.reshape(-1)[i] == (256 * h) // 2 ** 32


def torch_module_check(weights, x, y, loss_ref, grads_ref):
    """Cross-check the first forward/backward against plain torch.nn layers."""
    import torch.nn as nn
    bn0, bn1 = nn.BatchNorm2d(3, eps=BN_EPS, momentum=0.01), nn.BatchNorm2d(32, eps=BN_EPS, momentum=0.01)
    c = [nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 32, 3, padding=1),
         nn.Conv2d(32, 64, 3, padding=1), nn.Conv2d(64, 64, 3)]
    d = [nn.Linear(3136, 512), nn.Linear(512, 10)]
    order = [bn0.weight, bn0.bias, None, None, c[0].weight, c[0].bias, c[1].weight, c[1].bias,
             bn1.weight, bn1.bias, None, None, c[2].weight, c[2].bias, c[3].weight, c[3].bias,
             d[0].weight, d[0].bias, d[1].weight, d[1].bias]
    with torch.no_grad():
        for p, w in zip(order, weights):
            if p is not None:
                p.copy_(torch.from_numpy(keras_to_torch(w[2])))
    r = F.relu
    h = x.permute(0, 3, 1, 2)
    h = F.max_pool2d(r(c[1](r(c[0](bn0(h))))), 2)
    h = F.max_pool2d(r(c[3](r(c[2](bn1(h))))), 2)
    h = r(d[0](h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)))
    loss = loss_fn(d[1](h), y)
    loss.backward()
    assert abs(loss.item() - loss_ref) < 1e-5 * max(1.0, loss_ref), (loss.item(), loss_ref)
    ps = [p for p in order if p is not None]
    for p, g in zip(ps, grads_ref):
        scale = g.abs().max().item() + 1e-12
        assert (p.grad - g).abs().max().item() / scale < 1e-4, "nn-module grad mismatch"
    # torch's running_var tracks the UNBIASED variance; ours must not.
    n = x.shape[0] * x.shape[1] * x.shape[2]
    biased = x.double().var(dim=(0, 1, 2), unbiased=False)
    rv = bn0.running_var.double()
    unb = 0.99 + 0.01 * biased * n / (n - 1)
    bia = 0.99 + 0.01 * biased
    assert bool(((rv - unb).abs() < (rv - bia).abs()).all()), (rv, unb, bia)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "fixtures", "seed_cnn_parity"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=default_out)
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)

    weights = make_weights()
    total = sum(w[2].size for w in weights)
    non_trainable = sum(w[2].size for w in weights if not w[3])
    assert total == 1676982, total
    assert non_trainable == 70, non_trainable
    # Layout round trip self-check.
    for _, _, arr, _ in weights:
        back = torch_to_keras(torch.from_numpy(keras_to_torch(arr))).numpy()
        assert back.shape == arr.shape and np.array_equal(back, arr)

    x_np = make_input()
    y_np = np.array([(3 * n) % 10 for n in range(N)], dtype=np.int64)
    spot_check_formulas(weights, x_np)
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(y_np)

    # ---- float32 run: loss / probs / grads, then 10 Adam steps -------------
    model = SeedCNN(weights, torch.float32)
    adam_losses, (loss0, probs, grads) = adam_run(model, x, y, steps=10)
    loss0 = loss0.item()
    assert adam_losses[0] == loss0
    with torch.no_grad():
        final_loss_eval = loss_fn(model.forward(x, training=False), y).item()

    torch_module_check(weights, x, y, loss0, grads)

    # ---- float64 cross-check of the first forward/backward -----------------
    m64 = SeedCNN(weights, torch.float64)
    logits64 = m64.forward(x.double(), training=True)
    l64 = loss_fn(logits64, y)
    l64.backward()
    assert abs(l64.item() - loss0) <= 1e-4 * max(1.0, abs(l64.item())), (l64.item(), loss0)
    p64 = torch.softmax(logits64.detach(), 1)
    assert torch.allclose(probs.double(), p64, atol=1e-5), "probs vs float64"
    for g32, p in zip(grads, m64.trainable_tensors()):
        g64 = p.grad
        scale = g64.abs().max().item() + 1e-12
        err = (g32.double() - g64).abs().max().item() / scale
        assert err < 1e-3, ("grad vs float64", err)
    # Probabilities: rows sum to 1; loss consistent with probs.
    assert torch.allclose(probs.sum(1), torch.ones(N), atol=1e-5)
    nll = -torch.log(probs.double()[torch.arange(N), y]).mean().item()
    assert abs(nll - loss0) < 1e-4 * max(1.0, loss0), (nll, loss0)
    # Training must actually reduce the loss on a fixed batch.
    assert adam_losses[-1] < adam_losses[0], adam_losses

    # Moving stats: 10 updates; check against an independent recomputation of
    # the first BN layer (its input never changes): 0.99^10 decay.
    bn0_mean = x.double().mean(dim=(0, 1, 2))
    bn0_var = x.double().var(dim=(0, 1, 2), unbiased=False)
    d = BN_MOMENTUM ** 10
    exp_mm = bn0_mean * (1 - d)
    exp_mv = d * 1.0 + bn0_var * (1 - d)
    mm0, mv0 = model.tensors[2], model.tensors[3]
    assert torch.allclose(mm0.double(), exp_mm, rtol=1e-4), (mm0, exp_mm)
    assert torch.allclose(mv0.double(), exp_mv, rtol=1e-4), (mv0, exp_mv)

    # ---- float64 Adam run: how far float32 rounding alone moves the trajectory
    # (informational; the C++ test can size its tolerances from it).
    m64b = SeedCNN(weights, torch.float64)
    adam64, _ = adam_run(m64b, x.double(), y, steps=10)
    with torch.no_grad():
        final64 = loss_fn(m64b.forward(x.double(), training=False), y).item()
    adam_div = max(abs(a - b) for a, b in zip(adam_losses, adam64))

    # ---- write fixture ------------------------------------------------------
    os.makedirs(args.out, exist_ok=True)
    grad_entries, chunks, off = [], [], 0
    gi = 0
    for name, role, arr, tr in weights:
        if not tr:
            continue
        gk = torch_to_keras(grads[gi]).numpy().astype("<f4")
        gi += 1
        assert tuple(gk.shape) == arr.shape
        grad_entries.append({"name": name, "shape": list(arr.shape), "offset": off, "count": int(gk.size)})
        chunks.append(gk.reshape(-1))
        off += gk.size
    assert off == 1676982 - 70
    blob = np.concatenate(chunks).astype("<f4")
    with open(os.path.join(args.out, "grads.bin"), "wb") as f:
        f.write(blob.tobytes())

    def f32(v):
        return float(np.float32(v))

    moving = {}
    for idx, lname in ((2, "batch_normalization"), (10, "batch_normalization_1")):
        moving[lname] = {
            "moving_mean": [f32(v) for v in model.tensors[idx].detach().numpy()],
            "moving_variance": [f32(v) for v in model.tensors[idx + 1].detach().numpy()],
        }
    assert model.names[10] == "batch_normalization_1/moving_mean"

    manifest = {
        "description": "PyTorch %s parity fixture for the systolic seed CNN "
                       "(generated by tests/reference/seed_cnn_parity.py; see its docstring "
                       "for the exact model, weight, input and Adam formulas). "
                       "grads.bin: little-endian float32 gradients of `loss` w.r.t. the "
                       "trainable weights, Keras layouts, Keras order." % torch.__version__,
        "torch_version": torch.__version__,
        "batch": N,
        "input_shape": [H, W, C_IN],
        "classes": CLASSES,
        "labels": [int(v) for v in y_np],
        "loss": f32(loss0),
        "probs": [[f32(v) for v in row] for row in probs.numpy()],
        "adam_losses": [f32(v) for v in adam_losses],
        "final_loss_eval": f32(final_loss_eval),
        "moving": moving,
        "grads": grad_entries,
        "float64_reference": {
            "note": "same computation in float64; |float32 - float64| shows the "
                    "divergence caused by float32 rounding alone (Adam amplifies it)",
            "loss": l64.item(),
            "adam_losses": adam64,
            "final_loss_eval": final64,
        },
        "input_sum": float(x_np.astype(np.float64).sum()),
        "weight_sums": [{"name": w[0], "sum": float(w[2].astype(np.float64).sum())} for w in weights],
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    print("torch", torch.__version__, "threads", torch.get_num_threads())
    print("params total 1676982, non-trainable 70: ok")
    print("loss            %r" % f32(loss0))
    print("adam_losses     %s" % ", ".join(repr(f32(v)) for v in adam_losses))
    print("final_loss_eval %r" % f32(final_loss_eval))
    print("float64 run: max |adam_loss32 - adam_loss64| = %.3g, final_loss_eval64 = %r"
          % (adam_div, final64))
    print("grads.bin       %d floats, %d bytes" % (blob.size, blob.nbytes))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
