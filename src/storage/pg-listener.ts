/**
 * LISTEN on a dedicated PostgreSQL connection (a `pg.Client` of its own, never one of the pool's: a pooled
 * connection is returned and reused, and its LISTEN would go with it). When the connection drops (a database
 * restart, a network cut) the listener reports itself down, reconnects with a growing delay (250 ms up to 5 s)
 * and LISTENs again; its owner polls meanwhile.
 */

/** A running listener. */
export interface ChannelListener {
  /** Whether the LISTEN connection is up now. */
  readonly up: boolean;
  /** Stops listening and closes the connection. */
  stop(): Promise<void>;
}

/** What a listener reports: each notification's payload, and its connection going up or down. */
export interface ChannelListenerHandlers {
  onNotify(payload: string): void;
  onState(up: boolean): void;
  onError?(error: unknown): void;
}

/**
 * Starts listening on `channel` (a plain identifier: letters, digits, `_`) of the database at `url`. Never throws:
 * a failed first connect is reported down and retried.
 */
export function listenPostgres(url: string, channel: string, handlers: ChannelListenerHandlers): ChannelListener {
  if (!/^[a-z_][a-z0-9_]*$/i.test(channel)) throw new Error(`Invalid channel name "${channel}".`);
  let stopped = false;
  let up = false;
  let client: import("pg").Client | undefined;
  let delay = 250;
  let timer: NodeJS.Timeout | undefined;
  const setUp = (value: boolean) => {
    if (up === value) return;
    up = value;
    handlers.onState(value);
  };
  const connect = async () => {
    if (stopped) return;
    const { default: pg } = await import("pg");
    const c = new pg.Client({ connectionString: url, keepAlive: true });
    client = c;
    const lost = (error?: unknown) => {
      if (client !== c) return;
      client = undefined;
      if (error) handlers.onError?.(error);
      c.removeAllListeners("notification");
      c.end().catch(() => {});
      setUp(false);
      if (!stopped) {
        timer = setTimeout(() => void connect(), delay);
        timer.unref?.();
        delay = Math.min(5_000, delay * 2);
      }
    };
    c.on("error", (error) => lost(error));
    c.on("end", () => lost());
    c.on("notification", (message) => {
      if (message.channel === channel && message.payload !== undefined) handlers.onNotify(message.payload);
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${channel}`);
      if (stopped || client !== c) {
        await c.end().catch(() => {});
        return;
      }
      delay = 250;
      setUp(true);
    } catch (error) {
      lost(error);
    }
  };
  void connect();
  return {
    get up() {
      return up;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      const c = client;
      client = undefined;
      up = false;
      await c?.end().catch(() => {});
    },
  };
}
