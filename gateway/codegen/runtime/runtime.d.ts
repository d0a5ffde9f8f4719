// --- the connection (see hero-client.js) -------------------------------------------------

import type { HeroClientError } from "./errors.js";

export type ConnectionStatus = "connecting" | "open" | "reconnecting" | "closed" | "failed";

export interface ClientOptions {
  /** API key; sent with auth.login on every (re)connect. */
  key?: string;
  /** Default per-call timeout in milliseconds (null: none). Default 30000. */
  timeoutMs?: number | null;
  /** How long connect() waits, in milliseconds. Default 10000. */
  connectTimeoutMs?: number;
  /** Reconnect after a drop. Default true. */
  reconnect?: boolean;
  /** First and largest reconnect delay in milliseconds. Default [50, 5000]. */
  backoffMs?: [number, number];
  /** A WebSocket constructor (e.g. the `ws` package's on Node 20); default globalThis.WebSocket. */
  WebSocket?: unknown;
  /** Told when the connection opens, drops, reconnects, closes or fails. */
  onStatus?: (status: ConnectionStatus, detail?: unknown) => void;
}

export interface CallOptions {
  /** This call's timeout in milliseconds (null: none). */
  timeoutMs?: number | null;
}

export interface SubscribeOptions<E> extends CallOptions {
  /** Called for each event (instead of, or besides, iterating the stream). */
  onEvent?: (event: E) => void;
  /** Called once when the stream ends (null: closed by you). */
  onEnd?: (error: HeroClientError | null) => void;
}

/** A random id usable as a job_id (idempotency key). */
export declare function randomId(): string;

export declare class Connection {
  constructor(url?: string, options?: ClientOptions);
  readonly url: string;
  timeoutMs: number | null;
  connectTimeoutMs: number;
  reconnect: boolean;
  /** Sockets opened after the first one. */
  readonly reconnects: number;
  readonly status: ConnectionStatus;
  readonly connected: boolean;
  connect(): Promise<void>;
  close(): Promise<void>;
  /** Call any method by name. */
  call(method: string, params?: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
}

/** A live stream of events, kept across reconnects. */
export declare class EventStream<E> implements AsyncIterableIterator<E> {
  readonly serverId: string | null;
  /** Id of the last event delivered: pass it as `since` to carry on later. */
  readonly lastId: string | null;
  next(): Promise<IteratorResult<E>>;
  return(): Promise<IteratorResult<E>>;
  [Symbol.asyncIterator](): AsyncIterableIterator<E>;
  /** Unsubscribe. */
  close(): Promise<void>;
}
