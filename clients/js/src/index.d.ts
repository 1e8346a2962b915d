// Types of harnessd's JavaScript client. The wire shapes follow
// docs/protocol.md; section numbers refer to it.

// ---- wire shapes ---------------------------------------------------------------

export interface TextBlock { type: 'text'; text: string }
export type ContentBlock =
  | TextBlock
  | { type: 'reasoning'; text: string }
  | { type: 'tool-call'; id: string; name: string; arguments: string };

export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  reasoningTokens?: number;
  cacheReadTokens?: number;
}

/** How a turn ended (§4.2). */
export type TurnEndReason =
  | { kind: 'completed' }
  | { kind: 'aborted'; reason: string }
  | { kind: 'max-tokens' }
  | { kind: 'error'; message: string; code?: string; step?: number }
  | { kind: 'interrupted' }
  | { kind: string; [field: string]: unknown };

export type PromptStatus = 'ok' | 'aborted' | 'error';
export interface PromptResult { status: PromptStatus; reason: TurnEndReason }

/** `chunk` of an `assistant/chunk` event (§6). */
export type Chunk =
  | { type: 'block-start'; index: number; blockType: 'text' | 'reasoning' | 'tool-call' }
  | { type: 'text-delta'; index: number; text: string }
  | { type: 'reasoning-delta'; index: number; text: string }
  | { type: 'tool-call-delta'; index: number; id?: string; name?: string; argumentsDelta: string }
  | { type: 'block-end'; index: number }
  | { type: 'usage'; usage: Usage }
  | { type: 'finish'; reason: 'stop' | 'tool-calls' | 'length' | 'error' };

export interface Question {
  id: string;
  question: string;
  header?: string;
  options?: { label: string; description?: string }[];
  multi_select?: boolean;
}

export interface Answer { id: string; selected?: string[]; custom?: string }

export type ApprovalOutcome = 'allowed-once' | 'allowed-for-session' | 'rejected';

/** The data of each event type (§6, §4.11, §4.12, §12.2, §13). */
export interface EventDataMap {
  'turn/start': { turn: number; trigger: { kind: string; source?: { kind: string } } };
  'user/message': { content: TextBlock[]; source?: { kind: string } };
  'step/start': { turn: number; step: number };
  'step/end': { turn: number; step: number };
  'assistant/chunk': { turn: number; step: number; chunk: Chunk };
  'assistant/message': {
    turn: number; step: number; content: ContentBlock[];
    provenance: { provider: string; model: string }; usage?: Usage;
  };
  'tool/call': { turn: number; step: number; callId: string; name: string; arguments: string };
  'tool/result': {
    turn: number; step: number; callId: string; content: TextBlock[]; isError: boolean;
    error?: { code: string; message: string }; meta?: Record<string, unknown>;
  };
  'approval/requested': {
    turn: number; step: number; callId: string; approvalId: string; toolName: string; arguments: string; reason: string;
  };
  'approval/resolved': {
    approvalId: string; outcome: ApprovalOutcome | 'cancelled'; source: 'client' | 'timeout' | 'cancel';
  };
  'question/requested': { turn: number; step: number; callId: string; questionId: string; questions: Question[] };
  'question/resolved': { questionId: string; outcome: 'answered' | 'timeout' | 'cancelled' };
  'compact/start': { turn: number };
  'compact/summary': { summary: string; shadowedSeqs: [number, number]; tokensBefore: number; tokensAfter: number };
  'compact/end': { turn: number; error?: string };
  'context/message': { source: string; path: string; content: string };
  'request/header': {
    provider: string; model: string; systemPrompt: string; tools: string[]; settings: Record<string, unknown>;
  };
  'todo/write': { todos: { content: string; status: 'pending' | 'in_progress' | 'completed' }[] };
  'turn/end': { turn: number; reason: TurnEndReason };
}

export type EventType = keyof EventDataMap;

/** A session event: `{type, seq, time, data}`, discriminated by `type`. */
export type SessionEvent = { [T in EventType]: { type: T; seq: number; time: number; data: EventDataMap[T] } }[EventType];

export interface ServerInfo { name: string; version: string; implementation?: string }
export interface InitializeResult {
  serverInfo: ServerInfo;
  protocolVersion: number;
  capabilities: { providers: string[]; methods: string[] };
}

/** `initialize` params (§4.1); all optional. */
export interface InitializeParams {
  cwd?: string;
  sandbox?: 'read-only' | 'workspace-write' | 'danger-full-access';
  provider?: string;
  model?: string;
  maxTokens?: number;
  protocolVersion?: number;
  clientInfo?: Record<string, unknown>;
  authToken?: string;
  onDisconnect?: 'cancel' | 'continue';
  contextWindow?: number;
  thinking?: 'enabled' | 'disabled';
  reasoningEffort?: 'high' | 'max';
  temperature?: number;
  stop?: string | string[];
  maxSteps?: number;
  approvalPolicy?: 'never' | 'ask';
}

export interface SessionEntry {
  sessionId: string;
  createdAt: number;
  updatedAt: number;
  lastSeq: number;
  turns: number;
  running: boolean;
  waiting?: 'approval' | 'question';
  parentSessionId?: string;
}

export interface ListResult { sessions: SessionEntry[]; nextCursor?: string }
export interface EventsResult { events: SessionEvent[]; lastSeq: number; more: boolean }

export interface Tool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  readOnly: boolean;
  source: string;
}

export interface SubagentStarted { parentSessionId: string; childSessionId: string }
export interface SubagentFinished {
  provider: string; agentId: string; parentSessionId: string; childSessionId: string;
  status: 'ok' | 'error'; stopReason: string; lastAssistantMessage?: string;
}

// ---- errors ------------------------------------------------------------------------

export declare const ErrorCodes: {
  readonly PARSE_ERROR: -32700;
  readonly INVALID_REQUEST: -32600;
  readonly METHOD_NOT_FOUND: -32601;
  readonly INVALID_PARAMS: -32602;
  readonly INTERNAL_ERROR: -32603;
  readonly SESSION_BUSY: -32001;
  readonly NOT_INITIALIZED: -32002;
  readonly SHUTTING_DOWN: -32003;
  readonly UNAUTHORIZED: -32004;
  readonly OVERLOADED: -32005;
};

export declare class HarnessError extends Error {}

/** A JSON-RPC error answer: `message` is the daemon's text. */
export declare class RpcError extends HarnessError {
  constructor(error: { code?: number; message?: string; data?: unknown }, method?: string);
  readonly code: number;
  readonly data: unknown;
  readonly method: string | undefined;
}

export declare class ConnectionClosedError extends HarnessError {}
export declare class ProtocolError extends HarnessError {}

// ---- the client ------------------------------------------------------------------

export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: any) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
}

export type WebSocketConstructor = new (url: string, protocols?: string | string[], options?: any) => WebSocketLike;

export interface ClientOptions {
  /** Bearer token of `--auth-token-file` / `--auth-file` (§2.4). */
  token?: string;
  /** Where the token goes: the Authorization header (the `ws` package) or `?access_token=` (browsers). */
  tokenIn?: 'header' | 'query';
  /** The WebSocket class; default: the global one, else the `ws` package. */
  WebSocket?: WebSocketConstructor;
  /** Connect again after a lost connection and follow sessions on (default true). */
  reconnect?: boolean;
  /** Delays between reconnect attempts, the last one repeating (±20 %). */
  backoffMs?: number[];
  /** Extra `initialize` params; with `reconnect`, `onDisconnect` defaults to "continue". */
  initialize?: InitializeParams;
}

export type ClientState = 'idle' | 'connecting' | 'open' | 'waiting' | 'closed';

export interface ClientEvents {
  event: (e: { sessionId: string; event: SessionEvent }) => void;
  notification: (n: { method: string; params: any }) => void;
  state: (state: ClientState, detail?: { resumed?: boolean; delayMs?: number; error?: Error }) => void;
  error: (err: Error) => void;
}

/** One prompt's turn: its events as they stream, and the prompt's answer. */
export declare class Turn implements AsyncIterable<SessionEvent> {
  readonly sessionId: string;
  readonly result: Promise<PromptResult>;
  readonly started: boolean;
  /** Keep no events for iteration (the caller reads them from the client's 'event' listener). */
  discardEvents(): void;
  [Symbol.asyncIterator](): AsyncIterator<SessionEvent>;
}

export declare class HarnessClient {
  constructor(url: string, options?: ClientOptions);
  readonly url: string;
  readonly state: ClientState;
  readonly connected: boolean;
  readonly initializeResult: InitializeResult | null;
  readonly serverInfo: ServerInfo | null;
  readonly methods: string[];

  connect(options?: { retry?: boolean }): Promise<InitializeResult>;
  reconnectNow(): void;
  close(): void;

  on<K extends keyof ClientEvents>(name: K, fn: ClientEvents[K]): () => void;
  off<K extends keyof ClientEvents>(name: K, fn: ClientEvents[K]): void;

  call<R = unknown>(method: string, params?: Record<string, unknown>): Promise<R>;

  prompt(sessionId: string, input: string | TextBlock[]): Turn;
  cancel(sessionId: string): Promise<{ cancelled: boolean }>;
  list(params?: { limit?: number; cursor?: string }): Promise<ListResult>;
  events(sessionId: string, params?: { afterSeq?: number; limit?: number }): Promise<EventsResult>;
  allEvents(sessionId: string, params?: { afterSeq?: number; limit?: number }): AsyncGenerator<SessionEvent>;
  subscribe(sessionId: string, params?: { afterSeq?: number }): Promise<{ lastSeq: number }>;
  unsubscribe(sessionId: string): Promise<{ unsubscribed: boolean }>;
  approve(sessionId: string, approvalId: string, outcome: ApprovalOutcome, message?: string): Promise<{ accepted: true }>;
  answer(sessionId: string, questionId: string, answers: Answer[]): Promise<{ accepted: true }>;
  tools(): Promise<{ tools: Tool[] }>;
  shutdown(): Promise<Record<string, never>>;
}

// ---- runtime checks ------------------------------------------------------------------

export declare function isEvent(value: unknown): value is SessionEvent;
export declare function isKnownEvent(value: unknown): value is SessionEvent;
export declare function isEventEnvelope(value: unknown): value is { type: string; seq: number; time: number; data: Record<string, unknown> };
export declare function isChunk(value: unknown): value is Chunk;
export declare function isContentBlock(value: unknown): value is ContentBlock;
export declare function isTextBlock(value: unknown): value is TextBlock;
export declare function isTurnEndReason(value: unknown): value is TurnEndReason;
export declare function isUsage(value: unknown): value is Usage;
export declare function isErrorObject(value: unknown): value is { code: number; message: string; data?: unknown };

export type Frame =
  | { kind: 'response'; id: string | number | null; result: unknown }
  | { kind: 'error'; id: string | number | null; error: { code: number; message: string; data?: unknown } }
  | { kind: 'notification'; method: string; params: unknown }
  | { kind: 'invalid'; reason: string };

export declare function classifyFrame(message: unknown): Frame;
export declare function parseNotification(frame: string | object):
  | { method: 'session.event'; params: { sessionId: string; event: SessionEvent } }
  | { method: 'subagent.started'; params: SubagentStarted }
  | { method: 'subagent.finished'; params: SubagentFinished }
  | { method: string; params: Record<string, unknown> };
export declare function statusOfReason(reason: TurnEndReason | null | undefined): PromptStatus;

export declare const METHODS: Readonly<Record<string, { params(p: unknown): boolean; result(r: unknown): boolean }>>;
export declare const NOTIFICATIONS: Readonly<Record<string, (params: unknown) => boolean>>;
export declare const EVENT_TYPES: readonly EventType[];
export declare const CHUNK_TYPES: readonly Chunk['type'][];
