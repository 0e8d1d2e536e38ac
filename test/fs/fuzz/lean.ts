/**
 * Lean generators for the fuzz tests: a generator is a plain function of a random source ({@link Rand}), composed
 * by the few combinators below, and {@link arbitrary} turns one into a fast-check Arbitrary. fast-check's own
 * combinators cost a Value, a shrink context and a clone check per layer (≈10 µs for one argument object of
 * arbitraries.ts); these draw the same families in a small fraction of that, which is what lets tens of thousands of
 * arguments per file tool stay in the normal suite.
 *
 * The random source of one generated value is a small PRNG (sfc32) seeded from fast-check's own source when the
 * value is generated: fast-check's seed (and replay path) still decides every value, while each of the dozens of
 * draws an argument takes costs a few nanoseconds instead of a uniform-distribution call of pure-rand.
 *
 * Shrinking is generic (see {@link shrinkValue}): a failing value is cut down by dropping keys and items, halving
 * strings and numbers, JSON text through its decoded value — so a failure still reports a small counterexample,
 * with the seed to replay it.
 */
import fc from "fast-check";

/** A source of random integers (what a generator draws from). */
export interface Rand {
  /** An integer in [min, max] (both within ±2^32, max − min < 2^32). */
  nextInt(min: number, max: number): number;
}

/**
 * sfc32 (Chris Doty-Humphrey's Small Fast Counting generator, 128-bit state): a 32-bit output per step. An integer
 * in a range is taken by scaling the output (the bias, under 2^-32 relative, is nothing to a fuzzer).
 */
export class FastRandom implements Rand {
  // Plain fields (not #private: a transform to an older target turns those into WeakMap lookups).
  a: number;
  b: number;
  c: number;
  d: number;
  constructor(a: number, b: number, c: number, d: number) {
    this.a = a | 0;
    this.b = b | 0;
    this.c = c | 0;
    this.d = d | 0;
    // Mix the seed in, as the generator's authors recommend.
    for (let i = 0; i < 12; i++) this.next();
  }
  /** The next 32-bit output, unsigned. */
  next(): number {
    const { a, b, c, d } = this;
    const t = (((a + b) | 0) + d) | 0;
    this.d = (d + 1) | 0;
    this.a = b ^ (b >>> 9);
    this.b = (c + (c << 3)) | 0;
    this.c = (((c << 21) | (c >>> 11)) + t) | 0;
    return t >>> 0;
  }
  nextInt(min: number, max: number): number {
    return min + Math.floor((this.next() * (max - min + 1)) / 4294967296);
  }
}

/** A fresh {@link FastRandom} seeded from fast-check's random source (four 32-bit draws). */
export function fastRandomFrom(mrng: fc.Random): FastRandom {
  const draw = () => mrng.nextInt(-0x80000000, 0x7fffffff);
  return new FastRandom(draw(), draw(), draw(), draw());
}

/** Draws one value from a random source. */
export type Gen<T> = (r: Rand) => T;

/** An integer in [min, max], uniform. */
export const int =
  (min: number, max: number): Gen<number> =>
  (r) =>
    r.nextInt(min, max);

/** One of `values`, uniform. */
export function pick<T>(...values: readonly T[]): Gen<T> {
  const last = values.length - 1;
  return (r) => values[r.nextInt(0, last)] as T;
}

/** One of the generators, uniform. */
export function oneof<T>(...gens: readonly Gen<T>[]): Gen<T> {
  const last = gens.length - 1;
  return (r) => (gens[r.nextInt(0, last)] as Gen<T>)(r);
}

/** One of the generators, by weight. */
export function weighted<T>(...choices: readonly (readonly [number, Gen<T>])[]): Gen<T> {
  const weights = choices.map(([w]) => w);
  const gens = choices.map(([, gen]) => gen);
  const total = weights.reduce((sum, w) => sum + w, 0);
  return (r) => {
    let x = r.nextInt(0, total - 1);
    for (let i = 0; i < gens.length; i++) {
      const w = weights[i] as number;
      if (x < w) return (gens[i] as Gen<T>)(r);
      x -= w;
    }
    throw new Error("unreachable");
  };
}

/** A string of 0 to `maxLength` units. */
export const str =
  (unit: Gen<string>, maxLength: number): Gen<string> =>
  (r) => {
    let out = "";
    for (let n = r.nextInt(0, maxLength); n > 0; n--) out += unit(r);
    return out;
  };

/** An array of `min` to `max` items. */
export const arrayOf =
  <T>(item: Gen<T>, min: number, max: number): Gen<T[]> =>
  (r) => {
    const out: T[] = [];
    for (let n = r.nextInt(min, max); n > 0; n--) out.push(item(r));
    return out;
  };

/** A value of `gen` that passes `keep` (drawn again until one does). */
export const filter =
  <T>(gen: Gen<T>, keep: (value: T) => boolean): Gen<T> =>
  (r) => {
    for (;;) {
      const value = gen(r);
      if (keep(value)) return value;
    }
  };

/** A boolean. */
export const bool: Gen<boolean> = (r) => r.nextInt(0, 1) === 1;

/** Any 32-bit signed integer (fc.integer()'s range). */
export const anyInt: Gen<number> = (r) => r.nextInt(-0x80000000, 0x7fffffff);

/** A non-negative 31-bit integer (fc.nat()'s range). */
export const nat: Gen<number> = (r) => r.nextInt(0, 0x7fffffff);

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
/** Any finite double: small integers and fractions mostly, sometimes any bit pattern (huge, tiny, -0). */
export const finiteDouble: Gen<number> = weighted(
  [2, (r) => r.nextInt(-1000, 1000) + r.nextInt(0, 999) / 1000],
  [1, pick(0, -0, 0.5, -1.5, Number.MIN_VALUE, Number.MAX_VALUE, -Number.MAX_VALUE, 2 ** 53 + 2)],
  [
    1,
    (r) => {
      for (;;) {
        u32[0] = r.nextInt(0, 0xffffffff);
        u32[1] = r.nextInt(0, 0xffffffff);
        const value = f64[0] as number;
        if (Number.isFinite(value)) return value;
      }
    },
  ],
);

/** An object whose optional keys are each present half of the time. */
export function record(required: Record<string, Gen<unknown>>, optional: Record<string, Gen<unknown>> = {}) {
  const requiredKeys = Object.keys(required);
  const requiredGens = Object.values(required);
  const optionalKeys = Object.keys(optional);
  const optionalGens = Object.values(optional);
  return (r: Rand): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < requiredKeys.length; i++) out[requiredKeys[i] as string] = (requiredGens[i] as Gen<unknown>)(r);
    for (let i = 0; i < optionalKeys.length; i++) {
      if (r.nextInt(0, 1) === 1) out[optionalKeys[i] as string] = (optionalGens[i] as Gen<unknown>)(r);
    }
    return out;
  };
}

/** A fast-check Arbitrary drawing from `gen`, shrunk by {@link shrinkValue}. */
export function arbitrary<T>(gen: Gen<T>): fc.Arbitrary<T> {
  return new LeanArbitrary(gen);
}

class LeanArbitrary<T> extends fc.Arbitrary<T> {
  constructor(readonly gen: Gen<T>) {
    super();
  }
  generate(mrng: fc.Random): fc.Value<T> {
    return new fc.Value(this.gen(fastRandomFrom(mrng)), undefined);
  }
  canShrinkWithoutContext(_value: unknown): _value is T {
    return true;
  }
  shrink(value: T): fc.Stream<fc.Value<T>> {
    return new fc.Stream(shrinkValue(value)).map((v) => new fc.Value(v as T, undefined));
  }
}

/** Sets `key` as an own property (a "__proto__" key stays an ordinary one). */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Smaller variants of a value, simplest first: an object or array without one of its keys or items, or with one
 * of them shrunk; a string's halves and the string less its first or last character (JSON text: its decoded value
 * shrunk, as text again); a number halved toward 0.
 */
export function* shrinkValue(value: unknown): Generator<unknown> {
  if (typeof value === "string") {
    if (value.length > 1 && (value[0] === "{" || value[0] === "[")) {
      let decoded: unknown;
      try {
        decoded = JSON.parse(value);
      } catch {
        decoded = undefined;
      }
      if (decoded !== undefined && typeof decoded === "object" && decoded !== null) {
        for (const smaller of shrinkValue(decoded)) yield JSON.stringify(smaller);
        return;
      }
    }
    if (value.length > 1) {
      const half = value.length >> 1;
      yield value.slice(0, half);
      yield value.slice(half);
      yield value.slice(1);
      yield value.slice(0, -1);
    }
    return;
  }
  if (typeof value === "number") {
    if (value !== 0 && Number.isFinite(value)) {
      yield 0;
      const half = Math.trunc(value / 2);
      if (half !== 0 && half !== value) yield half;
    }
    return;
  }
  if (Array.isArray(value)) {
    if (value.length > 2) {
      yield value.slice(0, value.length >> 1);
      yield value.slice(value.length >> 1);
    }
    for (let i = 0; i < value.length; i++) yield [...value.slice(0, i), ...value.slice(i + 1)];
    for (let i = 0; i < value.length; i++) {
      for (const smaller of shrinkValue(value[i])) {
        const copy = [...value];
        copy[i] = smaller;
        yield copy;
      }
    }
    return;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    for (let i = 0; i < entries.length; i++) {
      const out: Record<string, unknown> = {};
      for (let j = 0; j < entries.length; j++) if (j !== i) setOwn(out, ...(entries[j] as [string, unknown]));
      yield out;
    }
    for (let i = 0; i < entries.length; i++) {
      for (const smaller of shrinkValue((entries[i] as [string, unknown])[1])) {
        const out: Record<string, unknown> = {};
        for (let j = 0; j < entries.length; j++) {
          const [key, v] = entries[j] as [string, unknown];
          setOwn(out, key, j === i ? smaller : v);
        }
        yield out;
      }
    }
  }
}
