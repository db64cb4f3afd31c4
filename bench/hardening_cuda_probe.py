# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Does CUDA work under the seccomp filters the spec_server unit could set? (docs/hardening.md)

Runs the same GPU workload in child processes under different seccomp filters, installed here
with a hand-written BPF program (what systemd installs for the same settings, approximated):

  none        no filter (control)
  deny_list   spec_server_syscall_deny: @clock @cpu-emulation @debug @module @mount @obsolete
              @raw-io @reboot @swap answered with EPERM (representative calls of each group)
  mdwe        MemoryDenyWriteExecute=yes as systemd <= 255 does it with seccomp: mmap with
              PROT_WRITE|PROT_EXEC, and mprotect/pkey_mprotect adding PROT_EXEC, fail with EPERM

Workload: CUDA init + bf16 matmul through PyTorch, a Triton JIT kernel, torch.compile (Inductor),
a ctypes callback (libffi closure), CUDA graph capture and replay, a numba @njit function (vLLM's
n-gram proposer is numba-compiled), and a spawned child process doing CUDA (as vLLM's workers).
Prints one JSON line per filter. Usage on a GPU machine: python3 bench/hardening_cuda_probe.py
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import os
import platform
import sys
import traceback

# x86_64 syscall numbers of the calls the filters refuse.
DENY_LIST = {
    # @clock
    "adjtimex": 159,
    "clock_adjtime": 305,
    "clock_settime": 227,
    "settimeofday": 164,
    # @cpu-emulation
    "modify_ldt": 154,
    # @debug
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "perf_event_open": 298,
    "lookup_dcookie": 212,
    # @module
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    # @mount
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "fsopen": 430,
    "move_mount": 429,
    # @obsolete
    "uselib": 134,
    "create_module": 174,
    "get_kernel_syms": 177,
    "query_module": 178,
    "sysfs": 139,
    # @raw-io
    "ioperm": 173,
    "iopl": 172,
    # @reboot
    "reboot": 169,
    "kexec_load": 246,
    "kexec_file_load": 320,
    # @swap
    "swapon": 167,
    "swapoff": 168,
}
NR_MMAP, NR_MPROTECT, NR_PKEY_MPROTECT = 9, 10, 329
PROT_WRITE, PROT_EXEC = 0x2, 0x4
EPERM = 1

# BPF
LD_W_ABS, JEQ_K, JSET_K, RET_K, AND_K = 0x20, 0x15, 0x45, 0x06, 0x54
LD_W_ABS_ = 0x20
ALU_AND_K = 0x54
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
AUDIT_ARCH_X86_64 = 0xC000003E
OFF_NR, OFF_ARCH, OFF_ARG2_LO = 0, 4, 16 + 2 * 8  # struct seccomp_data


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def _stmt(code, k):
    return (code, 0, 0, k)


def _jump(code, k, jt, jf):
    return (code, jt, jf, k)


def program(kind):
    deny = SECCOMP_RET_ERRNO | EPERM
    prog = [_stmt(LD_W_ABS, OFF_ARCH), _jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), _stmt(RET_K, SECCOMP_RET_ALLOW), _stmt(LD_W_ABS, OFF_NR)]
    if kind == "deny_list":
        for nr in DENY_LIST.values():
            prog += [_jump(JEQ_K, nr, 0, 1), _stmt(RET_K, deny)]
    elif kind == "mdwe":
        # mmap: refuse when prot has both WRITE and EXEC
        prog += [
            _jump(JEQ_K, NR_MMAP, 0, 5),
            _stmt(LD_W_ABS, OFF_ARG2_LO),
            _stmt(ALU_AND_K, PROT_WRITE | PROT_EXEC),
            _jump(JEQ_K, PROT_WRITE | PROT_EXEC, 0, 1),
            _stmt(RET_K, deny),
            _stmt(RET_K, SECCOMP_RET_ALLOW),
        ]
        # mprotect / pkey_mprotect: refuse any PROT_EXEC
        for nr in (NR_MPROTECT, NR_PKEY_MPROTECT):
            prog += [_jump(JEQ_K, nr, 0, 4), _stmt(LD_W_ABS, OFF_ARG2_LO), _jump(JSET_K, PROT_EXEC, 0, 1), _stmt(RET_K, deny), _stmt(RET_K, SECCOMP_RET_ALLOW)]
    prog.append(_stmt(RET_K, SECCOMP_RET_ALLOW))
    return prog


def install(kind):
    if kind == "none":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    insns = program(kind)
    arr = (SockFilter * len(insns))(*[SockFilter(*i) for i in insns])
    fprog = SockFprog(len(insns), arr)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, as NoNewPrivileges=yes
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def _spawned_cuda(q):
    import torch

    x = torch.ones(1024, device="cuda")
    q.put(float(x.sum().item()))


def workload():
    steps = {}

    def step(name, fn):
        try:
            steps[name] = {"ok": True, "value": fn()}
        except Exception as e:  # report, keep going
            steps[name] = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:300]), "where": traceback.format_exc().splitlines()[-3:]}

    import torch

    def matmul():
        a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
        return float((a @ a).float().abs().mean().item())

    def triton_kernel():
        import triton
        import triton.language as tl

        @triton.jit
        def add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) + 1.0, mask=m)

        x = torch.arange(4096, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        add[(4,)](x, y, 4096, BLOCK=1024)
        return float(y.sum().item())

    def compiled():
        f = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + t.sin())
        return float(f(torch.randn(4096, device="cuda")).sum().item())

    def ctypes_callback():
        cb_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
        cb = cb_type(lambda v: v * 3)
        return cb(14)

    def cuda_graph():
        x = torch.randn(1024, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y = x * 2  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2 + 1
        g.replay()
        torch.cuda.synchronize()
        return float(y.sum().item() - (x * 2 + 1).sum().item())

    def numba_njit():
        # vLLM's n-gram proposer (vllm/v1/spec_decode/ngram_proposer.py) compiles its matcher with numba.
        import numba
        import numpy as np

        @numba.njit
        def count_matches(a, b):
            n = 0
            for i in range(a.shape[0]):
                if a[i] == b[i]:
                    n += 1
            return n

        return int(count_matches(np.arange(100), np.arange(100)))

    def spawned_child():
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=_spawned_cuda, args=(q,))
        p.start()
        value = q.get(timeout=120)
        p.join(60)
        return value

    step("cuda_matmul", matmul)
    step("triton_jit", triton_kernel)
    step("torch_compile", compiled)
    step("ctypes_callback", ctypes_callback)
    step("cuda_graph", cuda_graph)
    step("numba_njit", numba_njit)
    step("spawned_cuda_child", spawned_child)
    return steps


def run(kind, conn):
    try:
        install(kind)
        conn.send({"filter": kind, "installed": True, "steps": workload()})
    except Exception as e:
        conn.send({"filter": kind, "installed": False, "error": "%s: %s" % (type(e).__name__, e)})


def main():
    print(json.dumps({"kernel": platform.release(), "python": sys.version.split()[0]}), flush=True)
    for kind in ("none", "deny_list", "mdwe"):
        parent, child = mp.get_context("fork").Pipe()
        p = mp.get_context("fork").Process(target=run, args=(kind, child))
        p.start()
        p.join(480)
        result = parent.recv() if parent.poll(1) else {"filter": kind, "error": "no result, exit %s" % p.exitcode}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/inductor-probe")
    sys.exit(main())
