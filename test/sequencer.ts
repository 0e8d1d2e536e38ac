/**
 * The order in which vitest hands test files to its workers: the files known to take the longest start first, so
 * none of them is left running alone at the end of the run (on a fresh clone vitest has no timings yet and would
 * start the largest files first, which puts the short property-test entry files last). The rest keep vitest's
 * own order (failed first, then longest first by the previous run's timings, else largest first).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Longest first: wall time in a full run on two cores (quiet machine, `TOOLHOST_TEST_CPU_LOG`), whether it is CPU
 * (the property tests, the storms, npm) or waiting on processes and servers (Chromium, the e2e, MCP, shell and
 * sandbox files). A file that waits still holds its worker, so it must not be among the last ones either. Every file
 * here took over a second; re-measure when a file's cost changes much.
 */
const HEAVY = [
  /test\/browser\/[^/]*\.test\.ts$/,
  /test\/storage\/settings-concurrency-[^/]*\.test\.ts$/,
  /test\/package\/pack\.test\.ts$/,
  /test\/fs\/argument-fuzz-[^/]*\.test\.ts$/,
  /test\/mcp\/server-stdio\.test\.ts$/,
  /test\/fs\/grep\.test\.ts$/,
  /test\/shell\/runner\.test\.ts$/,
  /test\/fs\/argument-edges\.test\.ts$/,
  /test\/approvals\/approvals-http\.test\.ts$/,
  /test\/approvals\/(outlive|meaning)\.test\.ts$/,
  /test\/e2e\/[^/]*\.test\.ts$/,
  /test\/data\/sql-tools\.test\.ts$/,
  /test\/data\/sql-surfaces\.test\.ts$/,
  /test\/web\/fetch\.test\.ts$/,
  /test\/mcp\/server-http\.test\.ts$/,
  /test\/storage\/migrations\.test\.ts$/,
  /test\/shell\/sandbox-approval\.test\.ts$/,
  /test\/shell\/sandbox\.test\.ts$/,
  /test\/mcp\/client-cli\.test\.ts$/,
  /test\/agents\/agents-e2e\.test\.ts$/,
  /test\/server\/bounded-input\.test\.ts$/,
  /test\/mcp\/client\.test\.ts$/,
  /test\/tools\/time-budget\.test\.ts$/,
  /test\/adapters\/[^/]*\.test\.ts$/,
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
