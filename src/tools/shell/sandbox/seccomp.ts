/**
 * The seccomp filter of the shell sandbox, built as classic BPF bytes (an array of `struct sock_filter`) that
 * bwrap loads with `--seccomp FD` before it executes the command.
 *
 * The filter inspects `struct seccomp_data` (nr at offset 0, arch at 4, args[i] at 16 + 8·i) and returns:
 * - for a foreign architecture (e.g. 32-bit int 0x80 calls on x86-64, whose numbers differ): EPERM for every call;
 * - on x86-64, for x32-ABI numbers (bit 30 set): EPERM;
 * - ptrace, io_uring_setup, io_uring_enter, io_uring_register: EPERM (no tracing of other processes, no
 *   asynchronous I/O ring whose operations — sockets included — bypass per-call filtering);
 * - with the network off, every socket(), Unix-domain ones included: EPERM. The sandbox sees the host's filesystem,
 *   and with it every Unix socket a host service listens on (PostgreSQL's, the Docker daemon's, a session bus that
 *   starts programs outside the sandbox); a socket() of its own is what a command would connect to one with.
 *   socketpair() still works for stream and seqpacket pairs (already connected to each other, they reach nothing
 *   else); a datagram pair is refused too, since a datagram socket can send to any address;
 * - everything else: allowed.
 *
 * Only x86-64 and arm64 are supported (the architectures bwrap is commonly used on); elsewhere
 * `seccompSupported()` is false and the sandbox reports itself unavailable.
 */

/** BPF opcodes used here (linux/bpf_common.h). */
export const BPF = {
  LD_W_ABS: 0x20, // BPF_LD | BPF_W | BPF_ABS
  JEQ_K: 0x15, // BPF_JMP | BPF_JEQ | BPF_K
  JGE_K: 0x35, // BPF_JMP | BPF_JGE | BPF_K
  AND_K: 0x54, // BPF_ALU | BPF_AND | BPF_K
  RET_K: 0x06, // BPF_RET | BPF_K
} as const;

/** seccomp return actions (linux/seccomp.h). */
export const SECCOMP_RET = {
  ALLOW: 0x7fff0000,
  ERRNO: 0x00050000,
} as const;

/** errno returned for a refused call (EPERM: "Operation not permitted"). */
export const EPERM = 1;
/** Address family of Unix-domain sockets. */
export const AF_UNIX = 1;
/** Socket type of a datagram socket, and the mask of the type inside socket()'s and socketpair()'s type argument. */
export const SOCK_DGRAM = 2;
const SOCK_TYPE_MASK = 0xf;

/** Offsets inside `struct seccomp_data`. */
export const SECCOMP_DATA = { nr: 0, arch: 4, arg0Low: 16, arg1Low: 24 } as const;

/** Per-architecture facts: the AUDIT_ARCH value and the syscall numbers the filter refers to. */
export interface SeccompArch {
  name: "x64" | "arm64";
  auditArch: number;
  /** Refuse syscall numbers >= this (x32 ABI on x86-64); undefined when the architecture has no such ABI. */
  x32Bit?: number;
  syscalls: {
    socket: number;
    socketpair: number;
    ptrace: number;
    ioUringSetup: number;
    ioUringEnter: number;
    ioUringRegister: number;
  };
}

/** The architectures the filter is built for, keyed by Node's `process.arch`. */
export const SECCOMP_ARCHES: Record<string, SeccompArch> = {
  x64: {
    name: "x64",
    auditArch: 0xc000003e, // AUDIT_ARCH_X86_64
    x32Bit: 0x40000000,
    syscalls: { socket: 41, socketpair: 53, ptrace: 101, ioUringSetup: 425, ioUringEnter: 426, ioUringRegister: 427 },
  },
  arm64: {
    name: "arm64",
    auditArch: 0xc00000b7, // AUDIT_ARCH_AARCH64
    syscalls: {
      socket: 198,
      socketpair: 199,
      ptrace: 117,
      ioUringSetup: 425,
      ioUringEnter: 426,
      ioUringRegister: 427,
    },
  },
};

/** True when a filter can be built for `arch` (default: this process's architecture). */
export function seccompSupported(arch: string = process.arch): boolean {
  return arch in SECCOMP_ARCHES;
}

/** One BPF instruction; `jt`/`jf` name labels (resolved to relative offsets when assembled). */
interface Instruction {
  code: number;
  k: number;
  jt?: string;
  jf?: string;
  label?: string;
}

/** Options of buildSeccompFilter. */
export interface SeccompFilterOptions {
  /** When false (the default), socket() is refused, and socketpair() of datagram sockets. */
  network?: boolean;
  /** Architecture (Node's process.arch naming); default this process's. */
  arch?: string;
  /** Byte order of the target (default this machine's); the kernel reads the filter in native order. */
  endianness?: "LE" | "BE";
}

/**
 * Builds the filter program as the raw bytes bwrap expects on its `--seccomp` file descriptor: 8 bytes per
 * instruction (u16 code, u8 jt, u8 jf, u32 k) in native byte order.
 * Throws RangeError for an unsupported architecture.
 */
export function buildSeccompFilter(options: SeccompFilterOptions = {}): Buffer {
  const arch = SECCOMP_ARCHES[options.arch ?? process.arch];
  if (!arch) throw new RangeError(`No seccomp filter for CPU architecture "${options.arch ?? process.arch}".`);
  const s = arch.syscalls;
  const program: Instruction[] = [
    { code: BPF.LD_W_ABS, k: SECCOMP_DATA.arch },
    { code: BPF.JEQ_K, k: arch.auditArch, jf: "deny" },
    { code: BPF.LD_W_ABS, k: SECCOMP_DATA.nr },
  ];
  if (arch.x32Bit !== undefined) program.push({ code: BPF.JGE_K, k: arch.x32Bit, jt: "deny" });
  for (const nr of [s.ptrace, s.ioUringSetup, s.ioUringEnter, s.ioUringRegister]) {
    program.push({ code: BPF.JEQ_K, k: nr, jt: "deny" });
  }
  if (!options.network) {
    program.push(
      { code: BPF.JEQ_K, k: s.socket, jt: "deny" },
      { code: BPF.JEQ_K, k: s.socketpair, jf: "allow" },
      // socketpair(family, type, …): args[1] is an int, so its low 32 bits are the whole value; SOCK_NONBLOCK and
      // SOCK_CLOEXEC ride above the type mask.
      { code: BPF.LD_W_ABS, k: SECCOMP_DATA.arg1Low + (endiannessOf(options) === "LE" ? 0 : 4) },
      { code: BPF.AND_K, k: SOCK_TYPE_MASK },
      { code: BPF.JEQ_K, k: SOCK_DGRAM, jt: "deny" },
    );
  }
  program.push(
    { code: BPF.RET_K, k: SECCOMP_RET.ALLOW, label: "allow" },
    { code: BPF.RET_K, k: SECCOMP_RET.ERRNO | EPERM, label: "deny" },
  );
  return assemble(program, endiannessOf(options));
}

function endiannessOf(options: SeccompFilterOptions): "LE" | "BE" {
  return options.endianness ?? (new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? "LE" : "BE");
}

function assemble(program: Instruction[], endianness: "LE" | "BE"): Buffer {
  const labels = new Map<string, number>();
  program.forEach((ins, i) => {
    if (ins.label) labels.set(ins.label, i);
  });
  const out = Buffer.alloc(program.length * 8);
  program.forEach((ins, i) => {
    const offset = (label: string | undefined): number => {
      if (label === undefined) return 0;
      const target = labels.get(label);
      if (target === undefined || target <= i || target - i - 1 > 255) throw new Error(`bad BPF jump to ${label}`);
      return target - i - 1;
    };
    const at = i * 8;
    if (endianness === "LE") out.writeUInt16LE(ins.code, at);
    else out.writeUInt16BE(ins.code, at);
    out.writeUInt8(offset(ins.jt), at + 2);
    out.writeUInt8(offset(ins.jf), at + 3);
    if (endianness === "LE") out.writeUInt32LE(ins.k >>> 0, at + 4);
    else out.writeUInt32BE(ins.k >>> 0, at + 4);
  });
  return out;
}
