/**
 * The records of turn ownership: the tables the lease repository writes (chat leases, turn events, the tool-call
 * journal, signals), a lease as its owner holds it, the stored shapes of events, journal entries and signals, and
 * the errors of a busy chat and a stale owner.
 */
import { type Kysely, sql } from "kysely";
import { BrandedError, errorBrand } from "../core/errors.js";
import { dialectOf } from "./transaction.js";

/** `chat_leases` rows. */
export interface ChatLeasesTable {
  chat_id: string;
  turn_id: string | null;
  user_id: string | null;
  owner: string | null;
  epoch: number | string;
  expires_ms: number | string;
  cancel_requested: number;
  state: string | null;
}

/** `turn_events` rows. */
export interface TurnEventsTable {
  chat_id: string;
  seq: number | string;
  turn_id: string;
  type: string;
  data: string;
  created_ms: number | string;
}

/** `tool_journal` rows. */
export interface ToolJournalTable {
  turn_id: string;
  call_id: string;
  tool: string;
  epoch: number | string;
  status: string;
  result: string | null;
  started_ms: number | string;
  ended_ms: number | string | null;
}

/** `signals` rows. */
export interface SignalsTable {
  id: string;
  kind: string;
  target: string;
  created_ms: number | string;
}

/** The tables of this module (a slice of the database schema). */
export interface TurnTables {
  chat_leases: ChatLeasesTable;
  turn_events: TurnEventsTable;
  tool_journal: ToolJournalTable;
  signals: SignalsTable;
  approval_turns: { chat_id: string; status: string };
  chats: { id: string };
}

/** Another turn of the chat holds its lease (running here or elsewhere, or being taken over). */
export class LeaseBusyError extends BrandedError {
  static override readonly brand: symbol = errorBrand("LeaseBusyError");
  override readonly name = "LeaseBusyError";
  readonly code = "chat_busy";
}

/** A write of a turn whose lease moved on (taken over, handed over, or released): the write did not happen. */
export class StaleLeaseError extends BrandedError {
  static override readonly brand: symbol = errorBrand("StaleLeaseError");
  override readonly name = "StaleLeaseError";
  readonly code = "lease_lost";
}

/** A held lease as its owner knows it. */
export interface Lease {
  chatId: string;
  turnId: string;
  userId: string;
  owner: string;
  /** Fencing epoch: every write of the turn checks the stored epoch still equals this. */
  epoch: number;
  /** The next event seq (1 + the chat's last stored event). */
  nextSeq: number;
  /** The turn's takeover state (JSON), as last stored. */
  state: unknown;
}

/** A stored turn event. */
export interface StoredTurnEvent {
  seq: number;
  turnId: string;
  type: string;
  /** The JSON text of the event. */
  data: string;
}

/** A journal entry: a call that started (status `started`) or ended (`ended`, with its result JSON). */
export interface JournalEntry {
  callId: string;
  tool: string;
  status: "started" | "ended";
  result: unknown;
}

/** A signal row. */
export interface SignalRow {
  id: string;
  kind: string;
  target: string;
  createdMs: number;
}

/** The key of a journal's state row: the takeover state of a sub-agent's run (see saveJournalState). */
export const JOURNAL_STATE_ROW = "#state";

/** How far a turn taken over numbers its events past the last stored one (see claimExpired). */
export const TAKEOVER_SEQ_GAP = 1000;

/** The SQL of "now, in ms since the epoch" on the database's clock. */
export function nowSql(db: Kysely<any>) {
  return dialectOf(db) === "postgres"
    ? sql<string>`(extract(epoch from clock_timestamp()) * 1000)::bigint`
    : sql<number>`cast((julianday('now') - 2440587.5) * 86400000 as integer)`;
}
