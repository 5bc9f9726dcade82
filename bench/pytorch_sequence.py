#!/usr/bin/env python3
"""PyTorch 2.x CPU baseline for the sequence benchmarks of issue 28 (bench/keras_sequence.py's models, the same
shapes): bilstm_imdb (nn.Embedding(20000, 128), two bidirectional nn.LSTM(64) layers, the last step's outputs of the
second into nn.Linear(128, 1), BCEWithLogits), gru_series (two nn.GRU(64) layers, nn.Linear(64, 4), cross entropy)
and lstm_step (one nn.LSTM(64) step of one feature, nn.Linear(64, 2), cross entropy). Adam(1e-3). Times an epoch of --steps training steps after 2
warm-up steps, then single-sample inference latency under torch.inference_mode (median of 50 after 5 warm-ups).
Prints one JSON line.

    python bench/pytorch_sequence.py --model bilstm_imdb --batch-size 32 --steps 20
"""
import argparse
import json
import statistics
import time


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU sequence benchmarks")
    ap.add_argument("--model", choices=("bilstm_imdb", "gru_series", "lstm_step"), default="bilstm_imdb")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()

    import torch
    from torch import nn

    torch.manual_seed(0)

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
    else:
        model, x = Step(), torch.randint(0, 256, (n, 1, 1), generator=g).float()
        y, loss_fn = torch.randint(0, 2, (n,), generator=g), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        b = slice(i * args.batch_size, (i + 1) * args.batch_size)
        opt.zero_grad()
        loss_fn(model(x[b]), y[b]).backward()
        opt.step()

    for i in range(2):
        step(i)
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(i)
    train_s = time.perf_counter() - t0
    model.eval()
    ms = []
    with torch.inference_mode():
        for i in range(55):
            s = time.perf_counter()
            model(x[:1])
            if i >= 5:
                ms.append((time.perf_counter() - s) * 1e3)
    print(json.dumps({"framework": "pytorch", "torch_version": torch.__version__, "model": args.model,
                      "batch_size": args.batch_size, "train_samples_per_sec": n / train_s,
                      "predict_ms": statistics.median(ms)}))


if __name__ == "__main__":
    main()
