#!/usr/bin/python3
"""Train a tiny byte-level GPT on local text and dump a checkpoint trajectory.

Purpose: produce realistic LLM training checkpoints (and therefore realistic
checkpoint-to-checkpoint deltas) for testing and benchmarking lmc, without
downloading anything.  Standard library + torch only (numpy is not needed).

Model: decoder-only transformer, nanoGPT-style naming:
    wte.weight            token embedding   [256, d]       (byte vocabulary)
    wpe.weight            position embedding [seq_len, d]
    h.<i>.ln_1.{weight,bias}
    h.<i>.attn.c_attn.{weight,bias}   fused qkv  [3d, d], [3d]
    h.<i>.attn.c_proj.{weight,bias}   output proj [d, d], [d]
    h.<i>.ln_2.{weight,bias}
    h.<i>.mlp.c_fc.{weight,bias}      [4d, d], [4d]   (GELU)
    h.<i>.mlp.c_proj.{weight,bias}    [d, 4d], [d]
    ln_f.{weight,bias}
    lm_head.weight        [256, d]   (untied from wte, no bias)
Weights are stored in torch's native [out, in] layout for Linear layers.

Optimizer: torch.optim.AdamW(betas=(0.9, 0.95), eps=1e-8), weight decay
(--wd, default 0.1) applied to all >=2-D tensors (matrices and embeddings),
no decay on biases and LayerNorm parameters.  LR schedule: linear warmup for
--warmup steps, then cosine decay to lr/10 at --steps.  Gradient clipping 1.0.

Checkpoints: a checkpoint labelled "step k" is the state after k optimizer
updates.  Saves happen at every step k with k >= --save-from,
(k - --save-from) % --every == 0 and k <= --steps (so --save-from 0, the
default, includes step 0 = initial weights with all-zero Adam moments).
Each save is a folder OUT/step-%06d/ holding:
    model_bf16.safetensors   every parameter cast to bfloat16 ("BF16")
    model_fp32.safetensors   fp32 master weights ("F32")
    optim.safetensors        "<param>.exp_avg" and "<param>.exp_avg_sq" ("F32")
                             (+ a scalar I64 "step" tensor with --optim-step)
Same tensor names in both model files; optimizer names are the parameter name
plus a suffix.  OUT/run.json records the configuration, corpus summary and the
loss at every save (rewritten atomically after each save).

safetensors layout (standard): u64 LE header length N, N bytes of compact
JSON {"__metadata__":{"format":"pt"},"<name>":{"dtype":..,"shape":[..],
"data_offsets":[b,e]},...} padded with spaces so that N % 8 == 0, then the
tensor bytes back to back (little-endian, row-major), offsets relative to the
start of the data section.  Tensors are ordered like the reference writer:
by descending dtype alignment, then by name (within a single-dtype file this
is simply sorted by name); JSON keys appear in that same (offset) order.
Files and step folders are written atomically (temp name + fsync + rename).

Determinism: corpus files are gathered in sorted path order with fixed caps,
and torch / python RNGs are seeded from --seed, so a run with the same
arguments, on the same machine (same files installed), same torch build and
same --threads is reproducible.  run.json records a SHA-256 of the corpus.
"""

import argparse
import ctypes
import gzip
import hashlib
import json
import math
import os
import random
import shutil
import sys
import sysconfig
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256

# ----------------------------------------------------------------------------
# corpus


def _read_text_file(path, max_bytes):
    """Return the (possibly gunzipped) bytes of a UTF-8 text file, else None."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
    except Exception:  # unreadable, truncated or bad gzip
        return None
    if not data or b"\x00" in data[:8192]:
        return None
    data = data[:max_bytes]
    # require valid UTF-8 (allow a multi-byte char cut at the cap)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(data) - 4:
            return None
        data = data[: e.start]
    return data


SKIP_EXT = (".png", ".jpg", ".jpeg", ".gif", ".ico", ".svg", ".pdf", ".pyc",
            ".so", ".bz2", ".xz", ".zip", ".zst", ".bin", ".mo", ".woff",
            ".ttf", ".otf", ".exe", ".whl", ".egg", ".tar")


def _walk_sorted(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            yield os.path.join(dirpath, fn)


def build_corpus(roots, total_bytes, per_file_bytes):
    """Concatenate text files under each root (sorted), an equal share of the
    byte budget per root.  Returns (bytes, summary dict)."""
    seen = set()
    chunks = []
    summary = []
    share = total_bytes // max(1, len(roots))
    for root in roots:
        if not os.path.isdir(root):
            summary.append({"root": root, "files": 0, "bytes": 0})
            continue
        used, nfiles = 0, 0
        for path in _walk_sorted(root):
            if used >= share:
                break
            low = path.lower()
            if low.endswith(SKIP_EXT) or "__pycache__" in path:
                continue
            if "site-packages" in path or "dist-packages" in path:
                continue
            try:
                if not os.path.isfile(path):
                    continue
                real = os.path.realpath(path)
            except OSError:
                continue
            if real in seen:
                continue
            seen.add(real)
            data = _read_text_file(path, min(per_file_bytes, share - used))
            if not data:
                continue
            chunks.append(data)
            chunks.append(b"\n\n")
            used += len(data) + 2
            nfiles += 1
        summary.append({"root": root, "files": nfiles, "bytes": used})
    corpus = b"".join(chunks)
    return corpus, summary


# ----------------------------------------------------------------------------
# model


class Block(nn.Module):
    def __init__(self, d, n_head, seq_len):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)
        self.n_head = n_head
        mask = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, seq_len, seq_len), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_head
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // h))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.c_proj(y)
        x = x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))
        return x


class TinyGPT(nn.Module):
    def __init__(self, d, n_layer, n_head, seq_len):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(seq_len, d)
        self.h = nn.ModuleList([Block(d, n_head, seq_len) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)
        # GPT-2 style init
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)[None]
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


# ----------------------------------------------------------------------------
# safetensors writer

_DTYPE = {
    torch.float32: ("F32", 4),
    torch.bfloat16: ("BF16", 2),
    torch.float16: ("F16", 2),
    torch.int64: ("I64", 8),
    torch.int32: ("I32", 4),
}


def tensor_bytes(t):
    """Raw little-endian row-major bytes of a CPU tensor (no numpy needed)."""
    t = t.detach().to("cpu").contiguous()
    n = t.numel() * t.element_size()
    if n == 0:
        return b""
    return ctypes.string_at(t.data_ptr(), n)


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_safetensors(tensors, path):
    """tensors: dict name -> CPU tensor.  Atomic write to `path`."""
    if sys.byteorder != "little":
        raise RuntimeError("big-endian host not supported")
    items = []
    for name, t in tensors.items():
        if t.dtype not in _DTYPE:
            raise ValueError("unsupported dtype %s for %s" % (t.dtype, name))
        items.append((name, t))
    # reference order: descending alignment (element size), then name
    items.sort(key=lambda kv: (-_DTYPE[kv[1].dtype][1], kv[0]))
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name, t in items:
        b = tensor_bytes(t)
        assert len(b) == t.numel() * _DTYPE[t.dtype][1]
        header[name] = {"dtype": _DTYPE[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hjson = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(len(hjson).to_bytes(8, "little"))
        f.write(hjson)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return 8 + len(hjson) + off


def write_json_atomic(obj, path):
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(out, step, model, opt, optim_step_tensor):
    final = os.path.join(out, "step-%06d" % step)
    tmpdir = os.path.join(out, ".step-%06d.tmp.%d" % (step, os.getpid()))
    if os.path.exists(tmpdir):
        shutil.rmtree(tmpdir)
    os.makedirs(tmpdir)
    params = dict(model.named_parameters())
    fp32 = {n: p.detach().clone() for n, p in params.items()}
    bf16 = {n: p.detach().to(torch.bfloat16) for n, p in params.items()}
    moments = {}
    for n, p in params.items():
        st = opt.state.get(p, {})
        ea = st.get("exp_avg")
        eas = st.get("exp_avg_sq")
        moments[n + ".exp_avg"] = ea.detach().clone() if ea is not None else torch.zeros_like(p)
        moments[n + ".exp_avg_sq"] = eas.detach().clone() if eas is not None else torch.zeros_like(p)
    if optim_step_tensor:
        moments["step"] = torch.tensor(step, dtype=torch.int64)
    size = 0
    size += save_safetensors(bf16, os.path.join(tmpdir, "model_bf16.safetensors"))
    size += save_safetensors(fp32, os.path.join(tmpdir, "model_fp32.safetensors"))
    size += save_safetensors(moments, os.path.join(tmpdir, "optim.safetensors"))
    _fsync_dir(tmpdir)
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmpdir, final)
    _fsync_dir(out)
    return final, size


# ----------------------------------------------------------------------------
# training


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    if args.steps <= args.warmup:
        return args.lr
    prog = min(1.0, (step - args.warmup) / (args.steps - args.warmup))
    min_lr = args.lr * 0.1
    return min_lr + 0.5 * (args.lr - min_lr) * (1.0 + math.cos(math.pi * prog))


def get_batch(data, batch, seq_len, gen):
    ix = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=gen)
    x = torch.stack([data[i: i + seq_len] for i in ix.tolist()])
    y = torch.stack([data[i + 1: i + 1 + seq_len] for i in ix.tolist()])
    return x.long(), y.long()


def default_roots():
    roots = ["/usr/share/common-licenses", "/usr/share/doc"]
    try:
        roots.append(sysconfig.get_paths()["stdlib"])
    except Exception:
        pass
    return roots


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Train a tiny byte-level GPT on local text files and write "
                    "safetensors checkpoints (bf16 weights, fp32 master weights, "
                    "AdamW moments) every N steps into OUT/step-NNNNNN/.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--steps", type=int, default=300, help="total optimizer steps")
    ap.add_argument("--every", type=int, default=50, help="save interval (steps)")
    ap.add_argument("--save-from", type=int, default=0,
                    help="first saved step (0 = save the initial weights too)")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--warmup", type=int, default=50, help="linear warmup steps")
    ap.add_argument("--wd", type=float, default=0.1, help="AdamW weight decay")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (1 is fastest for tiny models; try 2-4 for d_model>=256)")
    ap.add_argument("--corpus-mb", type=float, default=12.0,
                    help="max corpus size in MiB (split evenly over the roots)")
    ap.add_argument("--file-kb", type=int, default=256,
                    help="max bytes (KiB) taken from any one file")
    ap.add_argument("--roots", nargs="*", default=None,
                    help="text directories to read (default: common-licenses, "
                         "/usr/share/doc, python stdlib)")
    ap.add_argument("--optim-step", action="store_true",
                    help="also store a scalar I64 'step' tensor in optim.safetensors")
    ap.add_argument("--device", default="cpu",
                    help="torch device to train on, e.g. cuda; checkpoints are "
                         "always written from host copies")
    ap.add_argument("--log-every", type=int, default=0,
                    help="also print the training loss every K steps (0 = only at saves)")
    args = ap.parse_args(argv)

    if args.d_model % args.heads:
        ap.error("--d-model must be divisible by --heads")
    if args.every <= 0 or args.steps < 0 or args.save_from < 0:
        ap.error("bad --every/--steps/--save-from")

    torch.set_num_threads(max(1, args.threads))
    device = torch.device(args.device)
    if device.type == "cuda":
        # cuBLAS is deterministic only with a fixed workspace; set before first use
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    try:
        # some GPU kernels have no deterministic version: warn there, don't stop
        torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    except Exception:
        pass

    t0 = time.time()
    roots = args.roots if args.roots else default_roots()
    corpus, csum = build_corpus(roots, int(args.corpus_mb * 1024 * 1024), args.file_kb * 1024)
    if len(corpus) < 10 * (args.seq_len + 2):
        sys.exit("corpus too small (%d bytes); pass --roots" % len(corpus))
    chash = hashlib.sha256(corpus).hexdigest()
    data = torch.frombuffer(bytearray(corpus), dtype=torch.uint8)
    n_val = max(len(data) // 20, 4 * (args.seq_len + 2))
    train, val = data[:-n_val], data[-n_val:]
    print("corpus: %d bytes (%s) sha256=%s... in %.1fs" %
          (len(corpus), ", ".join("%s:%d files" % (s["root"], s["files"]) for s in csum),
           chash[:16], time.time() - t0), flush=True)

    model = TinyGPT(args.d_model, args.layers, args.heads, args.seq_len).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    print("model: d=%d layers=%d heads=%d seq=%d params=%d (%.2fM); "
          "~%.1f MB per save (bf16+fp32+2 moments)" %
          (args.d_model, args.layers, args.heads, args.seq_len, n_params,
           n_params / 1e6, n_params * 14 / 1e6), flush=True)

    gen = torch.Generator().manual_seed(args.seed + 1)
    val_gen = torch.Generator().manual_seed(args.seed + 2)
    vx, vy = get_batch(val, min(32, max(4, args.batch)), args.seq_len, val_gen)
    vx, vy = vx.to(device), vy.to(device)

    os.makedirs(args.out, exist_ok=True)
    run = {
        "tool": "tools/train_tiny_gpt.py",
        "argv": sys.argv[1:] if argv is None else list(argv),
        "config": {k: v for k, v in vars(args).items() if k != "roots"},
        "roots": roots,
        "torch": torch.__version__,
        "n_params": n_params,
        "corpus_bytes": len(corpus),
        "corpus_sha256": chash,
        "corpus_summary": csum,
        "param_shapes": {n: list(p.shape) for n, p in model.named_parameters()},
        "saves": [],
    }

    def is_save(k):
        return k >= args.save_from and (k - args.save_from) % args.every == 0

    def evaluate():
        model.eval()
        with torch.no_grad():
            lv = F.cross_entropy(model(vx).view(-1, VOCAB), vy.view(-1)).item()
        model.train()
        return lv

    recent = []
    last_loss = float("nan")
    t_train = time.time()
    for step in range(args.steps + 1):
        if is_save(step):
            vloss = evaluate()
            tl = sum(recent) / len(recent) if recent else float("nan")
            path, size = save_checkpoint(args.out, step, model, opt, args.optim_step)
            recent = []
            rec = {"step": step, "train_loss": None if math.isnan(tl) else round(tl, 4),
                   "last_loss": None if math.isnan(last_loss) else round(last_loss, 4),
                   "val_loss": round(vloss, 4), "lr": lr_at(max(0, step - 1), args) if step else 0.0,
                   "bytes": size, "elapsed_s": round(time.time() - t0, 1)}
            run["saves"].append(rec)
            write_json_atomic(run, os.path.join(args.out, "run.json"))
            print("save step %6d  train_loss %s  val_loss %.4f  lr %.2e  %s (%.2f MB)  t=%.0fs" %
                  (step, "%.4f" % tl if not math.isnan(tl) else "  n/a ",
                   vloss, rec["lr"], path, size / 1e6, time.time() - t0), flush=True)
        if step == args.steps:
            break
        lr = lr_at(step, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch(train, args.batch, args.seq_len, gen)
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        last_loss = loss.item()
        recent.append(last_loss)
        if args.log_every and (step + 1) % args.log_every == 0:
            el = time.time() - t_train
            print("  step %6d  loss %.4f  lr %.2e  %.3fs/step" %
                  (step + 1, last_loss, lr, el / (step + 1)), flush=True)
    run["total_s"] = round(time.time() - t0, 1)
    write_json_atomic(run, os.path.join(args.out, "run.json"))
    print("done: %d steps, %d saves, %.1fs total" %
          (args.steps, len(run["saves"]), time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
