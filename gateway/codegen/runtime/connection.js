// ---------------------------------------------------------------------------------------
// The connection under HeroClient (hand-written; copied from
// gateway/codegen/runtime/connection.js). It keeps one WebSocket alive:
// - answers are matched to calls by id; a call waits for its answer, its timeout,
//   or the loss of the socket it went out on (ConnectionLost);
// - when the socket drops it reconnects with exponential backoff and jitter, logs in
//   again (auth.login: browsers cannot set an Authorization header) and resumes every
//   open subscription with `since` = the last event id it delivered, so no event is
//   lost and none is delivered twice; calls made meanwhile wait instead of failing;
// - a key the server refuses (-32004) is fatal: no reconnect can fix it.
// ---------------------------------------------------------------------------------------

import {
  CallTimeout,
  ConnectionLost,
  HeroClientError,
  RpcError,
  SubscriptionLost,
  errorFor,
} from "./errors.js";
import { EventStream } from "./stream.js";

/** @internal JSON-RPC code of a refused key (the contract's Unauthenticated). */
export const UNAUTHENTICATED = -32004;
/** Extra milliseconds a call that makes the server wait (`wait`) gets over that wait. */
const WAIT_GRACE_MS = 10000;

/**
 * Connection status, as told to `onStatus`.
 * @typedef {"connecting" | "open" | "reconnecting" | "closed" | "failed"} ConnectionStatus
 */

/**
 * @typedef {object} ClientOptions
 * @property {string} [key] API key; sent with auth.login on every (re)connect.
 * @property {number | null} [timeoutMs] Default per-call timeout (null: none). Default 30000.
 * @property {number} [connectTimeoutMs] How long connect() waits. Default 10000.
 * @property {boolean} [reconnect] Reconnect after a drop. Default true.
 * @property {[number, number]} [backoffMs] First and largest reconnect delay. Default [50, 5000].
 * @property {any} [WebSocket] A WebSocket constructor (e.g. from the `ws` package on Node 20);
 *   default globalThis.WebSocket.
 * @property {(status: ConnectionStatus, detail?: unknown) => void} [onStatus] Told when the
 *   connection opens, drops, reconnects, closes or fails.
 */

/**
 * @typedef {object} CallOptions
 * @property {number | null} [timeoutMs] This call's timeout in milliseconds (null: none).
 */

/**
 * @template E
 * @typedef {object} SubscribeOptions
 * @property {number | null} [timeoutMs] Timeout of the subscribe call itself.
 * @property {(event: E) => void} [onEvent] Called for each event (instead of, or besides,
 *   iterating the stream).
 * @property {(error: HeroClientError | null) => void} [onEnd] Called once when the stream ends.
 */

/** @internal A promise that resolves after `ms` milliseconds. @param {number} ms */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A random id usable as a job_id (idempotency key); works outside secure contexts too. */
export function randomId() {
  const c = globalThis.crypto;
  const bytes = new Uint8Array(16);
  if (c && typeof c.getRandomValues === "function") {
    c.getRandomValues(bytes);
  } else {
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  }
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** @param {string | ArrayBuffer | ArrayBufferView} data */
function frameText(data) {
  if (typeof data === "string") return data;
  return new TextDecoder().decode(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
}

/** One logical connection to a hero-gateway, kept alive across socket drops. */
export class Connection {
  /**
   * @param {string} [url] The gateway's WebSocket endpoint, e.g. "ws://127.0.0.1:8080/ws".
   * @param {ClientOptions} [options]
   */
  constructor(url = "ws://127.0.0.1:8080/ws", options = {}) {
    this.url = url;
    this.timeoutMs = options.timeoutMs === undefined ? 30000 : options.timeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10000;
    this.reconnect = options.reconnect ?? true;
    /** Sockets opened after the first one. */
    this.reconnects = 0;
    /** @type {ConnectionStatus} */
    this.status = "closed";
    this._key = options.key ?? null;
    this._backoff = options.backoffMs ?? [50, 5000];
    this._WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this._onStatus = options.onStatus ?? null;
    this._nextId = 1;
    /** Calls in flight by id: how to settle each, and the socket it went out on.
     * @type {Map<number, {resolve: Function, reject: Function, ws: any, onResult: any}>} */
    this._calls = new Map();
    /** @type {Set<EventStream<any>>} */
    this._subs = new Set();
    /** @type {Map<string, EventStream<any>>} */
    this._byServerId = new Map();
    this._ws = null;
    this._ready = false;
    this._waiters = new Set();
    this._running = null;
    this._fatal = null;
    this._closed = false;
    if (typeof this._WebSocket !== "function") {
      throw new TypeError(
        "no WebSocket implementation: on Node < 22 pass { WebSocket } from the `ws` package",
      );
    }
  }

  /** Open the connection (idempotent); rejects when it cannot within connectTimeoutMs. */
  async connect() {
    if (this._closed) throw new ConnectionLost("the client is closed");
    this._start();
    await this._waitReady(this.connectTimeoutMs);
  }

  /** Close the socket, end every subscription, fail calls still waiting. */
  async close() {
    if (this._closed) return;
    this._closed = true;
    for (const sub of [...this._subs]) sub._end(null);
    const ws = this._ws;
    if (ws) {
      try {
        ws.close(1000, "client closed");
      } catch {
        // already closing
      }
    }
    this._failCalls(null, new ConnectionLost("the client was closed"));
    this._wake();
    this._setStatus("closed");
  }

  /** Whether the socket is open and authenticated. */
  get connected() {
    return this._ready;
  }

  /**
   * Call any method by name (the generated methods all end up here).
   * @param {string} method
   * @param {Record<string, unknown>} [params]
   * @param {CallOptions} [options]
   * @returns {Promise<any>}
   */
  call(method, params = {}, options = {}) {
    return this._invoke(method, params, options, null);
  }

  /**
   * @param {Record<string, unknown> | null | undefined} params
   * @param {CallOptions | null | undefined} options
   * @returns {number | null}
   */
  _timeoutFor(params, options) {
    let ms = options && options.timeoutMs !== undefined ? options.timeoutMs : this.timeoutMs;
    const wait = params ? params.wait : undefined;
    if (ms !== null && typeof wait === "number") ms = Math.max(ms, wait * 1000 + WAIT_GRACE_MS);
    return ms;
  }

  /**
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {CallOptions} options
   * @param {((result: any) => void) | null} onResult
   * @returns {Promise<any>}
   */
  async _invoke(method, params, options, onResult) {
    const ms = this._timeoutFor(params, options);
    let timedOut = false;
    /** @type {ReturnType<typeof setTimeout> | null} */
    let timer = null;
    /** @type {(() => void) | null} */
    let dropCall = null;
    const expired = new Promise((_, reject) => {
      if (ms === null) return;
      timer = setTimeout(() => {
        timedOut = true;
        if (dropCall) dropCall();
        reject(new CallTimeout(`${method}: no answer within ${ms} ms`));
      }, ms);
    });
    const attempt = (async () => {
      this._start();
      const ws = await this._waitReady(null);
      if (timedOut) throw new CallTimeout(`${method}: no answer within ${ms} ms`);
      return await this._request(ws, method, params, onResult, (drop) => (dropCall = drop));
    })();
    try {
      return await Promise.race([attempt, expired]);
    } finally {
      if (timer !== null) clearTimeout(timer);
      attempt.catch(() => {}); // lost the race: its rejection is not news
    }
  }

  _start() {
    if (this._running !== null || this._closed) return;
    this._running = this._run().catch((err) => this._fail(err));
  }

  /**
   * @param {number | null} ms
   * @returns {Promise<WebSocket>}
   */
  _waitReady(ms) {
    return new Promise((resolve, reject) => {
      /** @type {ReturnType<typeof setTimeout> | null} */
      let timer = null;
      const check = () => {
        if (this._fatal) return reject(this._fatal), true;
        if (this._closed) return reject(new ConnectionLost("the client is closed")), true;
        if (this._ready && this._ws) return resolve(this._ws), true;
        return false;
      };
      if (check()) return;
      const waiter = () => {
        if (check()) {
          this._waiters.delete(waiter);
          if (timer !== null) clearTimeout(timer);
        }
      };
      this._waiters.add(waiter);
      if (ms !== null) {
        timer = setTimeout(() => {
          this._waiters.delete(waiter);
          reject(new ConnectionLost(`could not connect to ${this.url}`));
        }, ms);
      }
    });
  }

  _wake() {
    for (const waiter of [...this._waiters]) waiter();
  }

  /**
   * @param {WebSocket} ws
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {((result: any) => void) | null} [onResult]
   * @param {((drop: () => void) => void) | null} [onCancel]
   * @returns {Promise<any>}
   */
  _request(ws, method, params, onResult = null, onCancel = null) {
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      if (ws.readyState !== 1) {
        // closing or closed: a browser would drop the frame silently
        reject(new ConnectionLost(`${method}: the connection dropped`));
        return;
      }
      this._calls.set(id, { resolve, reject, ws, onResult });
      if (onCancel) onCancel(() => this._calls.delete(id));
      try {
        ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params: params || {} }));
      } catch (err) {
        this._calls.delete(id);
        reject(new ConnectionLost(`${method}: the connection dropped`));
      }
    });
  }

  /**
   * @param {ConnectionStatus} status
   * @param {unknown} [detail]
   */
  _setStatus(status, detail) {
    this.status = status;
    if (this._onStatus) {
      try {
        this._onStatus(status, detail);
      } catch {
        // a listener's bug must not break the connection
      }
    }
  }

  async _run() {
    let delay = this._backoff[0];
    let first = true;
    while (!this._closed) {
      this._setStatus(first ? "connecting" : "reconnecting");
      let ws;
      let closed;
      try {
        [ws, closed] = await this._open();
      } catch (err) {
        if (this._closed) return;
        if (!this.reconnect && first) {
          this._fail(new ConnectionLost(`could not connect to ${this.url}`));
          return;
        }
        await sleep(delay * (0.5 + Math.random()));
        delay = Math.min(delay * 2, this._backoff[1]);
        continue;
      }
      delay = this._backoff[0];
      if (!first) this.reconnects += 1;
      first = false;
      this._ws = ws;
      try {
        await this._resume(ws);
        if (this._closed) return;
        this._ready = true;
        this._wake();
        this._setStatus("open");
        await closed;
      } catch (err) {
        if (err instanceof RpcError && err.code === UNAUTHENTICATED) {
          this._fail(err);
          try {
            ws.close(1000, "unauthenticated");
          } catch {
            // already closing
          }
          return;
        }
        // anything else while resuming: the socket is unusable, try a new one
      } finally {
        this._ready = false;
        this._ws = null;
        this._failCalls(ws, new ConnectionLost("the connection dropped before the answer"));
      }
      if (this._closed) return;
      if (!this.reconnect) {
        this._fail(new ConnectionLost("the connection dropped"));
        return;
      }
    }
  }

  /** @param {HeroClientError} error */
  _fail(error) {
    this._fatal = error;
    this._failCalls(null, error);
    for (const sub of [...this._subs]) sub._end(error);
    this._wake();
    this._setStatus("failed", error);
  }

  /**
   * A socket that opened: resolves [ws, closed], where `closed` resolves when it ends.
   * @returns {Promise<[WebSocket, Promise<unknown>]>}
   */
  _open() {
    return new Promise((resolve, reject) => {
      /** @type {WebSocket} */
      let ws;
      try {
        ws = new this._WebSocket(this.url);
      } catch (err) {
        reject(err);
        return;
      }
      let opened = false;
      /** @type {(event: unknown) => void} */
      let resolveClosed;
      const closed = new Promise((r) => (resolveClosed = r));
      const timer = setTimeout(() => {
        if (!opened) {
          try {
            ws.close();
          } catch {
            // never opened
          }
          reject(new ConnectionLost("connect timed out"));
        }
      }, this.connectTimeoutMs);
      ws.onopen = () => {
        opened = true;
        clearTimeout(timer);
        resolve([ws, closed]);
      };
      ws.onerror = () => {}; // always followed by close, which tells the rest
      ws.onclose = (event) => {
        clearTimeout(timer);
        if (ws === this._ws) this._ready = false; // no call goes out until a new socket is up
        this._failCalls(ws, new ConnectionLost("the connection dropped before the answer"));
        if (!opened) reject(new ConnectionLost(`connection refused (${event && event.code})`));
        resolveClosed(event);
      };
      ws.onmessage = (event) => this._onMessage(event.data);
    });
  }

  /** @param {WebSocket} ws */
  async _resume(ws) {
    if (this._key !== null) await this._request(ws, "auth.login", { key: this._key });
    for (const sub of [...this._subs]) {
      if (sub.serverId !== null) await sub._resubscribe(ws);
    }
  }

  /** @param {string | ArrayBuffer | ArrayBufferView} data */
  _onMessage(data) {
    let message;
    try {
      message = JSON.parse(frameText(data));
    } catch {
      return; // not JSON: nothing to route
    }
    for (const item of Array.isArray(message) ? message : [message]) {
      if (item && typeof item === "object") this._dispatch(item);
    }
  }

  /** @param {any} message A JSON-RPC answer or notification. */
  _dispatch(message) {
    if ("method" in message && !("id" in message)) {
      const params = message.params;
      if (message.method === "job.event" && params && typeof params === "object") {
        const sub = this._byServerId.get(String(params.subscription));
        if (sub && params.event && typeof params.event === "object") sub._push(params.event);
      }
      return;
    }
    const call = this._calls.get(message.id);
    if (!call) return;
    this._calls.delete(message.id);
    const error = message.error;
    if (error && typeof error === "object") {
      call.reject(errorFor(Number(error.code ?? -32603), String(error.message ?? ""), error.data));
      return;
    }
    if (call.onResult) call.onResult(message.result); // before the next frame is handled
    call.resolve(message.result);
  }

  /**
   * @param {WebSocket | null} ws
   * @param {HeroClientError} error
   */
  _failCalls(ws, error) {
    for (const [id, call] of [...this._calls]) {
      if (ws === null || call.ws === ws) {
        this._calls.delete(id);
        call.reject(error);
      }
    }
  }

  /**
   * @template E
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {SubscribeOptions<E>} options
   * @returns {Promise<EventStream<E>>}
   */
  _subscription(method, params, options = {}) {
    return new EventStream(this, method, { ...params }, options).start();
  }

  /**
   * @param {EventStream<any>} sub
   * @param {string} serverId
   */
  _bind(sub, serverId) {
    if (sub.serverId !== null) this._byServerId.delete(sub.serverId);
    sub.serverId = serverId;
    this._byServerId.set(serverId, sub);
  }

  /** @param {EventStream<any>} sub */
  _forget(sub) {
    this._subs.delete(sub);
    if (sub.serverId !== null) this._byServerId.delete(sub.serverId);
  }
}
