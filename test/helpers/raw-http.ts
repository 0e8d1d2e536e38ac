/**
 * A minimal HTTP/1.1 client for tests that send thousands of requests (the settings storms): requests are written
 * as bytes on plain TCP sockets and the answer's status line, headers and body are read back. It speaks the same
 * HTTP/1.1 as any client on the wire (keep-alive connections, one request in flight per connection, no pipelining)
 * at a fraction of a general client's CPU, so that a test's CPU goes to the server it tests.
 *
 * What it understands of an answer: the status line, `Content-Length` or `Transfer-Encoding: chunked` bodies and
 * `Connection: close` (the connection is then not reused). Anything else it cannot frame (an answer without a
 * length that is not chunked) fails the request with `BAD_RESPONSE` rather than guessing.
 */
import { connect, type Socket } from "node:net";

/** One answer: status code, headers (names lowercased; a repeated header keeps its last value) and body text. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A request that got no answer: `code` says why (ECONNRESET, ECONNREFUSED, CLOSED, BAD_RESPONSE, …). */
export class RawHttpError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Pending {
  head: Buffer;
  resolve(response: RawResponse): void;
  reject(error: Error): void;
}

/** One keep-alive connection; parses one answer at a time. */
class Connection {
  readonly socket: Socket;
  #buffer: Buffer = Buffer.alloc(0);
  #current: Pending | undefined;
  #head: { status: number; headers: Record<string, string>; length: number | "chunked"; close: boolean } | undefined;
  #chunks: Buffer[] = [];
  closed = false;

  constructor(
    host: string,
    port: number,
    private readonly idle: (connection: Connection) => void,
  ) {
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on("data", (data: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? data : Buffer.concat([this.#buffer, data]);
      this.#parse();
    });
    const fail = (code: string, message: string) => {
      this.closed = true;
      const current = this.#current;
      this.#current = undefined;
      current?.reject(new RawHttpError(code, message));
    };
    this.socket.on("error", (error: NodeJS.ErrnoException) => fail(error.code ?? "ERROR", error.message));
    this.socket.on("close", () => fail("CLOSED", "the server closed the connection before answering"));
  }

  /** Sends one request on this (idle) connection. */
  send(pending: Pending): void {
    this.#current = pending;
    this.socket.write(pending.head);
  }

  #parse(): void {
    for (;;) {
      const current = this.#current;
      if (!current) return;
      if (!this.#head) {
        const end = this.#buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const lines = this.#buffer.subarray(0, end).toString("latin1").split("\r\n");
        this.#buffer = this.#buffer.subarray(end + 4);
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(":");
          if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const chunked = /\bchunked\b/i.test(headers["transfer-encoding"] ?? "");
        const length = chunked
          ? "chunked"
          : headers["content-length"] === undefined
            ? NaN
            : Number(headers["content-length"]);
        if (!status || (length !== "chunked" && !Number.isSafeInteger(length))) {
          this.#current = undefined;
          this.closed = true;
          this.socket.destroy();
          current.reject(new RawHttpError("BAD_RESPONSE", `cannot frame the answer: ${JSON.stringify(lines[0])}`));
          return;
        }
        this.#head = {
          status: Number(status[1]),
          headers,
          length,
          close: /\bclose\b/i.test(headers.connection ?? "") || lines[0]!.startsWith("HTTP/1.0"),
        };
      }
      const head = this.#head;
      let body: Buffer | undefined;
      if (head.length === "chunked") {
        // Chunks: `<hex size>[;ext]\r\n<data>\r\n`, ending with a zero-size chunk and an empty trailer line.
        for (;;) {
          const eol = this.#buffer.indexOf("\r\n");
          if (eol < 0) return;
          const size = Number.parseInt(this.#buffer.subarray(0, eol).toString("latin1"), 16);
          if (size === 0) {
            const end = this.#buffer.indexOf("\r\n\r\n", eol);
            if (end < 0) return;
            this.#buffer = this.#buffer.subarray(end + 4);
            body = Buffer.concat(this.#chunks);
            this.#chunks = [];
            break;
          }
          if (this.#buffer.length < eol + 2 + size + 2) return;
          this.#chunks.push(this.#buffer.subarray(eol + 2, eol + 2 + size));
          this.#buffer = this.#buffer.subarray(eol + 2 + size + 2);
        }
      } else {
        if (this.#buffer.length < head.length) return;
        body = this.#buffer.subarray(0, head.length);
        this.#buffer = this.#buffer.subarray(head.length);
      }
      this.#head = undefined;
      this.#current = undefined;
      if (head.close) {
        this.closed = true;
        this.socket.end();
      }
      current.resolve({ status: head.status, headers: head.headers, body: body.toString("utf8") });
      if (!this.closed) this.idle(this);
    }
  }
}

/**
 * A pool of at most `connections` keep-alive connections to one origin (`http://host:port`); requests beyond that
 * wait in order for a free connection. Close it with {@link RawHttpPool.close}.
 */
export class RawHttpPool {
  readonly #host: string;
  readonly #port: number;
  readonly #idle: Connection[] = [];
  readonly #all = new Set<Connection>();
  readonly #queue: Pending[] = [];

  constructor(
    origin: string,
    private readonly connections = 64,
  ) {
    const url = new URL(origin);
    if (url.protocol !== "http:") throw new Error(`RawHttpPool speaks plain http only, not ${url.protocol}`);
    this.#host = url.hostname;
    this.#port = Number(url.port || 80);
  }

  /**
   * Sends `method path` with the headers (Host, Content-Length and keep-alive are added) and body; resolves with
   * the answer, rejects with a {@link RawHttpError} when the connection failed before a whole answer arrived.
   */
  request(method: string, path: string, headers: Record<string, string> = {}, body = ""): Promise<RawResponse> {
    const payload = Buffer.from(body, "utf8");
    let head = `${method} ${path} HTTP/1.1\r\nhost: ${this.#host}:${this.#port}\r\n`;
    for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
    if (payload.length > 0 || method !== "GET") head += `content-length: ${payload.length}\r\n`;
    const bytes = Buffer.concat([Buffer.from(`${head}\r\n`, "latin1"), payload]);
    return new Promise((resolve, reject) => {
      this.#queue.push({ head: bytes, resolve, reject });
      this.#dispatch();
    });
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      let connection = this.#idle.pop();
      while (connection?.closed) connection = this.#idle.pop();
      if (!connection) {
        for (const c of this.#all) if (c.closed) this.#all.delete(c);
        if (this.#all.size >= this.connections) return;
        connection = new Connection(this.#host, this.#port, (c) => {
          this.#idle.push(c);
          this.#dispatch();
        });
        this.#all.add(connection);
      }
      const pending = this.#queue.shift()!;
      const settle = () => {
        // A connection that failed or closed frees its place in the pool for the requests still waiting.
        if (connection!.closed) queueMicrotask(() => this.#dispatch());
      };
      connection.send({
        head: pending.head,
        resolve: (r) => {
          pending.resolve(r);
          settle();
        },
        reject: (e) => {
          pending.reject(e);
          settle();
        },
      });
    }
  }

  /** Closes every connection (requests in flight fail with CLOSED). */
  async close(): Promise<void> {
    const closing = [...this.#all].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.socket.destroyed) return resolve();
          c.socket.once("close", () => resolve());
          c.socket.end();
        }),
    );
    this.#all.clear();
    this.#idle.length = 0;
    await Promise.all(closing);
  }
}
