"""A real (tiny) training run shared by the tests: AdamW on a small
transformer-ish model, state saved at every step."""

import functools
import os
import tempfile

from ._util import torch

STEPS = 6


class TinyNet(torch.nn.Module if torch is not None else object):
    def __init__(self, vocab=64, d=32, hidden=128):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.ln = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, 2, batch_first=True)
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        h = self.ln(x)
        T = idx.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def make(seed=0):
    torch.manual_seed(seed)
    model = TinyNet()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    return model, opt


def batch(step, vocab=64):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randint(0, vocab, (8, 16), generator=g)
    return x[:, :-1], x[:, 1:]


def train_step(model, opt, step):
    x, y = batch(step)
    loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, 64), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def flatten(model, opt):
    """One flat dict: fp32 weights, bf16 copies, AdamW moments and step counts."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for n, t in model.state_dict().items():
        out["model." + n] = t.detach().clone()
        if t.is_floating_point():
            out["bf16." + n] = t.detach().to(torch.bfloat16)
    sd = opt.state_dict()
    params = [p for g in opt.param_groups for p in g["params"]]
    for i, p in enumerate(params):
        for k, v in sd["state"].get(i, {}).items():
            out["optim.%s.%s" % (names[id(p)], k)] = v.detach().clone()
    return out


def unflatten_into(flat, model, opt):
    """Loads a flat dict (from flatten) back into model and optimizer."""
    model.load_state_dict({n[6:]: t for n, t in flat.items() if n.startswith("model.")})
    names = [n for n, _ in model.named_parameters()]
    sd = opt.state_dict()
    state = {}
    for i, n in enumerate(names):
        st = {k.rsplit(".", 1)[1]: t for k, t in flat.items() if k.startswith("optim.%s." % n)
              and k.count(".") == n.count(".") + 2}
        if st:
            state[i] = st
    sd["state"] = state
    opt.load_state_dict(sd)


@functools.lru_cache(maxsize=None)
def trajectory():
    """Trains for STEPS steps. Returns (dir, [flat state after step k], losses)
    with DIR/step-k.pt written by torch.save at every step."""
    d = tempfile.mkdtemp(prefix="lmc-pytrain-")
    model, opt = make()
    flats, losses = [], []
    for k in range(1, STEPS + 1):
        losses.append(train_step(model, opt, k))
        torch.save({"model": model.state_dict(), "optim": opt.state_dict()},
                   os.path.join(d, "step-%d.pt" % k))
        flats.append(flatten(model, opt))
    return d, flats, losses
