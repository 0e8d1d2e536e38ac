/**
 * Notifications that the tool list someone sees may have changed: a user's settings changed (that user), or the
 * registry itself changed (imported tools came, went or changed: everyone). The MCP server turns them into
 * `notifications/tools/list_changed`; listeners refetch, so a spurious event costs one list, never correctness.
 */

/**
 * Where a change was made: `"local"` in this process, `"remote"` on another instance sharing the database (relayed
 * by its signal). A relay to other instances passes on only local changes, so a relayed change never echoes back.
 */
export type ToolListChangeOrigin = "local" | "remote";

/** Receives the user whose tools changed (null when the change concerns every user) and where it was made. */
export type ToolListChangeListener = (userId: string | null, origin: ToolListChangeOrigin) => void;

/** A small in-process event hub (one per registry). */
export class ToolListChanges {
  readonly #listeners = new Set<ToolListChangeListener>();

  /** Adds a listener; returns the function that removes it. */
  subscribe(listener: ToolListChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Tells every listener; a listener that throws does not stop the others. */
  emit(userId: string | null, origin: ToolListChangeOrigin = "local"): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(userId, origin);
      } catch {
        // A broken listener must not break a settings update.
      }
    }
  }
}
