/**
 * Statements compiled once: for the hottest writes (a settings PUT, its audit line), building a Kysely query and
 * compiling it to SQL cost as much CPU as running it. {@link runCompiledOnce} builds and compiles a statement the
 * first time it runs on a dialect, keeps its SQL text, and afterwards runs that text with the new parameters
 * (`CompiledQuery.raw`), skipping the builder and the compiler. The SQL stays Kysely's (quoting and placeholders of
 * the dialect); only statements whose text does not depend on their values qualify (fixed columns, no `IN` lists
 * of varying length).
 */
import { type Compilable, CompiledQuery, type Kysely, type QueryResult } from "kysely";
import { dialectOf } from "./transaction.js";

const texts = new Map<string, string>();

/**
 * Runs the statement `key` on `db` (a Kysely instance or a transaction's) with `parameters`, which must be exactly
 * the parameters `build()` compiles to, in the same order. The first run on each dialect builds and compiles it and
 * checks that: a mismatch throws Error naming the key (a programming error, caught by the first test that runs the
 * statement). Resolves with the driver's result, as `execute()` of the built query would.
 *
 * @param key a name unique to the statement's shape (its text must be the same for every call with this key)
 */
export async function runCompiledOnce<R>(
  db: Kysely<any>,
  key: string,
  parameters: readonly unknown[],
  build: () => Compilable<R>,
): Promise<QueryResult<R>> {
  const cacheKey = `${dialectOf(db)}:${key}`;
  let text = texts.get(cacheKey);
  if (text === undefined) {
    const compiled = build().compile();
    if (
      compiled.parameters.length !== parameters.length ||
      compiled.parameters.some((value, i) => value !== parameters[i])
    ) {
      throw new Error(
        `The compiled-once statement "${key}" was given parameters that differ from its query's: ${JSON.stringify(parameters)} vs ${JSON.stringify(compiled.parameters)}.`,
      );
    }
    text = compiled.sql;
    texts.set(cacheKey, text);
  }
  return db.executeQuery(CompiledQuery.raw(text, [...parameters]) as CompiledQuery<R>);
}
