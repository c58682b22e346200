"""Regenerates the torch.save fixtures of tests/test_torchzip.c (torch 1.13, Debian's python3-torch):
    cd tests/data/torch && /usr/bin/python3 gen.py
Each NAME.pt gets a sidecar NAME.json listing its storages as torch and Python's own zipfile see them:
key, lmc dtype name, absolute data offset and size. The oracle unpickles data.pkl with a
persistent_load that only records the storage ids (trusted, self-made files)."""
import io, json, pickle, zipfile
import torch

DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
      torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
      torch.uint8: "u8", torch.bool: "bool"}


def sidecar(path):
    z = zipfile.ZipFile(path)
    pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
    prefix = pkl[: -len("data.pkl")]
    types = {}

    class U(pickle.Unpickler):
        def persistent_load(self, pid):
            assert pid[0] == "storage"
            types[pid[2]] = DT[pid[1].dtype]
            return pid[1](pid[4])  # an uninitialised storage of the right type and size

    U(io.BytesIO(z.read(pkl))).load()
    out = []
    raw = open(path, "rb").read()
    for i in z.infolist():
        if not i.filename.startswith(prefix + "data/"):
            continue
        key = i.filename[len(prefix) + 5:]
        h = i.header_offset
        nl = int.from_bytes(raw[h + 26:h + 28], "little")
        xl = int.from_bytes(raw[h + 28:h + 30], "little")
        out.append({"key": key, "dtype": types[key], "offset": h + 30 + nl + xl, "nbytes": i.file_size})
    out.sort(key=lambda s: s["offset"])
    with open(path[:-3] + ".json", "w") as f:
        json.dump({"storages": out}, f, indent=1)


def save(obj, name):
    torch.save(obj, name + ".pt")
    sidecar(name + ".pt")


torch.manual_seed(0)
save(torch.randn(64, 32).bfloat16(), "bf16")
save(torch.randn(32, 32), "f32")
save(torch.randn(64, 32).half(), "f16")
save(torch.arange(512) * 7 - 1000, "i64")
w = torch.randn(32, 32)
save({"w": w, "w_view": w[4:8], "b": torch.randn(300).bfloat16(), "mask": torch.rand(100) > 0.5,
      "idx": torch.arange(64, dtype=torch.int32), "d": torch.randn(16, dtype=torch.float64)}, "shared")

# a tiny model trained a few steps: model + Adam state_dict, consecutive steps
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 32), torch.randn(64, 32)
for step in range(1, 4):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    if step >= 2:
        save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, "step%d" % step)
# no storages at all; and the pre-1.6 (non-zip) format
save({"lr": 0.1, "names": ["a", "b"]}, "nostorage")
torch.save(torch.randn(16), "legacy.pt", _use_new_zipfile_serialization=False)

# hand-made data.pkl files in pickle protocols 2, 4 and 5 (FRAME, MEMOIZE, STACK_GLOBAL,
# SHORT_BINUNICODE, ...): storage '0' BFloat16Storage, '1' UntypedStorage (no dtype),
# '2' UntypedStorage with a torch.float32 argument, then assorted non-storage values.
import collections


class P(pickle.Pickler):
    def persistent_id(self, o):
        if isinstance(o, tuple) and len(o) == 2 and o[0] == "S":
            if o[1] == "0":
                return ("storage", torch.BFloat16Storage, "0", "cpu", 32)
            if o[1] == "1":
                return ("storage", torch.UntypedStorage, "1", "cpu", 32)
            return ("storage", torch.UntypedStorage, "2", "cpu", 8, torch.float32)
        return None


for proto in (2, 4, 5):
    b = io.BytesIO()
    P(b, protocol=proto).dump(collections.OrderedDict(
        w=("S", "0"), v=("S", "1"), u=("S", "2"), z=[1.5, 2 ** 40, -3, True, None, b"xy", {1, 2}, ("S", "0")]))
    open("proto%d.pkl" % proto, "wb").write(b.getvalue())

# row lengths (the last dimension of contiguous tensors of 2+ dimensions, per
# storage): "w" and its 16x64 view disagree (no row), "t" is a transposed view
# (not row-major: no row), "c" is 3-D (row 40), "v" is 1-D (no row)
w = torch.randn(32, 32)
save({"w": w, "w2": w.view(16, 64), "t": torch.randn(8, 24).t(), "c": torch.randn(3, 5, 40),
      "v": torch.randn(50)}, "views")
