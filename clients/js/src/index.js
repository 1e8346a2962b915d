// harnessd's JavaScript client: browsers (native WebSocket) and Node (the
// `ws` package, or Node's own WebSocket where it has one).
export { HarnessClient } from './client.js';
export { Turn } from './turn.js';
export { ErrorCodes, HarnessError, RpcError, ConnectionClosedError, ProtocolError } from './errors.js';
export {
  isEvent, isEventEnvelope, isKnownEvent, isChunk, isContentBlock, isTextBlock, isTurnEndReason, isUsage, isErrorObject,
  classifyFrame, parseNotification, statusOfReason, METHODS, NOTIFICATIONS, EVENT_TYPES, CHUNK_TYPES,
} from './validate.js';
