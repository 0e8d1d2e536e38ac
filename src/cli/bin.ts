#!/usr/bin/env node
/**
 * The `toolhost` executable: runs the command line of ./main.ts with the process's arguments. Kept apart from
 * main.ts so that importing the program (tests drive `main(argv)` in-process) does not run it.
 */
import { main } from "./main.js";

await main();
