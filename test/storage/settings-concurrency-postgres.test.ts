/** Settings writes under concurrency on PostgreSQL (see settings-concurrency.ts). */
import { describeSettingsWrites } from "./settings-concurrency.js";

describeSettingsWrites("postgres");
