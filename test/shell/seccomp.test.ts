/**
 * The seccomp filter bytes, decoded and run through a small classic-BPF interpreter (the subset the kernel accepts
 * for seccomp: absolute word loads, jumps on constants, returns), against synthetic `struct seccomp_data`.
 */
import { describe, expect, it } from "vitest";
import {
  AF_UNIX,
  BPF,
  buildSeccompFilter,
  EPERM,
  SECCOMP_ARCHES,
  SECCOMP_RET,
  SOCK_DGRAM,
  seccompSupported,
} from "../../src/tools/shell/sandbox/seccomp.js";

interface Insn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

function decode(bytes: Buffer, endianness: "LE" | "BE" = "LE"): Insn[] {
  expect(bytes.length % 8).toBe(0);
  const out: Insn[] = [];
  for (let at = 0; at < bytes.length; at += 8) {
    out.push({
      code: endianness === "LE" ? bytes.readUInt16LE(at) : bytes.readUInt16BE(at),
      jt: bytes.readUInt8(at + 2),
      jf: bytes.readUInt8(at + 3),
      k: endianness === "LE" ? bytes.readUInt32LE(at + 4) : bytes.readUInt32BE(at + 4),
    });
  }
  return out;
}

/** struct seccomp_data: nr (s32), arch (u32), instruction_pointer (u64), args[6] (u64). */
function seccompData(arch: number, nr: number, args: number[] = [], endianness: "LE" | "BE" = "LE"): Buffer {
  const data = Buffer.alloc(64);
  const w32 = (v: number, at: number) =>
    endianness === "LE" ? data.writeUInt32LE(v >>> 0, at) : data.writeUInt32BE(v >>> 0, at);
  w32(nr, 0);
  w32(arch, 4);
  args.forEach((value, i) => {
    const at = 16 + 8 * i;
    if (endianness === "LE") w32(value, at);
    else w32(value, at + 4);
  });
  return data;
}

/** Runs a program; throws on anything a seccomp filter may not do (bad opcode, jump out of range, no return). */
function run(program: Insn[], data: Buffer, endianness: "LE" | "BE" = "LE"): number {
  let acc = 0;
  let pc = 0;
  for (let steps = 0; steps < 10_000; steps++) {
    const ins = program[pc];
    if (!ins) throw new Error(`fell off the program at ${pc}`);
    switch (ins.code) {
      case BPF.LD_W_ABS:
        if (ins.k % 4 !== 0 || ins.k + 4 > data.length) throw new Error(`bad load offset ${ins.k}`);
        acc = endianness === "LE" ? data.readUInt32LE(ins.k) : data.readUInt32BE(ins.k);
        pc++;
        break;
      case BPF.JEQ_K:
        pc += 1 + (acc === ins.k ? ins.jt : ins.jf);
        break;
      case BPF.JGE_K:
        pc += 1 + (acc >= ins.k ? ins.jt : ins.jf);
        break;
      case BPF.AND_K:
        acc = (acc & ins.k) >>> 0;
        pc++;
        break;
      case BPF.RET_K:
        return ins.k;
      default:
        throw new Error(`opcode 0x${ins.code.toString(16)} not understood`);
    }
    if (pc >= program.length) throw new Error("jump past the end");
  }
  throw new Error("no return");
}

const ALLOW = SECCOMP_RET.ALLOW;
const DENY = (SECCOMP_RET.ERRNO | EPERM) >>> 0;
const AF_INET = 2;
const AF_INET6 = 10;
const AF_NETLINK = 16;
const AUDIT_ARCH_I386 = 0x40000003;

describe("seccomp filter bytes", () => {
  for (const archName of ["x64", "arm64"] as const) {
    const arch = SECCOMP_ARCHES[archName]!;
    const s = arch.syscalls;
    const READ = archName === "x64" ? 0 : 63;
    const CONNECT = archName === "x64" ? 42 : 203;

    it(`${archName}, network off: refuses socket() of any family, datagram pairs, ptrace and io_uring; allows the rest`, () => {
      const program = decode(buildSeccompFilter({ arch: archName, network: false, endianness: "LE" }));
      const verdict = (nr: number, args: number[] = []) => run(program, seccompData(arch.auditArch, nr, args));
      expect(verdict(s.socket, [AF_INET, 1, 0])).toBe(DENY);
      expect(verdict(s.socket, [AF_INET6, 1, 0])).toBe(DENY);
      expect(verdict(s.socket, [AF_NETLINK, 3, 0])).toBe(DENY);
      // A Unix socket of its own would connect to any host service's socket the read-only root shows.
      expect(verdict(s.socket, [AF_UNIX, 1, 0])).toBe(DENY);
      expect(verdict(s.socketpair, [AF_UNIX, 1, 0])).toBe(ALLOW);
      expect(verdict(s.socketpair, [AF_UNIX, 5 | 0o2000000, 0])).toBe(ALLOW); // seqpacket, SOCK_CLOEXEC
      expect(verdict(s.socketpair, [AF_UNIX, SOCK_DGRAM, 0])).toBe(DENY);
      expect(verdict(s.socketpair, [AF_UNIX, SOCK_DGRAM | 0o4000, 0])).toBe(DENY); // SOCK_NONBLOCK
      expect(verdict(s.ptrace, [16, 1])).toBe(DENY);
      expect(verdict(s.ioUringSetup, [8, 0])).toBe(DENY);
      expect(verdict(s.ioUringEnter)).toBe(DENY);
      expect(verdict(s.ioUringRegister)).toBe(DENY);
      expect(verdict(READ, [0, 0, 10])).toBe(ALLOW);
      expect(verdict(CONNECT, [3, 0, 16])).toBe(ALLOW); // connect() on an existing (Unix) socket
      // A foreign architecture (32-bit calls, whose numbers mean other things) is refused outright.
      expect(run(program, seccompData(AUDIT_ARCH_I386, 102, [1]))).toBe(DENY);
      if (arch.x32Bit !== undefined) expect(verdict(arch.x32Bit | s.socket, [AF_INET])).toBe(DENY);
    });

    it(`${archName}, network on: inet sockets allowed, ptrace and io_uring still refused`, () => {
      const program = decode(buildSeccompFilter({ arch: archName, network: true, endianness: "LE" }));
      const verdict = (nr: number, args: number[] = []) => run(program, seccompData(arch.auditArch, nr, args));
      expect(verdict(s.socket, [AF_INET, 1, 0])).toBe(ALLOW);
      expect(verdict(s.socket, [AF_UNIX, 1, 0])).toBe(ALLOW);
      expect(verdict(s.socketpair, [AF_UNIX, SOCK_DGRAM, 0])).toBe(ALLOW);
      expect(verdict(s.ptrace)).toBe(DENY);
      expect(verdict(s.ioUringSetup)).toBe(DENY);
    });
  }

  it("big-endian targets read the low word of args[1] at offset 28", () => {
    const arch = SECCOMP_ARCHES.arm64!;
    const program = decode(buildSeccompFilter({ arch: "arm64", endianness: "BE" }), "BE");
    const verdict = (nr: number, args: number[]) => run(program, seccompData(arch.auditArch, nr, args, "BE"), "BE");
    expect(verdict(arch.syscalls.socket, [AF_INET])).toBe(DENY);
    expect(verdict(arch.syscalls.socketpair, [AF_UNIX, SOCK_DGRAM])).toBe(DENY);
    expect(verdict(arch.syscalls.socketpair, [AF_UNIX, 1])).toBe(ALLOW);
  });

  it("every jump lands inside the program and the program ends in returns", () => {
    for (const network of [false, true]) {
      const program = decode(buildSeccompFilter({ arch: "x64", network, endianness: "LE" }));
      program.forEach((ins, i) => {
        if (ins.code === BPF.JEQ_K || ins.code === BPF.JGE_K) {
          expect(i + 1 + ins.jt).toBeLessThan(program.length);
          expect(i + 1 + ins.jf).toBeLessThan(program.length);
        }
      });
      expect(program.at(-1)?.code).toBe(BPF.RET_K);
    }
  });

  it("supports this machine's architecture or says it does not", () => {
    expect(seccompSupported("x64")).toBe(true);
    expect(seccompSupported("mips")).toBe(false);
    expect(() => buildSeccompFilter({ arch: "mips" })).toThrow(/architecture/);
  });
});
