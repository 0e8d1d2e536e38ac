/**
 * The order in which vitest hands test files to its workers: the files known to take the longest start first, so
 * none of them is left running alone at the end of the run (on a fresh clone vitest has no timings yet and would
 * start the largest files first, which puts the short property-test entry files last). The rest keep vitest's
 * own order (failed first, then longest first by the previous run's timings, else largest first).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** Longest first (wall time in a full run on two cores). */
const HEAVY = [
  /test\/storage\/settings-concurrency-[^/]*\.test\.ts$/,
  /test\/fs\/argument-fuzz-[^/]*\.test\.ts$/,
  /test\/package\/pack\.test\.ts$/,
  /test\/storage\/migrations\.test\.ts$/,
  /test\/cli\/cli\.test\.ts$/,
  /test\/mcp\/client-cli\.test\.ts$/,
  /test\/e2e\/[^/]*\.test\.ts$/,
  /test\/browser\/[^/]*\.test\.ts$/,
  /test\/fs\/grep\.test\.ts$/,
];

export class HeavyFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const index = HEAVY.findIndex((pattern) => pattern.test(spec.moduleId.replaceAll("\\", "/")));
      return index < 0 ? HEAVY.length : index;
    };
    return sorted
      .map((spec, position) => ({ spec, position, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.position - b.position)
      .map(({ spec }) => spec);
  }
}
