// ---------------------------------------------------------------------------------------
// Subscriptions (hand-written; copied from gateway/codegen/runtime/stream.js): an
// EventStream outlives sockets. The connection binds it to the id the server gave it,
// pushes that id's events, and on a new socket asks it to subscribe again from the last
// event it delivered.
// ---------------------------------------------------------------------------------------

import { ConnectionLost, HeroClientError, RpcError, SubscriptionLost } from "./errors.js";
import { UNAUTHENTICATED, sleep } from "./connection.js";
/** @import { Connection, SubscribeOptions } from "./connection.js" */

/** Pause before re-sending a call whose socket dropped (the reconnect is under way). */
const RETRY_PAUSE_MS = 50;
/** A subscription that has seen no event resumes from when it was made, this much earlier. */
const RESUME_MARGIN_MS = 2000;

/**
 * An events-stream id as a comparable pair ("1700000000000-3" → [1700000000000, 3]).
 * @param {string} id
 */
function streamKey(id) {
  const [ms, seq] = String(id).split("-");
  return [Number(ms) || 0, Number(seq) || 0];
}

/**
 * Whether stream id `a` comes after `b`.
 * @param {string} a
 * @param {string} b
 */
function newerThan(a, b) {
  const [am, as] = streamKey(a);
  const [bm, bs] = streamKey(b);
  return am > bm || (am === bm && as > bs);
}

/**
 * A live stream of events, kept across reconnects. Iterate it with `for await`, or pass
 * `onEvent`. Events come once each, in stream order; `lastId` is the id of the last one
 * delivered (pass it as `since` to carry on later).
 * @template E
 */
export class EventStream {
  /**
   * @param {Connection} client
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {SubscribeOptions<E>} options
   */
  constructor(client, method, params, options = {}) {
    this._client = client;
    this._method = method;
    this._params = params;
    this._options = options;
    /** @type {E[]} */
    this._queue = [];
    /** @type {Array<{resolve: (r: IteratorResult<E>) => void, reject: (e: unknown) => void}>} */
    this._takers = [];
    this._ended = false;
    /** @type {HeroClientError | null} */
    this._endError = null;
    /** @type {number | null} */
    this._startMs = null;
    this._maxsize = 10000;
    this._iterating = false;
    /** @type {string | null} */
    this.serverId = null;
    /** @type {string | null} */
    this.lastId = typeof params.since === "string" ? params.since : null;
  }

  /** @returns {Promise<EventStream<E>>} */
  async start() {
    const client = this._client;
    client._subs.add(this);
    const ms = client._timeoutFor(this._params, this._options);
    const deadline = ms === null ? null : Date.now() + ms;
    for (;;) {
      const left = deadline === null ? null : Math.max(deadline - Date.now(), 1);
      try {
        await client._invoke(this._method, this._params, { timeoutMs: left }, (r) =>
          this._onSubscribed(r),
        );
        return this;
      } catch (err) {
        const retry = client.reconnect && !client._closed && !client._fatal;
        if (err instanceof ConnectionLost && retry) {
          await sleep(RETRY_PAUSE_MS); // the socket dropped mid-call: subscribe on the next one
          continue;
        }
        this._end(null);
        throw err;
      }
    }
  }

  /** @param {any} result The answer of the subscribe call. */
  _onSubscribed(result) {
    if (result && typeof result.subscription === "string") {
      if (this._startMs === null) this._startMs = Date.now();
      this._client._bind(this, result.subscription);
    }
  }

  /** @param {WebSocket} ws */
  async _resubscribe(ws) {
    const params = { ...this._params };
    if (this.lastId !== null) params.since = this.lastId;
    else if (this._startMs !== null)
      params.since = `${Math.max(this._startMs - RESUME_MARGIN_MS, 0)}-0`;
    try {
      await this._client._request(ws, this._method, params, (r) => this._onSubscribed(r));
    } catch (err) {
      if (err instanceof RpcError && err.code !== UNAUTHENTICATED) {
        this._end(new SubscriptionLost(`could not resume the subscription: ${err.message}`));
        return;
      }
      throw err;
    }
  }

  /** @param {E & {id?: unknown}} event */
  _push(event) {
    if (this._ended) return;
    if (typeof event.id === "string") {
      if (this.lastId !== null && !newerThan(event.id, this.lastId)) return; // seen already
      this.lastId = event.id;
    }
    if (this._options.onEvent) {
      try {
        this._options.onEvent(event);
      } catch (err) {
        console.error("hero-client: onEvent failed", err);
      }
    }
    const taker = this._takers.shift();
    if (taker) {
      taker.resolve({ value: event, done: false });
    } else if (this._queue.length >= this._maxsize) {
      this._end(new SubscriptionLost("events were not read fast enough"));
    } else if (!this._options.onEvent || this._iterating) {
      this._queue.push(event);
    }
  }

  /** @param {HeroClientError | null} error */
  _end(error) {
    if (this._ended) return;
    this._ended = true;
    this._endError = error;
    this._client._forget(this);
    for (const taker of this._takers.splice(0)) {
      if (error) taker.reject(error);
      else taker.resolve({ value: undefined, done: true });
    }
    if (this._options.onEnd) {
      try {
        this._options.onEnd(error);
      } catch (err) {
        console.error("hero-client: onEnd failed", err);
      }
    }
  }

  /** The next event (async iterator protocol). @returns {Promise<IteratorResult<E>>} */
  next() {
    this._iterating = true;
    if (this._queue.length) {
      return Promise.resolve({ value: /** @type {E} */ (this._queue.shift()), done: false });
    }
    if (this._ended) {
      return this._endError
        ? Promise.reject(this._endError)
        : Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => this._takers.push({ resolve, reject }));
  }

  /** Stop iterating: unsubscribes. */
  async return() {
    await this.close();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** Unsubscribe (best effort: the server ends it with the connection anyway). */
  async close() {
    if (this._ended) return;
    const serverId = this.serverId;
    this._end(null);
    const ws = this._client._ws;
    if (serverId !== null && ws && this._client.connected) {
      try {
        await this._client._request(ws, "job.unsubscribe", { subscription: serverId });
      } catch {
        // gone with the connection anyway
      }
    }
  }
}
