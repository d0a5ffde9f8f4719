// --- errors: one root, one class per server code -----------------------------------------
// (hand-written; copied from gateway/codegen/runtime/errors.js. The generated part below
// adds one RpcError subclass per server code and enters it in ERRORS.)

/** Root of every error hero-client raises. */
export class HeroClientError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

/** The connection dropped before the answer: the call may or may not have run. */
export class ConnectionLost extends HeroClientError {}

/** No answer within the call's timeout. */
export class CallTimeout extends HeroClientError {}

/** A subscription ended without being closed (it could not be resumed). */
export class SubscriptionLost extends HeroClientError {}

/** The server answered with a JSON-RPC error: `code` is its code, `data` its details. */
export class RpcError extends HeroClientError {
  /**
   * @param {string} message
   * @param {unknown} [data]
   * @param {number} [code]
   */
  constructor(message, data = null, code = undefined) {
    super(message);
    /** @type {number} */
    this.code = code ?? /** @type {any} */ (new.target).code ?? 0;
    this.data = data;
  }
}

/**
 * The error class for each code the server answers (filled, then frozen, by the
 * generated classes).
 * @type {Record<string, typeof RpcError>}
 */
export const ERRORS = {};

/**
 * The error for an error object (RpcError itself for codes not listed).
 * @param {number} code
 * @param {string} message
 * @param {unknown} [data]
 * @returns {RpcError}
 */
export function errorFor(code, message, data = null) {
  const cls = ERRORS[String(code)];
  return cls ? new cls(message, data) : new RpcError(message, data, code);
}
