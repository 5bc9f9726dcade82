#!/usr/bin/env python3
"""PyTorch 2.x CPU baseline for the sequence benchmarks of issue 28 (bench/keras_sequence.py's models, the same
shapes): bilstm_imdb (nn.Embedding(20000, 128), two bidirectional nn.LSTM(64) layers, the last step's outputs of the
second into nn.Linear(128, 1), BCEWithLogits), gru_series (two nn.GRU(64) layers, nn.Linear(64, 4), cross entropy)
and lstm_step (one nn.LSTM(64) step of one feature, nn.Linear(64, 2), cross entropy), and transformer_series
(keras-io's time-series encoder as bench/keras_sequence.py builds it: per block, query/key/value projections of the
32 channels to 4 heads of 32, F.scaled_dot_product_attention with dropout 0.25 on the probabilities (PyTorch's fused
SDPA: flash or memory-efficient attention on a GPU), the output projection back to 32, dropout, LayerNorm(eps 1e-6),
the residual add, nn.Linear(32, 64) + relu and nn.Linear(64, 32) (Keras's Conv1D with kernel 1), dropout, LayerNorm,
the residual add; the mean over the channels (GlobalAveragePooling1D channels_first), nn.Linear(128, 64) + relu,
nn.Linear(64, 4), cross entropy). Adam(1e-3). Times an epoch of --steps training steps after 2 warm-up steps, then
single-sample inference latency under torch.inference_mode (median of 50 after 5 warm-ups). Prints one JSON line.
--device cuda runs on the GPU (TF32 allowed in matrix products, as systolic's GPU dense layers compute; the timings
wait for the GPU).

    python bench/pytorch_sequence.py --model bilstm_imdb --batch-size 32 --steps 20
    python bench/pytorch_sequence.py --model transformer_series --device cuda --batch-size 256 --steps 50
"""
import argparse
import json
import statistics
import time


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU sequence benchmarks")
    ap.add_argument("--model", choices=("bilstm_imdb", "gru_series", "lstm_step", "transformer_series"),
                    default="bilstm_imdb")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()

    import torch
    from torch import nn

    torch.manual_seed(0)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    class Encoder(nn.Module):
        def __init__(self, channels=32, heads=4, head_size=32, ff=64, dropout=0.25):
            super().__init__()
            self.heads, self.head_size, self.dropout = heads, head_size, dropout
            self.q = nn.Linear(channels, heads * head_size)
            self.k = nn.Linear(channels, heads * head_size)
            self.v = nn.Linear(channels, heads * head_size)
            self.o = nn.Linear(heads * head_size, channels)
            self.drop = nn.Dropout(dropout)
            self.norm1 = nn.LayerNorm(channels, eps=1e-6)
            self.ff1 = nn.Linear(channels, ff)
            self.ff2 = nn.Linear(ff, channels)
            self.norm2 = nn.LayerNorm(channels, eps=1e-6)

        def forward(self, x):
            n, t, _ = x.shape
            split = lambda y: y.view(n, t, self.heads, self.head_size).transpose(1, 2)
            a = nn.functional.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)),
                                                           dropout_p=self.dropout if self.training else 0.0)
            h = self.o(a.transpose(1, 2).reshape(n, t, self.heads * self.head_size))
            res = self.norm1(self.drop(h)) + x
            h = self.ff2(self.drop(torch.relu(self.ff1(res))))
            return self.norm2(h) + res

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(Encoder(), Encoder())
            self.dense = nn.Linear(128, 64)
            self.out = nn.Linear(64, 4)

        def forward(self, x):
            h = self.blocks(x).mean(dim=-1)
            return self.out(torch.relu(self.dense(h)))

    class BiLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20000, 128)
            self.l1 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
            self.l2 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
            self.out = nn.Linear(128, 1)

        def forward(self, x):
            h, _ = self.l1(self.emb(x))
            _, (hn, _) = self.l2(h)
            return self.out(torch.cat([hn[0], hn[1]], dim=1))

    class Gru(nn.Module):
        def __init__(self):
            super().__init__()
            self.g = nn.GRU(6, 64, num_layers=2, batch_first=True)
            self.out = nn.Linear(64, 4)

        def forward(self, x):
            h, _ = self.g(x)
            return self.out(h[:, -1])

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.LSTM(1, 64, batch_first=True)
            self.out = nn.Linear(64, 2)

        def forward(self, x):
            return self.out(self.l(x)[0][:, -1])

    n = args.batch_size * args.steps
    g = torch.Generator().manual_seed(7)
    if args.model == "bilstm_imdb":
        model, x = BiLstm(), torch.randint(0, 256, (n, 200), generator=g)
        y, loss_fn = torch.randint(0, 2, (n, 1), generator=g).float(), nn.BCEWithLogitsLoss()
    elif args.model == "gru_series":
        model, x = Gru(), torch.randint(0, 256, (n, 100, 6), generator=g).float()
        y, loss_fn = torch.randint(0, 4, (n,), generator=g), nn.CrossEntropyLoss()
    elif args.model == "transformer_series":
        model, x = Transformer(), torch.randint(0, 256, (n, 128, 32), generator=g).float()
        y, loss_fn = torch.randint(0, 4, (n,), generator=g), nn.CrossEntropyLoss()
    else:
        model, x = Step(), torch.randint(0, 256, (n, 1, 1), generator=g).float()
        y, loss_fn = torch.randint(0, 2, (n,), generator=g), nn.CrossEntropyLoss()
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        b = slice(i * args.batch_size, (i + 1) * args.batch_size)
        opt.zero_grad()
        loss_fn(model(x[b]), y[b]).backward()
        opt.step()

    for i in range(2):
        step(i)
    sync()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(i)
    sync()
    train_s = time.perf_counter() - t0
    model.eval()
    ms = []
    with torch.inference_mode():
        for i in range(55):
            s = time.perf_counter()
            model(x[:1])
            sync()
            if i >= 5:
                ms.append((time.perf_counter() - s) * 1e3)
    print(json.dumps({"framework": "pytorch", "torch_version": torch.__version__, "model": args.model,
                      "device": str(device), "batch_size": args.batch_size, "train_samples_per_sec": n / train_s,
                      "predict_ms": statistics.median(ms)}))


if __name__ == "__main__":
    main()
