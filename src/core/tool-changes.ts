/**
 * Notifications that the tool list someone sees may have changed: a user's settings changed (that user), or the
 * registry itself changed (imported tools came, went or changed: everyone). The MCP server turns them into
 * `notifications/tools/list_changed`; listeners refetch, so a spurious event costs one list, never correctness.
 */

/** Receives the user whose tools changed, or null when the change concerns every user. */
export type ToolListChangeListener = (userId: string | null) => void;

/** A small in-process event hub (one per registry). */
export class ToolListChanges {
  readonly #listeners = new Set<ToolListChangeListener>();

  /** Adds a listener; returns the function that removes it. */
  subscribe(listener: ToolListChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Tells every listener; a listener that throws does not stop the others. */
  emit(userId: string | null): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(userId);
      } catch {
        // A broken listener must not break a settings update.
      }
    }
  }
}
