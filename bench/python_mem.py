"""Peak memory and time of lmc.save / lmc.load, and of lmc.Store add and
restore, on a generated bf16 state dict.

    /usr/bin/python3 bench/python_mem.py save [N] [PATH]   # N tensors of 1024 x 1024 (default 200: 419 MB)
    /usr/bin/python3 bench/python_mem.py load [N] [PATH]   # run after save, in a new process
    /usr/bin/python3 bench/python_mem.py store-add [N] [DIR] [SEED]   # adds the next step to the store DIR
    /usr/bin/python3 bench/python_mem.py store-restore [N] [DIR]      # restores its last step
      (SEED > 0: the state dict of SEED 0 with a small update: a delta)

Each call is its own process so that ru_maxrss is that operation's peak; the
line printed gives the peak before the operation too (torch itself, and for
save the state dict). PATH defaults to /dev/shm/lmc_python_mem.lmc.
"""
import os
import resource
import sys
import time

sys.path.insert(0, os.environ.get("PYDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")))
import torch  # noqa: E402
import lmc    # noqa: E402


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "save"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    path = sys.argv[3] if len(sys.argv) > 3 else (
        "/dev/shm/lmc_python_mem.store" if what.startswith("store") else "/dev/shm/lmc_python_mem.lmc")
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    torch.manual_seed(0)
    sd = {}
    if what in ("save", "store-add"):
        sd = {"layer%d.weight" % i: torch.randn(1024, 1024).to(torch.bfloat16) for i in range(n)}
        if seed:
            g = torch.Generator().manual_seed(seed)
            for t in sd.values():
                t.copy_((t.float() + 1e-3 * torch.randn(t.shape, generator=g)).to(torch.bfloat16))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.time()
    if what == "save":
        lmc.save(sd, path)
        size = sum(t.numel() * t.element_size() for t in sd.values())
    elif what == "load":
        out = lmc.load(path)
        size = sum(t.numel() * t.element_size() for t in out.values())
    elif what == "store-add":
        with lmc.Store(path) as st:
            st.add(sd)
        size = sum(t.numel() * t.element_size() for t in sd.values())
    elif what == "store-restore":
        with lmc.Store(path, create=False) as st:
            out = st.restore(st.last_step)
        size = sum(t.numel() * t.element_size() for t in out.values())
    else:
        sys.exit("usage: python_mem.py save|load|store-add|store-restore [N] [PATH] [SEED]")
    dt = time.time() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("%s: %.0f MB state dict, %.2f s, peak RSS %.0f MiB (before: %.0f MiB, +%.0f)"
          % (what, size / 1e6, dt, peak / 1024, before / 1024, (peak - before) / 1024))


if __name__ == "__main__":
    main()
