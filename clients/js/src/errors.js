// Errors the client raises. A JSON-RPC error answer becomes an RpcError that
// keeps the daemon's code, message and data, so callers can branch on the
// code (docs/protocol.md §10) instead of parsing messages.

/** JSON-RPC error codes harnessd answers with. */
export const ErrorCodes = Object.freeze({
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  SESSION_BUSY: -32001,
  NOT_INITIALIZED: -32002,
  SHUTTING_DOWN: -32003,
  UNAUTHORIZED: -32004,
  OVERLOADED: -32005,
});

/** Base class of every error this package throws. */
export class HarnessError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The daemon answered a request with a JSON-RPC error. */
export class RpcError extends HarnessError {
  /**
   * @param {{code?: number, message?: string, data?: unknown}} error  the answer's `error` member
   * @param {string} [method]  the request's method, for messages and logs
   */
  constructor(error, method) {
    // `message` is the daemon's text unchanged: callers show it or match it.
    super(typeof error?.message === 'string' ? error.message : 'unknown error');
    this.code = Number.isInteger(error?.code) ? error.code : ErrorCodes.INTERNAL_ERROR;
    this.data = error?.data;
    this.method = method;
  }

  toString() {
    return `${this.name}: ${this.message} (${this.code})`;
  }
}

/** The connection closed (or never opened) before the request was answered. */
export class ConnectionClosedError extends HarnessError {}

/** The daemon sent a frame that breaks the protocol's shapes. */
export class ProtocolError extends HarnessError {}
