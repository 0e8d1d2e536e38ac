/** Settings writes under concurrency on SQLite (see settings-concurrency.ts). */
import { describeSettingsWrites } from "./settings-concurrency.js";

describeSettingsWrites("sqlite");
