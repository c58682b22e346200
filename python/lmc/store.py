"""Snapshot stores: a directory of checkpoint snapshots kept as lmc keyframes
and XOR-delta chains (the lmc_store_* API of liblmc; doc/store.md).

    with lmc.Store("ckpt.store") as st:          # created if absent
        st.add(model.state_dict(), step)          # name "model.safetensors"
        st.add("optim.safetensors", step)         # a file: name = its basename
        sd = st.restore(step)                     # dict of tensors (torch)
        st.restore_file(step, "out.safetensors", name="optim.safetensors")
        st.ls(); st.verify(); st.rm(step); st.prune(keep_last=3)

Each name is its own chain. A snapshot is a delta against the previous
snapshot of the same name, or a keyframe every `keyframe_every` snapshots,
so a restore decodes at most keyframe_every frames. A crash at any moment
(even SIGKILL during add) leaves a store that verifies and restores every
snapshot it held before; reopening cleans up what the crash left.
"""

import ctypes
import os
import tempfile
import threading
from collections.abc import Mapping

from . import _lib, _codec
from ._lib import lib, LmcError

DEFAULT_NAME = "model.safetensors"


def _enc(s):
    return None if s is None else os.fsencode(s)


def _dec(b):
    return None if b is None else os.fsdecode(b)


class Store(object):
    """A handle on the snapshot store in directory `path`.

    create:  make an empty store if `path` holds none (default True).
    threads: worker threads for coding; None or 0 (default): every core this
             process may run on. Frames are identical for every value.
    cache:   keep the latest content of each chain (faster add; default True).
    fsync:   fsync frames, manifest and directories (default True; False only
             for tests and scratch stores).
    One handle is used by one thread at a time (this class serialises its own
    calls); processes changing the same store are serialised by DIR/lock.
    """

    def __init__(self, path, create=True, threads=None, cache=True, fsync=True):
        if not _lib.HAS_STORE:
            raise RuntimeError("lmc: %s has no snapshot store API (lmc_store_*); "
                               "rebuild it with `make`" % _lib.path)
        self.path = os.fspath(path)
        self._h = None
        self._lock = threading.RLock()
        bpath = _enc(self.path)
        if create and not os.path.exists(os.path.join(self.path, "manifest.json")):
            r = lib.lmc_store_init(bpath)
            if lib.lmc_is_error(r) and lib.lmc_get_error(r) != _lib.LMC_ERR_EXISTS:
                _lib.check(r, self.path)
        h = ctypes.c_void_p()
        r = lib.lmc_store_open(ctypes.byref(h), bpath)
        _lib.check(r, self.path)
        self._h = h
        try:
            self._set(_lib.LMC_STORE_P_THREADS, _codec.resolve_threads(threads))
            self._set(_lib.LMC_STORE_P_CACHE, 1 if cache else 0)
            self._set(_lib.LMC_STORE_P_FSYNC, 1 if fsync else 0)
        except BaseException:
            self.close()
            raise

    # -- plumbing --------------------------------------------------------

    def _handle(self):
        if self._h is None:
            raise ValueError("lmc.Store: the store is closed")
        return self._h

    def _check(self, r, what=None):
        if lib.lmc_is_error(r):
            msg = _lib._s(lib.lmc_store_last_error(self._h)) if self._h is not None else ""
            detail = "; ".join(x for x in (what, msg) if x) or self.path
            raise LmcError(lib.lmc_get_error(r), _lib._s(lib.lmc_error_name(r)), detail)
        return r

    def _set(self, p, v):
        self._check(lib.lmc_store_set_param(self._handle(), p, int(v)), "set_param")

    def close(self):
        with self._lock:
            if self._h is not None:
                lib.lmc_store_close(self._h)
                self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "lmc.Store(%r%s)" % (self.path, "" if self._h is not None else ", closed")

    # -- adding ----------------------------------------------------------

    def add(self, data, step=None, name=None, keyframe_every=0, metadata=None):
        """Adds a snapshot as `step` (None: the last step + 1, or 0) and returns
        its entry (a dict, as ls() gives).

        data: a state dict (stored as its safetensors serialization, name
              default "model.safetensors"), the path of a file (name default:
              its basename), or bytes-like (name required).
        keyframe_every: K, the longest chain a restore decodes (0: the
              library default, 1: keyframes only).
        step must be greater than every step already held for `name`."""
        st = -1 if step is None else int(step)
        k = int(keyframe_every)
        with self._lock:
            h = self._handle()
            if isinstance(data, (str, os.PathLike)):
                r = lib.lmc_store_add_file(h, _enc(data), st, k, _enc(name))
                self._check(r, "add %s" % os.fspath(data))
                nm = name if name is not None else os.path.basename(os.fspath(data))
            else:
                r = None
                if isinstance(data, Mapping):
                    from . import torch_io
                    nm = DEFAULT_NAME if name is None else name
                    r = self._add_state_dict(h, data, metadata, st, k, nm)
                    if r is None:
                        data = torch_io.serialize(data, metadata)
                elif name is None:
                    raise ValueError("Store.add: name is required for bytes")
                else:
                    nm = name
                if r is None:
                    with _codec.as_buf(data) as b:
                        r = lib.lmc_store_add_buffer(h, b.addr, b.size, st, k, _enc(nm))
                self._check(r, "add %s" % nm)
            if st < 0:
                st = lib.lmc_store_last_step(h)
            return self.entry(st, nm)

    def _add_state_dict(self, h, state_dict, metadata, st, k, nm):
        """Adds a state dict through an unnamed temporary file in the store's
        directory, written straight from the tensors' memory, so that no
        serialized copy of the checkpoint is held in memory (the store maps
        the file and drops its pages behind the coder). The lmc_store_add_file
        result, or None where the file cannot be named by /proc/self/fd (the
        caller then serializes in memory)."""
        from . import torch_io
        with tempfile.TemporaryFile(dir=self.path, prefix=".add-") as f:
            alias = "/proc/self/fd/%d" % f.fileno()
            if not os.path.exists(alias):
                return None
            torch_io.write_safetensors_fd(state_dict, f.fileno(), metadata)
            return lib.lmc_store_add_file(h, _enc(alias), st, k, _enc(nm))

    # -- reading ---------------------------------------------------------

    def _restore(self, step, name, want_frames=False):
        """(bytearray content, frames decoded) of snapshot (step, name)."""
        with self._lock:
            h = self._handle()
            bname = _enc(name)
            what = "restore step %s%s" % (step, "" if name is None else " " + str(name))
            n = self._check(lib.lmc_store_restore_buffer(h, int(step), bname, None, 0, None), what)
            out = bytearray(n)
            k = ctypes.c_uint(0)
            if n:
                arr = (ctypes.c_char * n).from_buffer(out)
                try:
                    got = self._check(lib.lmc_store_restore_buffer(
                        h, int(step), bname, ctypes.addressof(arr), n, ctypes.byref(k)), what)
                finally:
                    del arr
            else:
                got = self._check(lib.lmc_store_restore_buffer(
                    h, int(step), bname, _codec._addr_of_bytes(_codec._EMPTY), 0, ctypes.byref(k)), what)
            if got != n:
                raise LmcError(22, None, what)
            return out, k.value

    def restore_bytes(self, step, name=None):
        """The content of snapshot (step, name) as bytes (name None: the only
        file of that step). Every hash on the chain is checked."""
        return bytes(self._restore(step, name)[0])

    def restore(self, step, name=None):
        """Snapshot (step, name) as a dict of tensors (it must be safetensors).
        The content goes to an unnamed temporary file in the store's directory
        and each tensor is read from it into its own memory: no copy of the
        whole checkpoint is held beside the tensors."""
        from . import torch_io
        if not _lib.HAS_STORE_RESTORE_FD:
            return torch_io.deserialize(self._restore(step, name)[0])
        with self._lock:
            h = self._handle()
            what = "restore step %s%s" % (step, "" if name is None else " " + str(name))
            with tempfile.TemporaryFile(dir=self.path, prefix=".restore-") as f:
                self._check(lib.lmc_store_restore_fd(h, int(step), _enc(name), f.fileno(), None), what)
                f.seek(0)
                return torch_io.read_safetensors_file(f)

    def restore_file(self, step, out_path, name=None):
        """Writes snapshot (step, name) to out_path (atomically, after every hash
        has been checked). Returns out_path."""
        with self._lock:
            self._check(lib.lmc_store_restore_file(self._handle(), int(step), _enc(name),
                                                   _enc(out_path), None),
                        "restore step %s" % step)
        return out_path

    def frames_to_restore(self, step, name=None):
        """How many frames restoring (step, name) decodes (it restores it): 0 for
        the latest snapshot of its name when the cache holds it."""
        return self._restore(step, name)[1]

    @property
    def last_step(self):
        """The last step held, or None if the store is empty."""
        with self._lock:
            v = lib.lmc_store_last_step(self._handle())
        return None if v < 0 else v

    def ls(self):
        """Every snapshot, ordered by (step, name), as dicts: step, name, frame
        (path relative to the store), parent_step (None for a keyframe),
        keyframe, chain_depth, content_size, content_hash, frame_size, ratio."""
        with self._lock:
            h = self._handle()
            out = []
            e = _lib.lmc_store_entry()
            for i in range(lib.lmc_store_count(h)):
                self._check(lib.lmc_store_get(h, i, ctypes.byref(e)), "get")
                out.append({
                    "step": e.step,
                    "name": _dec(e.name),
                    "frame": _dec(e.frame),
                    "parent_step": None if e.parent_step < 0 else e.parent_step,
                    "keyframe": bool(e.keyframe),
                    "chain_depth": e.chain_depth,
                    "content_size": e.content_size,
                    "content_hash": e.content_hash,
                    "frame_size": e.frame_size,
                    "ratio": e.ratio,
                })
            return out

    def __len__(self):
        with self._lock:
            return lib.lmc_store_count(self._handle())

    def steps(self):
        return sorted({e["step"] for e in self.ls()})

    def entry(self, step, name=None):
        for e in self.ls():
            if e["step"] == step and (name is None or e["name"] == name):
                return e
        raise KeyError((step, name))

    # -- maintenance -----------------------------------------------------

    def verify(self):
        """Decodes every frame and checks every hash, chain link and size.
        Returns True, or raises LmcError naming the first bad snapshot."""
        with self._lock:
            self._check(lib.lmc_store_verify(self._handle()), "verify")
        return True

    def rm(self, step):
        """Removes every file of `step`; the snapshot that referenced one is
        re-encoded first. Returns the number of snapshots removed."""
        with self._lock:
            return self._check(lib.lmc_store_rm(self._handle(), int(step)), "rm step %s" % step)

    def prune(self, keep_last):
        """Keeps the last `keep_last` steps. Returns the number of snapshots removed."""
        with self._lock:
            return self._check(lib.lmc_store_prune(self._handle(), int(keep_last)), "prune")
