/**
 * Property tests of argument handling (test/fs/fuzz/property.ts) for write_file, file_write, apply_patch: 20,000 defective arguments
 * per tool (TOOLHOST_FUZZ_RUNS) all validation_failed with a short message, and executed arguments
 * (TOOLHOST_FUZZ_EXEC_RUNS) never an argument-handling execution_failed.
 */
import { describeArgumentFuzz } from "./fuzz/property.js";

describeArgumentFuzz(["write_file", "file_write", "apply_patch"]);
