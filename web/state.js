// What the page's modules share: which session is shown, the transcripts
// built so far, this page's own prompts, and hooks through which lower
// modules (transcript, turns) ask the upper ones (sidebar, composer, app)
// to redraw, without importing them.

export const state = {
  current: null,
  views: new Map(),      // sessionId -> Transcript
  lastStatus: new Map(), // sessionId -> { status, text }
  running: new Map(),    // sessionId -> pending prompt of this page
  routes: new Map(),     // child sessionId -> TurnView of a subagent started by this page
  cancelling: new Set(),
  sub: null,             // { id, epoch }: the session this connection subscribes to
  epoch: 0,              // counts connections: a subscription belongs to one
};

/** Filled in by app.js, composer.js and sidebar.js. */
export const ui = {
  switchSession: () => {},
  syncCurrent: () => {},
  subscribe: async () => {},
  updateControls: () => {},
  setTurnStatus: () => {},
  sessionsChanged: () => {},
  showTodos: () => {},
};
