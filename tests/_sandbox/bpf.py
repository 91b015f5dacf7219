"""A classic-BPF interpreter for seccomp programs, so tests can ask a filter what it decides.

It runs the exported program over one ``struct seccomp_data`` exactly as
the kernel's seccomp BPF does (net/core/filter.c, the classic subset
seccomp accepts: loads from the data and scratch memory, ALU and jumps
with K or X, returns), without installing anything.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_ALLOW = 0x7FFF0000

_MASK32 = 0xFFFF_FFFF
# instruction classes and fields (include/uapi/linux/bpf_common.h)
_LD, _LDX, _ST, _STX, _ALU, _JMP, _RET, _MISC = range(8)
_W, _ABS, _IMM, _MEM, _LEN = 0x00, 0x20, 0x00, 0x60, 0x80
_X = 0x08
_JA, _JEQ, _JGT, _JGE, _JSET = 0x00, 0x10, 0x20, 0x30, 0x40
_ALU_OPS = {
    0x00: lambda a, b: a + b,
    0x10: lambda a, b: a - b,
    0x20: lambda a, b: a * b,
    0x30: lambda a, b: a // b,
    0x40: lambda a, b: a | b,
    0x50: lambda a, b: a & b,
    0x60: lambda a, b: a << b,
    0x70: lambda a, b: a >> b,
    0x90: lambda a, b: a % b,
    0xA0: lambda a, b: a ^ b,
}


def decode(program: bytes) -> list[tuple[int, int, int, int]]:
    """``struct sock_filter`` entries: (code, jt, jf, k)."""
    return list(struct.iter_unpack("<HBBI", program))


def run(program: bytes, *, nr: int, arch: int, args: Sequence[int] = ()) -> int:
    """The filter's return value for one system call (``nr`` may have the x32 bit)."""
    values = [*(a & 0xFFFF_FFFF_FFFF_FFFF for a in args), *[0] * (6 - len(args))]
    data = struct.pack("<IIQ6Q", nr & _MASK32, arch, 0, *values)
    insns = decode(program)
    a = x = 0
    memory = [0] * 16
    pc = 0
    for _ in range(len(insns) + 1):  # classic BPF only jumps forward
        code, jt, jf, k = insns[pc]
        cls = code & 0x07
        pc += 1
        if cls == _LD:
            mode = code & 0xE0
            if mode == _ABS:
                assert code & 0x18 == _W, hex(code)  # seccomp_data is read a word at a time
                assert k % 4 == 0, k
                assert k < len(data), k
                (a,) = struct.unpack_from("<I", data, k)
            elif mode == _IMM:
                a = k
            elif mode == _MEM:
                a = memory[k]
            elif mode == _LEN:
                a = len(data)
            else:
                raise AssertionError(f"unsupported load {code:#x}")
        elif cls == _LDX:
            mode = code & 0xE0
            x = {_IMM: k, _MEM: memory[k] if k < 16 else 0, _LEN: len(data)}[mode]
        elif cls == _ST:
            memory[k] = a
        elif cls == _STX:
            memory[k] = x
        elif cls == _ALU:
            operand = x if code & _X else k
            op = code & 0xF0
            a = (-a) & _MASK32 if op == 0x80 else _ALU_OPS[op](a, operand) & _MASK32
        elif cls == _JMP:
            op = code & 0xF0
            if op == _JA:
                pc += k
                continue
            operand = x if code & _X else k
            taken = {
                _JEQ: a == operand,
                _JGT: a > operand,
                _JGE: a >= operand,
                _JSET: a & operand != 0,
            }[op]
            pc += jt if taken else jf
        elif cls == _RET:
            return a if code & 0x18 == 0x10 else k
        elif cls == _MISC:
            if code & 0xF8 == 0x00:
                x = a  # TAX
            else:
                a = x  # TXA
        else:
            raise AssertionError(f"unknown class in {code:#x}")
    raise AssertionError("the program ran past its end")
