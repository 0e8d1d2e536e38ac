/** Commander option parsers shared by the commands (kept apart from ./util.ts, which loads without commander). */
import { InvalidArgumentError } from "commander";
import { USER_ID_RULE } from "../app/admin.js";
import { isUserId } from "./util.js";

/** Commander argument parser for `--user`: throws InvalidArgumentError (exit 2) for a malformed user id. */
export function parseUserId(value: string): string {
  if (!isUserId(value)) throw new InvalidArgumentError(USER_ID_RULE);
  return value;
}
