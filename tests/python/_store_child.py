"""Child process for the killed-add test: adds snapshots to a store forever,
printing each step once its add returned. Usage: _store_child.py DIR FIRST_STEP"""

import random
import sys

SIZE = 3 << 20
NAME = "blob.bin"
KEYFRAME_EVERY = 4


def content(step):
    """Deterministic checkpoint-like bytes for `step`: a fixed base with a
    few thousand bytes changed per step (so snapshots are real deltas)."""
    b = bytearray(random.Random(0).randbytes(SIZE))
    r = random.Random(step)
    for _ in range(2000):
        b[r.randrange(SIZE)] = r.randrange(256)
    return bytes(b)


def main():
    import lmc
    d, k = sys.argv[1], int(sys.argv[2])
    st = lmc.Store(d)
    while True:
        data = content(k)
        st.add(data, k, name=NAME, keyframe_every=KEYFRAME_EVERY)
        print(k, flush=True)
        k += 1


if __name__ == "__main__":
    main()
