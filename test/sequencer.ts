/**
 * The order in which vitest hands test files to its workers: the files known to take the longest start first, so
 * none of them is left running alone at the end of the run (on a fresh clone vitest has no timings yet and would
 * start the largest files first, which puts the short property-test entry files last). The rest keep vitest's
 * own order (failed first, then longest first by the previous run's timings, else largest first).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Longest first: wall time in a full run on two cores, whether it is CPU (the property tests, the storms, npm) or
 * waiting on processes, servers and budgets (the e2e, MCP, shell and sandbox files). A file that waits still holds
 * its worker, so it must not be among the last ones either.
 */
const HEAVY = [
  /test\/storage\/settings-concurrency-[^/]*\.test\.ts$/,
  // Waits out the 5 s minimum time budget: early, beside the storms' second server processes, not in the tail.
  /test\/tools\/time-budget\.test\.ts$/,
  /test\/fs\/argument-fuzz-[^/]*\.test\.ts$/,
  /test\/package\/pack\.test\.ts$/,
  /test\/mcp\/server-stdio\.test\.ts$/,
  /test\/e2e\/shutdown\.test\.ts$/,
  /test\/mcp\/server-http\.test\.ts$/,
  /test\/storage\/migrations\.test\.ts$/,
  /test\/browser\/[^/]*\.test\.ts$/,
  /test\/shell\/sandbox-approval\.test\.ts$/,
  /test\/e2e\/[^/]*\.test\.ts$/,
  /test\/cli\/data-dir\.test\.ts$/,
  /test\/agents\/agents-e2e\.test\.ts$/,
  /test\/approvals\/approvals-http\.test\.ts$/,
  /test\/shell\/sandbox\.test\.ts$/,
  /test\/web\/fetch\.test\.ts$/,
  /test\/providers\/adapters\.test\.ts$/,
  /test\/image\/generate-image\.test\.ts$/,
  /test\/shell\/(runner|tools)\.test\.ts$/,
  /test\/cli\/(cli|bundle)\.test\.ts$/,
  /test\/mcp\/client-cli\.test\.ts$/,
  /test\/approvals\/approvals-cli\.test\.ts$/,
  /test\/fs\/grep\.test\.ts$/,
  /test\/api\/exports\.test\.ts$/,
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
